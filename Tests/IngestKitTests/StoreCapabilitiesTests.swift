import Foundation
import Logging
import Testing

@testable import IngestKit

/// What the callers of a destination do with what it can and cannot do
/// (``StoreCapabilities``), driven through a ``ScriptedStore``: the orphan sweep lists and
/// aborts only where the store lists, and a recorded fingerprint is looked for in tags only
/// where the store keeps them.
@Suite struct StoreCapabilitiesTests {
    static let target = S3Destination(endpoint: "http://127.0.0.1:9", bucket: "cards", region: "us-east-1", addressing: .path)
    static let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    func sweeper(_ journal: Journal, _ store: ScriptedStore) -> OrphanSweeper {
        OrphanSweeper(journal: journal, prefix: "fleet/", age: .seconds(3600), logger: Self.logger, makeStore: { _ in store })
    }

    @Test func theSweepAbortsAnUploadNoJournalKnowsOnceItIsOldAndOnlyUnderThePrefix() async throws {
        let directory = TemporaryDirectory()
        let journal = try Journal(path: directory.path + "/journal.sqlite")
        let store = ScriptedStore()
        _ = try await store.createMultipartUpload(key: "fleet/DJI_0001.MP4", size: 1, headers: [])
        _ = try await store.createMultipartUpload(key: "elsewhere/DJI_0002.MP4", size: 1, headers: [])

        let young = try #require(await sweeper(journal, store).sweep([Self.target], now: Date()).destinations.first)
        #expect(young.listed == 1 && young.young == 1 && young.aborted == 0 && young.problem == nil)
        #expect(store.openUploads.count == 2)

        let old = try #require(
            await sweeper(journal, store).sweep([Self.target], now: Date().addingTimeInterval(7200)).destinations.first)
        #expect(old.listed == 1 && old.aborted == 1 && old.truncatedAt == nil)
        #expect(store.openUploads.values.map(\.key) == ["elsewhere/DJI_0002.MP4"])
    }

    @Test func aDestinationThatCannotListIsPassedByWithNothingAbortedAndNoFailure() async throws {
        let directory = TemporaryDirectory()
        let journal = try Journal(path: directory.path + "/journal.sqlite")
        let store = ScriptedStore(capabilities: [.tagging])
        _ = try await store.createMultipartUpload(key: "fleet/DJI_0001.MP4", size: 1, headers: [])

        let sweep = await sweeper(journal, store).sweep([Self.target], now: Date().addingTimeInterval(7200))

        #expect(sweep.aborted == 0 && sweep.failures == 0)
        #expect(store.calls(.listUploads) == 0 && store.calls(.abort) == 0)
        #expect(store.openUploads.count == 1)
    }

    @Test func aFingerprintInATagIsReadOnlyWhereTheStoreKeepsTags() async throws {
        let fingerprint = String(repeating: "a", count: 32)
        for (capabilities, found) in [(StoreCapabilities([.listing, .tagging]), fingerprint), ([.listing], nil)] {
            let store = ScriptedStore(capabilities: capabilities)
            store.place("fleet/DJI_0001.MP4", bytes: [1, 2, 3], tags: [ObjectLabelKeys.fingerprint: fingerprint])
            let head = try #require(try await store.headObject(key: "fleet/DJI_0001.MP4"))
            #expect(try await store.recordedFingerprint(of: head, key: "fleet/DJI_0001.MP4") == found)
            #expect(store.calls(.getTagging) == (found == nil ? 0 : 1))
        }
    }
}
