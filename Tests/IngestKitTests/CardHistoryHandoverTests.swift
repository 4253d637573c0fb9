import Foundation
import Testing

@testable import IngestKit

/// One card's ASC MHL history written by two stations into one bucket (``ScriptedStore``):
/// the chain is the lock on a generation's number, the station that loses it takes the
/// other's generations in and lists only what they do not, and no manifest is ever left in
/// the bucket outside the chain.
@Suite struct CardHistoryHandoverTests {
    typealias Station = UploadRunnerTests.Station
    static let folder = "station/card/"
    static let chainKey = folder + "ascmhl/" + ASCMHL.chainFileName

    /// The station's card: `files` uploaded through its runner, every one verified, and the
    /// card's folder noted as a run notes it.
    static func ingest(_ files: [(name: String, bytes: [UInt8])], at station: Station) async throws -> UploadService {
        let service = try station.service()
        let runner = service.runner(sink: DiscardingSink())
        try await runner.follow(volume: station.volume.key)
        var claims: [UploadClaim] = []
        for (name, bytes) in files { claims.append(try await station.stage(name, bytes)) }
        try await station.claim(claims, for: runner)
        let (_, error) = await runner.finish()
        #expect(error == nil)
        try await station.journal.noteCardFolder(folder, ofVolume: station.volume.key)
        return service
    }

    static func history(of station: Station, in service: UploadService) async throws -> CustodyOutcome {
        await service.writeCustody(ofVolume: station.volume.key, creator: CustodyCreator(config: Config(), scene: nil))
    }

    /// The history in the bucket: the chain's generations, and every name under `ascmhl/`.
    static func bucketHistory(_ store: ScriptedStore) throws -> (chain: [MHLGeneration], names: Set<String>) {
        let chain = try #require(store.objects[chainKey].flatMap { ASCMHL.parseChain($0.bytes) })
        let names = Set(store.objects.keys.filter { $0.hasPrefix(folder + "ascmhl/") }.map { String($0.dropFirst(folder.count + 7)) })
        return (chain, names)
    }

    static let photos: [(name: String, bytes: [UInt8])] = [("DCIM/IMG_0001.JPG", randomBytes(30_000)), ("DCIM/IMG_0002.JPG", randomBytes(20_000))]

    @Test func aStationThatFindsAnothersGenerationListingEveryFileWritesNone() async throws {
        let store = ScriptedStore()
        let first = try await Station(store: store), second = try await Station(store: store)
        let one = try await Self.history(of: first, in: Self.ingest(Self.photos, at: first))
        #expect(one.error == nil && one.uploaded.count == 1)
        let before = store.objects

        let two = try await Self.history(of: second, in: Self.ingest(Self.photos, at: second))

        #expect(two.error == nil, "\(String(describing: two.error))")
        #expect(two.uploaded.isEmpty, "no generation of its own: the first lists every file")
        #expect(store.objects == before, "the bucket is left as the first station left it")
        let generations = try await second.journal.generations(ofVolume: second.volume.key)
        #expect(generations.map(\.number) == [1] && generations.allSatisfy { $0.uploadedAt != nil })
        #expect(generations.first?.fileName == one.uploaded.first?.fileName, "the first station's generation, taken in")
        #expect(try await second.journal.cardTallies(volumeKey: second.volume.key).first?.unlisted == 0)
        let local = second.state.path + "/custody/" + (try FileManager.default.contentsOfDirectory(atPath: second.state.path + "/custody").first ?? "-")
        #expect(FileManager.default.contents(atPath: local + "/ascmhl/" + ASCMHL.chainFileName).map(Array.init) == before[Self.chainKey]?.bytes,
                "the local chain is the bucket's")
    }

    @Test func aStationThatLosesTheChainToAnotherListsOnlyWhatTheOthersGenerationDoesNot() async throws {
        // The first station's history, written where the second cannot see it yet.
        let elsewhere = ScriptedStore()
        let first = try await Station(store: elsewhere)
        let one = try await Self.history(of: first, in: Self.ingest(Self.photos, at: first))
        let theirs = try #require(one.uploaded.first)
        let theirChain = try #require(elsewhere.objects[Self.chainKey]?.bytes)
        let theirManifest = try #require(elsewhere.objects[theirs.manifestKey]?.bytes)

        // The second station has a file more. Its first chain PUT meets the first station's
        // chain, written just before it arrives (with its manifest, as a finished history).
        let store = ScriptedStore()
        let second = try await Station(store: store)
        let extra = ("DCIM/IMG_0003.JPG", randomBytes(10_000))
        let service = try await Self.ingest(Self.photos + [extra], at: second)
        store.place(theirs.manifestKey, bytes: theirManifest)
        store.script(.putDocument, call: 1, .anotherWriter(key: Self.chainKey, bytes: theirChain, metadata: [:]))

        let two = try await Self.history(of: second, in: service)

        #expect(two.error == nil, "\(String(describing: two.error))")
        let (chain, names) = try Self.bucketHistory(store)
        #expect(chain.count == 2 && chain.first?.fileName == theirs.fileName && chain.first?.c4 == theirs.c4, "\(chain)")
        #expect(two.uploaded.map(\.number) == [2], "its own generation comes after theirs")
        #expect(names == Set([ASCMHL.chainFileName] + chain.map(\.fileName)), "no manifest outside the chain: \(names)")
        let ours = try #require(two.uploaded.first)
        let listed = try #require(store.objects[ours.manifestKey].flatMap { ASCMHL.parseManifest($0.bytes) })
        #expect(Set(listed.keys) == [extra.0], "it lists only the file theirs does not")
        #expect(try await second.journal.cardTallies(volumeKey: second.volume.key).first?.unlisted == 0)
        #expect(try await second.journal.generations(ofVolume: second.volume.key).map(\.number) == [1, 2])
    }

    @Test func aManifestThatIsNotWhatItsChainNamesIsRefusedAndNothingIsTakenIn() async throws {
        let store = ScriptedStore()
        let first = try await Station(store: store), second = try await Station(store: store)
        let one = try await Self.history(of: first, in: Self.ingest(Self.photos, at: first))
        let theirs = try #require(one.uploaded.first)
        let service = try await Self.ingest(Self.photos, at: second)
        store.place(theirs.manifestKey, bytes: Array("<hashlist xmlns=\"urn:ASC:MHL:v2.0\"/>".utf8))

        let two = try await Self.history(of: second, in: service)

        #expect(two.error?.exitStatus == .integrity, "\(String(describing: two.error))")
        #expect(two.error?.message.contains("is not the manifest its chain names") == true)
        let generations = try await second.journal.generations(ofVolume: second.volume.key)
        #expect(generations.count == 1 && generations.first?.uploadedAt == nil, "its own generation stays journalled, not uploaded")
    }
}
