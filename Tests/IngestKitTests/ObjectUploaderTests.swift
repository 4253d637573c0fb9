import Foundation
import Synchronization
import Testing

@testable import IngestKit

/// The uploader driven through a ``ScriptedStore``: each failure the S3 contract allows, at
/// each step of a single PutObject and of a multipart upload, with what the real journal
/// says after each run and what the bucket holds. No server, no network: the store keeps
/// S3's rules and fails on cue.
@Suite struct ObjectUploaderTests {
    static let key = "station/2026-06-01/DJI-1a2b3c4d/DCIM/DJI_0001.JPG"
    static let partSize: Int64 = 5 << 20

    /// One staged file, its journal and a store: what an uploader needs.
    struct Bench {
        let directory = TemporaryDirectory()
        let store: ScriptedStore
        let journal: Journal
        let bytes: [UInt8]
        let fingerprint: Fingerprint
        let stagedPath: String
        let uploadID: String
        let partSize: Int64?

        let volume = VolumeIdentity(
            key: "uuid:1A2B-3C4D", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/",
            fsType: "vfat", device: nil)
        static let target = S3Destination(endpoint: "http://127.0.0.1:9", bucket: "cards", region: "us-east-1", addressing: .path)

        /// A file of `size` random bytes, staged and claimed: multipart with `partSize`,
        /// a single PutObject without.
        init(
            size: Int, partSize: Int64?, checksum: PartDigestAlgorithm = .crc32c, store: ScriptedStore = ScriptedStore()
        ) async throws {
            self.partSize = partSize
            self.store = store
            journal = try Journal(path: directory.path + "/journal.sqlite")
            try await journal.noteVolume(volume)
            bytes = randomBytes(size)
            let scratch = try directory.write("scratch", bytes)
            fingerprint = try Fingerprint.ofFile(at: scratch).0
            let area = try StagingArea(root: directory.path + "/staging")
            stagedPath = area.path(for: fingerprint)
            try FileManager.default.createDirectory(
                atPath: (stagedPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: scratch, toPath: stagedPath)
            let file = ScannedFile(path: CardPath("DCIM/DJI_0001.JPG"), size: Int64(size), mtime: 1)
            try await journal.record(
                [.staged(StagedFile(file: file, fingerprint: fingerprint, deduplicated: false, verified: false))],
                volumeKey: volume.key)
            let claim = UploadClaim(
                path: file.path, fingerprint: fingerprint, size: file.size, target: Self.target, key: ObjectUploaderTests.key,
                headers: [SigV4Header("x-amz-meta-" + ObjectLabelKeys.fingerprint, fingerprint.hex)], partSize: partSize,
                checksum: checksum)
            guard case .planned(let record) = try await journal.claim([claim], volumeKey: volume.key).first else {
                throw CocoaError(.featureUnsupported)
            }
            uploadID = record.id
        }

        /// The upload and its parts as the journal has them now.
        func journalled() async throws -> (UploadRecord, [UploadPartRecord]) {
            try #require(try await journal.upload(id: uploadID))
        }

        func fileState() async throws -> FileState? {
            try await journal.files(ofVolume: volume.key)[CardPath("DCIM/DJI_0001.JPG")]?.state
        }

        /// One run of the uploader from what the journal says, as a process would do it, told
        /// what the probe of conditional writes would find on the store.
        /// `adoptAfter`: how long an upload of the key found in progress is waited for
        /// (``UploadSettings/adoptAfter``); none by default, so a stray is taken over at once.
        func run(
            resumed: Bool = false, confirming: Bool = false, signPayloads: Bool = false, adoptAfter: Duration = .zero,
            verified: (@Sendable () async -> Void)? = nil
        ) async throws -> UploadResult {
            let (record, parts) = try await journalled()
            var settings = UploadSettings()
            settings.partSize = partSize ?? ObjectUploaderTests.partSize
            settings.signPayloads = signPayloads
            settings.adoptAfter = adoptAfter
            let uploader = ObjectUploader(
                record: record, client: store, journal: journal, stagedPath: stagedPath,
                limiter: TransferLimiter(maxRequests: 4, maxBytes: 1 << 30), settings: settings, sink: DiscardingSink(),
                hooks: FaultHooks(), stop: StopFlag(), releases: nil,
                conditionalWrites: store.honoursConditionalWrites, verified: verified)
            return await UploadRun.upload(uploader, parts: parts, resumed: resumed, checksums: nil, confirming: confirming)
        }

        /// The bucket holds the file's bytes at `key`, with its fingerprint.
        func landed(at key: String = ObjectUploaderTests.key) -> Bool {
            guard let object = store.objects[key] else { return false }
            return object.bytes == bytes && object.metadata[ObjectLabelKeys.fingerprint] == fingerprint.hex
        }
    }

    static func failed(_ result: UploadResult) -> UploadError? {
        if case .failed(let error) = result { return error }
        return nil
    }

    // MARK: a single PutObject

    @Test func aSmallFileIsOnePutObjectAndTheJournalSaysUploaded() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        #expect(try await bench.journalled().0.phase == .created)

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        #expect(bench.store.calls(.put) == 1)
        #expect(try await bench.journalled().0.phase == .completed)
        #expect(try await bench.fileState() == .uploaded)
    }

    /// A body of 64 KiB or less is read into memory once; its MD5 and signed SHA-256 come
    /// from those bytes, and the store checks both against what it received, as S3 does.
    @Test func aSmallBodyReadIntoMemoryGoesWithTheDigestAndSignedHashOfItsBytes() async throws {
        for (size, resumed) in [(20_000, false), (20_000, true), (Int(smallCopyLimit), false), (0, false)] {
            let bench = try await Bench(size: size, partSize: nil, checksum: .md5)
            #expect(try await bench.run(resumed: resumed, signPayloads: true) == .uploaded(alreadyThere: false), "\(size) bytes")
            #expect(bench.landed(), "\(size) bytes")
            #expect(bench.store.calls(.put) == 1, "\(size) bytes")
        }
    }

    @Test func aPutObjectWhoseAnswerCarriesTheDigestOfTheBytesSentIsTheOnlyRequest() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        let requests = ScriptedStore.Operation.allCases.map { bench.store.calls($0) }.reduce(0, +)
        #expect(requests == 1, "no HeadObject, no ListMultipartUploads: the answer verified it")
    }

    @Test func aPutObjectWhoseAnswerCarriesNoDigestIsLookedAtBeforeItCounts() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil, store: ScriptedStore(echoesChecksums: false))
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        #expect(bench.store.calls(.put) == 1)
        #expect(bench.store.calls(.head) == 1)
        #expect(bench.store.calls(.abortUploads) == 0, "a single PUT opens no multipart upload to look for")
    }

    @Test func aPutObjectWhoseAnswerIsLostIsFoundByTheNextRunsConditionalWriteAndNothingIsReplaced() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        bench.store.script(.put, .after(ScriptedStore.connectionReset()))

        let first = try await bench.run()
        #expect(Self.failed(first)?.exitStatus == .unavailable)
        let (record, _) = try await bench.journalled()
        #expect(record.phase == .created, "nothing is journalled before a PutObject")
        #expect(record.failures == 1)
        #expect(try await bench.fileState() == .staged)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: true))
        #expect(bench.store.calls(.put) == 2, "the second write is refused (412): the key holds the lost answer's object")
        #expect(bench.landed())
        #expect(try await bench.fileState() == .uploaded)
    }

    /// The file's slot among the files in flight is given back once the object verified,
    /// before the completion waits for its batch of the journal; never for an upload that
    /// failed.
    @Test func aVerifiedObjectGivesItsSlotBackOnceAndBeforeItsCompletionIsJournalled() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        let (journal, id) = (bench.journal, bench.uploadID)
        let phasesSeen = Mutex<[String]>([])
        let verified: @Sendable () async -> Void = {
            let phase = (try? await journal.upload(id: id))?.0.phase.rawValue ?? "none"
            phasesSeen.withLock { $0.append(phase) }
        }
        bench.store.script(.put, .before(ScriptedStore.serverError()))
        #expect(Self.failed(try await bench.run(verified: verified)) != nil)
        #expect(phasesSeen.withLock { $0 }.isEmpty)

        #expect(try await bench.run(resumed: true, verified: verified) == .uploaded(alreadyThere: false))
        #expect(phasesSeen.withLock { $0 } == [UploadStateMachine.Phase.created.rawValue])
        #expect(try await bench.journalled().0.phase == .completed)
    }

    @Test func aPutObjectRefusedAfterItsRetriesFailsAndIsSentByTheNextRun() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        bench.store.script(.put, .before(ScriptedStore.serverError()))

        #expect(Self.failed(try await bench.run())?.exitStatus == .unavailable)
        #expect(bench.store.objects.isEmpty)
        #expect(try await bench.journalled().0.lastError?.contains("InternalError") == true)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(bench.landed())
        #expect(try await bench.journalled().0.lastError == nil)
    }

    @Test func aKeyHoldingOtherBytesSendsTheFileToItsAlternativeKeyAndReplacesNothing() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        let theirs = randomBytes(5_000)
        bench.store.place(Self.key, bytes: theirs, metadata: [ObjectLabelKeys.fingerprint: "0123456789abcdef0123456789abcdef"])

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.store.objects[Self.key]?.bytes == theirs, "the other writer's object is untouched")
        #expect(bench.landed(at: alternative))
        #expect(try await bench.journalled().0.key == alternative)
        #expect(try await bench.fileState() == .uploaded)
    }

    @Test func theSameBytesAlreadyAtTheKeyCountAsUploadedWithNothingSent() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        bench.store.place(Self.key, bytes: bench.bytes, metadata: [ObjectLabelKeys.fingerprint: bench.fingerprint.hex])

        #expect(try await bench.run() == .uploaded(alreadyThere: true))
        #expect(bench.store.objects.count == 1)
        #expect(try await bench.fileState() == .uploaded)
    }

    // MARK: a server that ignores If-None-Match

    @Test func onAServerThatIgnoresIfNoneMatchAKeyHoldingOtherBytesIsSeenBeforeTheWriteAndKeptWhole() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil, store: ScriptedStore(honoursConditionalWrites: false))
        let theirs = randomBytes(5_000)
        bench.store.place(Self.key, bytes: theirs, metadata: [ObjectLabelKeys.fingerprint: "0123456789abcdef0123456789abcdef"])

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.store.objects[Self.key]?.bytes == theirs, "the HEAD before the write found it taken")
        #expect(bench.landed(at: alternative))
        #expect(bench.store.calls(.put) == 1, "one PUT, to the alternative key")
    }

    @Test func onAServerThatIgnoresIfNoneMatchAKeyTakenWhileThePartsWentIsSeenBeforeCompleteAndKeptWhole() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(honoursConditionalWrites: false))
        let theirs = randomBytes(7_000)
        // The first HEAD (before the parts) finds the key free; the second, before
        // CompleteMultipartUpload, finds another writer's object there.
        bench.store.script(
            .head, call: 2,
            .anotherWriter(key: Self.key, bytes: theirs, metadata: [ObjectLabelKeys.fingerprint: String(repeating: "f", count: 32)]))

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.store.objects[Self.key]?.bytes == theirs, "Complete was never sent to the taken key")
        #expect(bench.landed(at: alternative))
        #expect(bench.store.openUploads.isEmpty, "the upload at the taken key is aborted")
        #expect(try await bench.journalled().0.key == alternative)
    }

    // MARK: multipart

    @Test func aMultipartUploadSendsEachPartOnceAndTheJournalKeepsNoPartsOnceItIsIn() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        #expect(bench.store.partsSent.sorted() == [1, 2, 3])
        #expect(bench.store.openUploads.isEmpty)
        let (record, parts) = try await bench.journalled()
        #expect(record.phase == .completed)
        #expect(parts.isEmpty)
        #expect(try await bench.fileState() == .uploaded)
    }

    @Test func aPartRefusedAfterItsRetriesLeavesTheOthersJournalledAndTheNextRunSendsOnlyIt() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        bench.store.script(.uploadPart, call: 3, .before(ScriptedStore.serverError()))

        #expect(Self.failed(try await bench.run())?.exitStatus == .unavailable)
        let (record, parts) = try await bench.journalled()
        #expect(record.phase == .failed)
        #expect(record.uploadID != nil, "kept, so the next run lists its parts")
        // Parts acknowledged after the failure ended the run are not journalled; the next
        // run adopts them from ListParts (their ETags are the MD5s of the staged ranges).
        #expect((1...2).contains(parts.count), "\(parts.map(\.number))")
        #expect(bench.store.objects.isEmpty)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(bench.store.partsSent.count == 3, "one part sent again, not three: \(bench.store.partsSent)")
        #expect(bench.store.calls(.create) == 1)
        #expect(bench.landed())
    }

    @Test func anUploadTheServerForgetsIsStartedAgainAndNoneIsLeftOpen() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        bench.store.script(.uploadPart, call: 2, .before(ScriptedStore.noSuchUpload()))

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.store.calls(.create) == 2)
        #expect(bench.landed())
        // The scripted store still lists the upload it answered NoSuchUpload for (a real one
        // is gone): it is neither taken over again nor aborted, since it may be another
        // station's; the orphan sweep's, once old.
        #expect(bench.store.openUploads.count == 1)
        #expect(try await bench.journalled().0.restartCount == 1)
    }

    @Test func aCompleteWhoseAnswerIsLostIsVerifiedByTheNextRunWithoutSendingAPart() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        bench.store.script(.complete, .after(ScriptedStore.connectionReset()))

        let first = try await bench.run()
        #expect(Self.failed(first)?.exitStatus == .unavailable)
        let (record, parts) = try await bench.journalled()
        #expect(record.phase == .completing)
        #expect(parts.count == 3)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: true))
        #expect(bench.store.partsSent.count == 3)
        #expect(bench.store.calls(.complete) == 1)
        #expect(bench.landed())
        #expect(try await bench.journalled().1.isEmpty)
    }

    @Test func aCreateMultipartUploadWhoseAnswerIsLostLeavesNoOpenUploadOnceTheObjectIsIn() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        bench.store.script(.create, .after(ScriptedStore.connectionReset()))

        #expect(Self.failed(try await bench.run()) != nil)
        #expect(bench.store.openUploads.count == 1, "the server made an upload the journal never heard of")
        #expect(try await bench.journalled().0.uploadID == nil)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(bench.landed())
        #expect(bench.store.openUploads.isEmpty)
    }

    @Test func aKeyTakenWhileThePartsWentIsNeverReplacedAndTheObjectGoesToItsAlternativeKey() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        let theirs = randomBytes(7_000)
        bench.store.script(
            .complete,
            .anotherWriter(key: Self.key, bytes: theirs, metadata: [ObjectLabelKeys.fingerprint: String(repeating: "f", count: 32)]))

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.store.objects[Self.key]?.bytes == theirs, "Complete carried If-None-Match: the 412 kept theirs")
        #expect(bench.landed(at: alternative))
        #expect(bench.store.openUploads.isEmpty, "the upload at the taken key is aborted")
        #expect(bench.store.calls(.create) == 2)
        #expect(try await bench.journalled().0.key == alternative)
        #expect(try await bench.fileState() == .uploaded)
    }

    // MARK: the staged copy and the journal's word

    @Test func aStagedCopyChangedOnDiskIsNeverUploadedAndItsFileIsPendingAgain() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        let handle = try #require(FileHandle(forUpdatingAtPath: bench.stagedPath))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: [~bench.bytes[1000]])
        try handle.close()

        #expect(Self.failed(try await bench.run(resumed: true))?.exitStatus == .integrity)

        #expect(bench.store.objects.isEmpty)
        #expect(bench.store.partsSent.isEmpty)
        #expect(try await bench.journal.upload(id: bench.uploadID) == nil, "the upload is dropped")
        #expect(try await bench.fileState() == .pending, "the card's file is copied afresh next time")
        #expect(!FileManager.default.fileExists(atPath: bench.stagedPath), "moved aside, never deleted")
    }

    @Test func aStagedCopyThatCannotBeReadNowIsKeptWithItsUploadAndTheNextRunSendsIt() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        // A directory where the copy was: opening works, reading fails (EISDIR), as a read
        // fails on EIO, EMFILE or ENOMEM: a trouble of the moment, not proof the copy is wrong.
        let away = bench.stagedPath + ".away"
        try FileManager.default.moveItem(atPath: bench.stagedPath, toPath: away)
        try FileManager.default.createDirectory(atPath: bench.stagedPath, withIntermediateDirectories: false)

        let failed = try #require(Self.failed(try await bench.run(resumed: true)))
        #expect(failed.exitStatus == .cantCreate, "\(failed)")
        #expect(failed.message.contains("it is kept"), "\(failed)")
        #expect(bench.store.partsSent.isEmpty)
        #expect(try await bench.journalled().0.failures == 1, "kept and counted towards quarantine")
        #expect(try await bench.fileState() == .staged, "not sent back to the card, which may be gone")

        try FileManager.default.removeItem(atPath: bench.stagedPath)
        try FileManager.default.moveItem(atPath: away, toPath: bench.stagedPath)
        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(bench.landed())
    }

    @Test func aPartRefusedAsCorruptWhileTheStagedCopyStillHashesRightKeepsTheCopyAndTheUpload() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        // What the S3 client gives up with once the server has answered BadDigest twice.
        let badDigest = S3ClientError.server(
            S3Error(status: 400, code: .badDigest, message: "The Content-MD5 you specified did not match what we received"),
            attempts: 2)
        bench.store.script(.uploadPart, call: 1, .before(badDigest))

        let failed = try #require(Self.failed(try await bench.run(resumed: true)))
        #expect(failed.exitStatus == .integrity, "\(failed)")
        #expect(failed.message.contains("still has its fingerprint"), "\(failed)")
        #expect(FileManager.default.fileExists(atPath: bench.stagedPath), "the copy may be the only one left")
        #expect(try await bench.journal.upload(id: bench.uploadID) != nil, "the upload is kept")
        #expect(try await bench.fileState() == .staged)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(bench.landed())
    }

    @Test func contentTheJournalSaysIsInTheBucketButIsGoneIsSentAgainToTheSameKey() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        bench.store.remove(Self.key)

        #expect(try await bench.run(confirming: true) == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        #expect(bench.store.calls(.put) == 2)
        #expect(try await bench.journalled().0.phase == .completed)
    }

    // MARK: what proves an object

    @Test(arguments: [nil, partSize] as [Int64?])
    func theCompletionRecordsTheETagOfTheObjectItsLookVerified(partSize: Int64?) async throws {
        let bench = try await Bench(size: partSize == nil ? 100_000 : 12 << 20, partSize: partSize)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let record = try await bench.journalled().0
        let stored = try #require(bench.store.objects[Self.key])
        #expect(record.etag == stored.etag, "the server's ETag, recorded with the completion")
        #expect(record.recordedObject?.size == record.size)
        #expect(!record.etagLearned)
    }

    /// Someone with write access replaced the object with other bytes of the same size and
    /// copied its metadata: the label says ours, the ETag recorded at completion says not.
    @Test func anObjectReplacedWithItsMetadataCopiedIsNotOursAndTheFileGoesToItsAlternativeKey() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        let forged = randomBytes(100_000)
        bench.store.place(Self.key, bytes: forged, metadata: [ObjectLabelKeys.fingerprint: bench.fingerprint.hex])

        // A rerun confirming the content (content dedupe) looks, and does not believe the label.
        #expect(try await bench.run(confirming: true) == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.store.objects[Self.key]?.bytes == forged, "nothing is replaced, not even a forgery")
        #expect(bench.landed(at: alternative))
        #expect(try await bench.journalled().0.key == alternative)
    }

    /// After a check proved the object at the key foreign (``Journal/noteForeignObject(key:etag:target:)``)
    /// and restarted the upload (which forgets the recorded ETag), the look still refuses it.
    @Test func anObjectACheckProvedForeignIsNeverTakenForOursWhateverItsLabel() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        let forged = randomBytes(100_000)
        bench.store.place(Self.key, bytes: forged, metadata: [ObjectLabelKeys.fingerprint: bench.fingerprint.hex])
        let etag = try #require(bench.store.objects[Self.key]?.etag)
        try await bench.journal.noteForeignObject(key: Self.key, etag: etag, target: Bench.target)

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let alternative = try KeyTemplate.alternativeKey(Self.key, fingerprint: bench.fingerprint)
        #expect(bench.landed(at: alternative))
        #expect(bench.store.objects[Self.key]?.bytes == forged)
    }

    @Test func aStagedCopyLostAfterItsObjectVerifiedCountsAsUploadedNotAsAnIntegrityError() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        // A power cut took the completion's record but not the copy's deletion.
        _ = try await bench.journal.restartUpload(id: bench.uploadID, key: Self.key)
        try FileManager.default.removeItem(atPath: bench.stagedPath)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: true))
        #expect(try await bench.fileState() == .uploaded)
        #expect(bench.store.calls(.create) == 1, "nothing sent again")
    }

    @Test func aStagedCopyLostBeforeItsObjectExistedSendsItsFileBackToItsCardWithExitStatusOne() async throws {
        let bench = try await Bench(size: 100_000, partSize: nil)
        try FileManager.default.removeItem(atPath: bench.stagedPath)

        let failed = try #require(Self.failed(try await bench.run(resumed: true)))
        #expect(failed.exitStatus == .partial, "a copy missing is no object that failed to verify: \(failed)")
        #expect(failed.message.contains("is gone"), "\(failed)")
        #expect(try await bench.fileState() == .pending)
        #expect(try await bench.journal.upload(id: bench.uploadID) == nil)
    }
}
