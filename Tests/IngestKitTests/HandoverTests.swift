import Foundation
import Testing

@testable import IngestKit

/// The handover of a multipart upload between stations that compute the same key
/// (``ObjectUploader/handover(behind:)``), through a ``ScriptedStore``: another station's
/// upload left half sent is taken over, part by part against this station's own read; one
/// still being sent is waited for; of two created at once, the later gives way.
@Suite struct HandoverTests {
    typealias Bench = ObjectUploaderTests.Bench
    static let key = ObjectUploaderTests.key
    static let partSize = ObjectUploaderTests.partSize

    /// Another station's upload of the same file at the key, with `parts` sent: their
    /// bytes are the file's, except the numbers in `wrong`, which hold other bytes.
    /// `streamed`: the other station sent the parts as it read the file, so its upload was
    /// created without the fingerprint (``UploadRecord/fingerprintGoesInTag``).
    static func otherStation(_ bench: Bench, parts: [Int], wrong: Set<Int> = [], streamed: Bool = false) async throws -> String {
        let store = bench.store
        let id = try await store.createMultipartUpload(
            key: key, size: Int64(bench.bytes.count),
            headers: streamed ? [] : [SigV4Header("x-amz-meta-" + ObjectLabelKeys.fingerprint, bench.fingerprint.hex)])
        let plan = try PartPlan.recorded(fileSize: Int64(bench.bytes.count), partSize: partSize)
        for number in parts {
            let range = plan.range(ofPart: number)
            var bytes = Array(bench.bytes[Int(range.offset)..<Int(range.offset + range.length)])
            if wrong.contains(number) { bytes[0] ^= 0xFF }
            _ = try await store.uploadPart(
                key: key, uploadID: id, partNumber: number, offset: range.offset, body: .bytes(bytes), payloadHash: .unsigned,
                headers: [])
        }
        return id
    }

    @Test func anUploadAnotherStationLeftIsTakenOverAndOnlyWhatItLacksIsSent() async throws {
        let bench = try await Bench(size: Int(3 * Self.partSize) + 1000, partSize: Self.partSize)
        let theirs = try await Self.otherStation(bench, parts: [1, 2, 3], wrong: [2])
        let sentBefore = bench.store.partsSent.count

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        #expect(bench.store.calls(.create) == 1, "no upload of its own: the other station's was taken over")
        #expect(Array(bench.store.partsSent.dropFirst(sentBefore)).sorted() == [2, 4], "the part that did not match, and the missing one")
        #expect(bench.store.openUploads.isEmpty)
        let (record, _) = try await bench.journalled()
        #expect(record.phase == .completed)
        #expect(record.uploadID == nil || record.uploadID == theirs)
    }

    /// The upload taken over was the other station's stream: created without the
    /// fingerprint, which the object then lacks in its metadata. Proven ours by the server's
    /// digest of the parts, it carries the fingerprint in its `xxh128` tag.
    @Test func anObjectCompletedFromAnotherStationsStreamCarriesTheFingerprintInItsTag() async throws {
        let bench = try await Bench(size: Int(3 * Self.partSize) + 1000, partSize: Self.partSize)
        _ = try await Self.otherStation(bench, parts: [1, 2], streamed: true)

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        let object = try #require(bench.store.objects[Self.key])
        #expect(object.bytes == bench.bytes)
        #expect(object.metadata[ObjectLabelKeys.fingerprint] == nil, "the other station's upload was created without it")
        #expect(object.tags[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(bench.store.calls(.create) == 1, "taken over, not created again")
        #expect(bench.store.objects.count == 1)
        #expect(try await bench.journalled().0.phase == .completed)
    }

    @Test func anUploadStillBeingSentIsWaitedForAndTheFileIsNotSentTwice() async throws {
        let bench = try await Bench(size: Int(2 * Self.partSize) + 1000, partSize: Self.partSize)
        let theirs = try await Self.otherStation(bench, parts: [1, 2, 3])
        let store = bench.store
        let run = Task { try await bench.run(adoptAfter: .seconds(600)) }
        // The other station completes its upload while this one waits.
        #expect(await eventually { store.calls(.listParts) >= 1 })
        let plan = try PartPlan.recorded(fileSize: Int64(bench.bytes.count), partSize: Self.partSize)
        let parts = plan.partNumbers.map { number in
            let range = plan.range(ofPart: number)
            return CompletedPart(
                number: number, etag: ScriptedStore.etag(of: Array(bench.bytes[Int(range.offset)..<Int(range.offset + range.length)])),
                digest: nil)
        }
        _ = try await store.completeMultipartUpload(key: Self.key, uploadID: theirs, parts: parts, headers: [.ifNoneMatchAny])

        #expect(try await run.value == .uploaded(alreadyThere: true))
        #expect(store.calls(.create) == 1)
        #expect(store.calls(.uploadPart) == 3, "only the other station's parts")
        #expect(bench.landed())
    }

    @Test func ofTwoUploadsCreatedAtOnceTheLaterGivesWayBeforeSendingAPart() async throws {
        let bench = try await Bench(size: Int(2 * Self.partSize) + 1000, partSize: Self.partSize)
        _ = try await Self.otherStation(bench, parts: [1])
        // The look before creating misses it (as when both stations list before either creates).
        bench.store.script(.listUploads, call: 1, .before(ScriptedStore.serverError()))
        let sentBefore = bench.store.partsSent.count

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.store.calls(.create) == 2, "its own, given up for the earlier one")
        #expect(bench.store.calls(.abort) == 1)
        #expect(Array(bench.store.partsSent.dropFirst(sentBefore)).sorted() == [2, 3])
        #expect(bench.store.openUploads.isEmpty)
        #expect(bench.landed())
    }

    @Test func aStoreThatCannotListUploadsCreatesItsOwn() async throws {
        let bench = try await Bench(
            size: Int(2 * Self.partSize) + 1000, partSize: Self.partSize,
            store: ScriptedStore(capabilities: StoreCapabilities.all.subtracting(.listing)))
        _ = try await Self.otherStation(bench, parts: [1])

        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        #expect(bench.store.calls(.listUploads) == 0)
        #expect(bench.store.calls(.create) == 2)
        #expect(bench.store.openUploads.count == 1, "the other station's is left to it, never aborted")
        #expect(bench.landed())
    }
}
