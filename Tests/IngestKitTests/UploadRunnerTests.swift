import Foundation
import Logging
import Testing

@testable import IngestKit

/// The runner of a card's uploads (``UploadRunner``) driven through a ``ScriptedStore``: the
/// card's claims written to the journal as a card run writes them, the queue woken, and every
/// upload run to its end, with what the bucket, the journal and the run's totals say after.
/// The journal is a real one in a temporary state directory, since it is the runner's queue
/// (an in-memory log cannot feed it). No server, no network, no sleep.
@Suite struct UploadRunnerTests {
    static let target = CardFixture.target
    static let partSize: Int64 = 5 << 20

    /// A station's state directory, its journal knowing one card, and the store behind
    /// every destination.
    typealias Station = CardFixture

    @Test func aCardsClaimsAreTheQueueAndEveryObjectIsPutVerifiedAndItsRowDone() async throws {
        let station = try await Station()
        let runner = try station.service().runner(sink: DiscardingSink())
        try await runner.follow(volume: station.volume.key)
        var files: [(name: String, bytes: [UInt8])] = (1...3).map { ("DCIM/IMG_000\($0).JPG", randomBytes(40_000 + $0)) }
        files.append(("DCIM/DJI_0004.MP4", randomBytes(11 << 20)))
        var claims: [UploadClaim] = []
        for (name, bytes) in files {
            claims.append(try await station.stage(name, bytes, partSize: bytes.count > 1 << 20 ? Self.partSize : nil))
        }

        let planned = try await station.claim(claims, for: runner)
        let (totals, error) = await runner.finish()

        #expect(error == nil)
        #expect(planned.count == 4)
        #expect(totals.uploaded == 4 && totals.failed == 0 && totals.notAttempted == 0 && totals.alreadyThere == 0)
        #expect(totals.uploadedBytes == files.reduce(0) { $0 + Int64($1.bytes.count) })
        for (name, bytes) in files {
            #expect(station.store.objects["station/card/" + name]?.bytes == bytes, "\(name) is in the bucket")
            #expect(try await station.state(of: CardPath(name)) == .uploaded)
        }
        for upload in planned { #expect(try await station.phase(of: upload) == .completed) }
        #expect(station.store.calls(.put) == 3 && station.store.calls(.create) == 1)
        #expect(station.store.partsSent.sorted() == [1, 2, 3])
        #expect(station.store.calls(.headBucket) == 1 && station.store.calls(.probe) == 1, "the destination is checked once")
        #expect(totals.stagedCopiesRemoved == 4, "no retention: each staged copy goes once its object verified")
    }

    /// A PutObject whose answer was lost fails its upload with 69 and stops the destination
    /// (the next file is not attempted, and stays pending); the next process reads both from
    /// the journal, finds the first object by its refused conditional write and sends the other.
    @Test func anAnswerLostStopsTheDestinationAndTheNextRunFindsTheObjectAndSendsTheRest() async throws {
        let station = try await Station()
        let files = [("DCIM/IMG_0001.JPG", randomBytes(30_000)), ("DCIM/IMG_0002.JPG", randomBytes(31_000))]
        var claims: [UploadClaim] = []
        for (name, bytes) in files { claims.append(try await station.stage(name, bytes)) }
        station.store.script(.put, .after(ScriptedStore.connectionReset()))

        let first = try station.service(filesInFlight: 1).runner(sink: DiscardingSink())
        try await first.follow(volume: station.volume.key)
        let planned = try await station.claim(claims, for: first)
        let (failedRun, failure) = await first.finish()

        #expect(failure?.exitStatus == .unavailable)
        #expect(failedRun.failed == 1 && failedRun.notAttempted == 1 && failedRun.uploaded == 0)
        #expect(station.store.objects.count == 1, "the lost answer's object is in the bucket")
        for upload in planned { #expect(try await station.phase(of: upload) == .created) }
        #expect(try await station.state(of: CardPath(files[0].0)) == .staged)

        let next = try station.service().runner(sink: DiscardingSink())
        try await next.follow(volume: station.volume.key)
        let (resumed, error) = await next.finish()

        #expect(error == nil)
        #expect(resumed.alreadyThere == 1 && resumed.uploaded == 1 && resumed.failed == 0)
        #expect(station.store.calls(.put) == 3, "the refused second write of the first file, then the second file")
        for (name, bytes) in files {
            #expect(station.store.objects["station/card/" + name]?.bytes == bytes)
            #expect(try await station.state(of: CardPath(name)) == .uploaded)
        }
        for upload in planned { #expect(try await station.phase(of: upload) == .completed) }
    }

    /// Another writer puts other bytes at the key just before the file's PutObject: its
    /// conditional write is refused, nothing is replaced, and the file goes to its
    /// alternative key, which the journal records; the run counts it uploaded.
    @Test func anotherWriterFirstKeepsTheirObjectAndTheFileGoesToItsAlternativeKey() async throws {
        let station = try await Station()
        let bytes = randomBytes(25_000)
        let claim = try await station.stage("DCIM/IMG_0001.JPG", bytes)
        let theirs = randomBytes(4_000)
        station.store.script(
            .put,
            .anotherWriter(key: claim.key, bytes: theirs, metadata: [ObjectLabelKeys.fingerprint: String(repeating: "e", count: 32)]))

        let runner = try station.service().runner(sink: DiscardingSink())
        try await runner.follow(volume: station.volume.key)
        let planned = try await station.claim([claim], for: runner)
        let (totals, error) = await runner.finish()

        #expect(error == nil)
        #expect(totals.uploaded == 1 && totals.failed == 0)
        let alternative = try KeyTemplate.alternativeKey(claim.key, fingerprint: claim.fingerprint)
        #expect(station.store.objects[claim.key]?.bytes == theirs, "the other writer's object is untouched")
        #expect(station.store.objects[alternative]?.bytes == bytes)
        let upload = try #require(planned.first)
        let record = try #require(try await station.journal.upload(id: upload.id)).0
        #expect(record.key == alternative && record.phase == .completed)
        #expect(try await station.state(of: claim.path) == .uploaded)
    }
}

/// What the runner's tests do with a station: its upload service, and a card's files staged
/// and claimed as a card run stages and claims them.
extension CardFixture {
    /// An upload service as a process makes one, whose stores are all ``store``.
    func service(filesInFlight: Int = 64) throws -> UploadService {
        var settings = UploadSettings()
        settings.filesInFlight = filesInFlight
        let store = self.store
        return try UploadService(
            journal: journal, state: state, settings: settings,
            stores: StoreFactory(store: { _ in store }, cutTransfers: {}), events: DiscardingSink(),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), keyPrefix: "station/")
    }

    /// The card's file `name` holding `bytes`, staged and journalled as staged: its claim,
    /// multipart with `partSize`, a single PutObject without.
    func stage(_ name: String, _ bytes: [UInt8], partSize: Int64? = nil) async throws -> UploadClaim {
        let scratch = try directory.write("scratch", bytes)
        let fingerprint = try Fingerprint.ofFile(at: scratch).0
        let stagedPath = try StagingArea(root: state.stagingPath).path(for: fingerprint)
        try FileManager.default.createDirectory(
            atPath: (stagedPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: scratch, toPath: stagedPath)
        let file = ScannedFile(path: CardPath(name), size: Int64(bytes.count), mtime: 1)
        try await recordStaged(file, fingerprint: fingerprint)
        return UploadClaim(
            path: file.path, fingerprint: fingerprint, size: file.size, target: UploadRunnerTests.target,
            key: "station/card/" + name,
            headers: [SigV4Header("x-amz-meta-" + ObjectLabelKeys.fingerprint, fingerprint.hex)], partSize: partSize,
            checksum: .crc32c)
    }

    /// What a card run does with its staged files: the claims committed to the journal,
    /// then the runner told, which reads them back from there. Returns the uploads planned.
    @discardableResult
    func claim(_ claims: [UploadClaim], for runner: UploadRunner) async throws -> [UploadRecord] {
        let planned = try await journal.claim(claims, volumeKey: volume.key).compactMap { result -> UploadRecord? in
            if case .planned(let record) = result { return record }
            return nil
        }
        runner.planned(planned)
        return planned
    }

    func phase(of upload: UploadRecord) async throws -> UploadStateMachine.Phase? {
        try await journal.upload(id: upload.id)?.0.phase
    }

    func state(of path: CardPath) async throws -> FileState? {
        try await journal.files(ofVolume: volume.key)[path]?.state
    }
}
