import Foundation
import Testing

@testable import IngestKit

/// Every file of a card at its own key: a second file of a known content is claimed as a
/// copy of the content's upload (``UploadRecord/copyKey``) and made by the server from it,
/// through a ``ScriptedStore`` that keeps S3's copy rules.
@Suite struct ObjectCopyTests {
    typealias Bench = ObjectUploaderTests.Bench

    /// Stages and claims another file of the bench's content, at `key`.
    static func claimCopy(
        _ bench: Bench, path: String, key: String, volume: String? = nil, headers: [SigV4Header]? = nil
    ) async throws -> ClaimResult {
        let file = ScannedFile(path: CardPath(path), size: Int64(bench.bytes.count), mtime: 2)
        try await bench.journal.record(
            [.staged(StagedFile(file: file, fingerprint: bench.fingerprint, deduplicated: true, verified: false))],
            volumeKey: volume ?? bench.volume.key)
        let claim = UploadClaim(
            path: file.path, fingerprint: bench.fingerprint, size: file.size, target: Bench.target, key: key,
            headers: headers
                ?? [SigV4Header("x-amz-meta-" + ObjectLabelKeys.fingerprint, bench.fingerprint.hex), SigV4Header("x-amz-meta-path", path)],
            partSize: bench.partSize)
        return try #require(try await bench.journal.claim([claim], volumeKey: volume ?? bench.volume.key).first)
    }

    /// Claims another file of the bench's content at `key` and returns its copy, which the
    /// claim must plan (a test fails here otherwise). `streamed`: the file was planned as
    /// streamed (``streamedLabels(_:)``).
    static func plannedCopy(_ bench: Bench, path: String, key: String, streamed: Bool = false) async throws -> UploadRecord {
        let claimed = try await claimCopy(bench, path: path, key: key, headers: streamed ? streamedLabels(path) : nil)
        guard case let .copy(copy, _) = claimed else { throw NotACopy(claimed: claimed) }
        return copy
    }

    /// What ``plannedCopy(_:path:key:streamed:)`` throws when the claim planned no copy.
    struct NotACopy: Error, CustomStringConvertible {
        var claimed: ClaimResult
        var description: String { "not planned as a copy: \(claimed)" }
    }

    /// A bench (``Bench``) whose content is uploaded: the source of the copies.
    static func uploadedContent(size: Int, partSize: Int64? = nil, store: ScriptedStore = ScriptedStore()) async throws -> Bench {
        let bench = try await Bench(size: size, partSize: partSize, store: store)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        return bench
    }

    /// Runs the copy as the runner does, from the journal's records.
    static func copy(
        _ bench: Bench, _ id: String, singleCopyLimit: Int64 = S3UploadLimits.maxSingleCopySize, partSize: Int64 = 1 << 30
    ) async throws -> UploadResult {
        let (record, _) = try #require(try await bench.journal.upload(id: id))
        let source = try #require(try await bench.journal.contentUpload(of: record))
        var uploader = ObjectUploader(
            record: record, client: bench.store, journal: bench.journal, stagedPath: bench.stagedPath,
            limiter: TransferLimiter(maxRequests: 4, maxBytes: 1 << 30), settings: UploadSettings(), sink: DiscardingSink(),
            hooks: FaultHooks(), stop: StopFlag(), releases: nil, conditionalWrites: bench.store.honoursConditionalWrites)
        uploader.singleCopyLimit = singleCopyLimit
        uploader.copyPartSize = partSize
        return await UploadRun.copy(uploader, from: source)
    }

    @Test func aSecondFileOfAKnownContentIsPlannedAsACopyAtItsOwnKey() async throws {
        let bench = try await Bench(size: 1000, partSize: nil)
        guard case let .copy(copy, source) = try await Self.claimCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG") else {
            Issue.record("not planned as a copy")
            return
        }
        #expect(source.id == bench.uploadID)
        #expect(copy.isCopy && copy.key == "k/COPY.JPG" && copy.id != source.id)
        // Claimed again (a later run), the same copy, not a second one.
        guard case .upload(let again) = try await Self.claimCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG") else {
            Issue.record("claimed again, not the same copy")
            return
        }
        #expect(again.id == copy.id)
        // The file that brought the content, claimed again, keeps its upload.
        let file = ScannedFile(path: CardPath("DCIM/DJI_0001.JPG"), size: Int64(bench.bytes.count), mtime: 1)
        let first = UploadClaim(
            path: file.path, fingerprint: bench.fingerprint, size: file.size, target: Bench.target, key: ObjectUploaderTests.key,
            headers: [], partSize: nil)
        #expect(try await bench.journal.claim([first], volumeKey: bench.volume.key).first == .upload(source))
    }

    /// A destination that cannot copy (a tus server) holds the content once: the second
    /// file counts as the content's upload, and nothing is sent or copied for it.
    @Test func onAStoreThatCannotCopyAFileOfAKnownContentCountsAsItsUploadAndNothingIsSent() async throws {
        let bench = try await Self.uploadedContent(size: 1000, store: ScriptedStore(capabilities: [.listing, .tagging]))
        let copy = try await Self.plannedCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG")
        let before = bench.store.calls(.put)
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: true))
        #expect(bench.store.objects["k/COPY.JPG"] == nil, "no object of its own")
        #expect(bench.store.calls(.copy) == 0 && bench.store.calls(.put) == before && bench.store.calls(.head) == 0)
        #expect(try await bench.journal.upload(id: copy.id)?.0.phase == .completed)
    }

    @Test func theCopyIsMadeByTheServerWithItsOwnLabelsAndTheFileIsUploaded() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG")
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))

        let object = try #require(bench.store.objects["k/COPY.JPG"])
        #expect(object.bytes == bench.bytes)
        #expect(object.metadata["path"] == "DCIM/COPY.JPG")
        #expect(bench.store.calls(.copy) == 1 && bench.store.calls(.put) == 1)
        #expect(try await bench.journal.upload(id: copy.id)?.0.phase == .completed)
        #expect(try await bench.journal.files(ofVolume: bench.volume.key)[CardPath("DCIM/COPY.JPG")]?.state == .uploaded)
        // Run again: the object is there, nothing is copied twice.
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: true))
        #expect(bench.store.calls(.copy) == 1)
    }

    @Test func aCopyAboveTheSingleCopyLimitIsCopiedInParts() async throws {
        let bench = try await Self.uploadedContent(size: 2_500_000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/BIG.MP4", key: "k/BIG.MP4")
        #expect(try await Self.copy(bench, copy.id, singleCopyLimit: 1_000_000, partSize: 1_000_000) == .uploaded(alreadyThere: false))
        #expect(bench.store.objects["k/BIG.MP4"]?.bytes == bench.bytes)
        #expect(bench.store.calls(.uploadPartCopy) == 3 && bench.store.calls(.copy) == 0)
        #expect(bench.store.openUploads.isEmpty)
    }

    @Test func aKeyHoldingOtherBytesIsNotReplacedTheCopyGoesToItsAlternativeKey() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG")
        bench.store.place("k/COPY.JPG", bytes: Array("someone else's".utf8))
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))
        #expect(bench.store.objects["k/COPY.JPG"]?.bytes == Array("someone else's".utf8))
        let moved = try #require(try await bench.journal.upload(id: copy.id)?.0)
        #expect(moved.key != "k/COPY.JPG" && bench.store.objects[moved.key]?.bytes == bench.bytes)
    }

    @Test func aSourceGoneFromTheBucketFailsTheCopyAndStartsTheContentsUploadAgain() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/COPY.JPG", key: "k/COPY.JPG")
        bench.store.remove(ObjectUploaderTests.key)
        let error = try #require(ObjectUploaderTests.failed(try await Self.copy(bench, copy.id)))
        #expect(error.message.contains("gone from the bucket"))
        #expect(try await bench.journal.upload(id: bench.uploadID)?.0.phase == .created)
        #expect(try await bench.journal.files(ofVolume: bench.volume.key)[CardPath("DCIM/COPY.JPG")]?.state == .staged)
        // The content sent again, the copy follows.
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))
        #expect(bench.store.objects["k/COPY.JPG"]?.bytes == bench.bytes)
    }

    // MARK: the fingerprint on every copy

    /// The labels of a file planned as streamed (``UploadRecord/fingerprintGoesInTag``): every
    /// one but the fingerprint, which was not known when its parts began to go.
    static func streamedLabels(_ path: String) -> [SigV4Header] {
        [SigV4Header("x-amz-meta-path", path), SigV4Header(ObjectLabels.taggingHeader, "device=station-7")]
    }

    @Test func aCopyOfAFilePlannedAsStreamedCarriesTheFingerprintInItsMetadataAndItsTag() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/SUB/CLIP_copy.MP4", key: "k/CLIP_copy.MP4", streamed: true)
        #expect(copy.fingerprintGoesInTag, "planned as streamed")

        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))

        let object = try #require(bench.store.objects["k/CLIP_copy.MP4"])
        #expect(object.bytes == bench.bytes)
        #expect(object.metadata[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(object.metadata["path"] == "DCIM/SUB/CLIP_copy.MP4")
        #expect(object.tags == ["device": "station-7", ObjectLabelKeys.fingerprint: bench.fingerprint.hex])
        #expect(bench.store.calls(.copy) == 1 && bench.store.calls(.putTagging) == 0, "labelled by the copy itself")
        #expect(!bench.store.objects.keys.contains { $0.contains("~") }, "nothing at an alternative key")
        #expect(try await bench.journal.upload(id: copy.id)?.0.phase == .completed)
    }

    @Test func aCopyInPartsOfAFilePlannedAsStreamedCarriesTheFingerprintInItsMetadata() async throws {
        let bench = try await Self.uploadedContent(size: 2_500_000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/SUB/BIG_copy.MP4", key: "k/BIG_copy.MP4", streamed: true)
        #expect(try await Self.copy(bench, copy.id, singleCopyLimit: 1_000_000, partSize: 1_000_000) == .uploaded(alreadyThere: false))
        let object = try #require(bench.store.objects["k/BIG_copy.MP4"])
        #expect(object.bytes == bench.bytes)
        #expect(object.metadata[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(bench.store.calls(.uploadPartCopy) == 3)
    }

    /// What an older ingest left: the copy of a streamed file made without its fingerprint.
    /// It is the source's bytes (the server gives both one ETag), so it is tagged and
    /// counts; nothing is copied again and nothing goes to an alternative key.
    @Test func aCopyLeftWithoutItsFingerprintIsProvenOursByTheSourcesETagAndTagged() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/SUB/CLIP_copy.MP4", key: "k/CLIP_copy.MP4", streamed: true)
        bench.store.place("k/CLIP_copy.MP4", bytes: bench.bytes, metadata: ["path": "DCIM/SUB/CLIP_copy.MP4"])

        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: true))

        #expect(bench.store.objects["k/CLIP_copy.MP4"]?.tags[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(bench.store.calls(.copy) == 0)
        #expect(bench.store.objects.count == 2, "one object per file")
        #expect(try await bench.journal.upload(id: copy.id)?.0.key == "k/CLIP_copy.MP4")
    }

    @Test func anObjectOfOurSizeWithoutAFingerprintThatIsNoCopyOfTheSourceIsOtherBytes() async throws {
        let bench = try await Self.uploadedContent(size: 1000)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/SUB/CLIP_copy.MP4", key: "k/CLIP_copy.MP4", streamed: true)
        let theirs = randomBytes(1000)
        bench.store.place("k/CLIP_copy.MP4", bytes: theirs)

        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))

        let atKey = try #require(bench.store.objects["k/CLIP_copy.MP4"])
        #expect(atKey.bytes == theirs && atKey.tags.isEmpty, "never tagged, never replaced")
        let moved = try #require(try await bench.journal.upload(id: copy.id)?.0)
        #expect(moved.key.contains("~" + bench.fingerprint.hex))
        #expect(bench.store.objects[moved.key]?.metadata[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
    }

    /// The source lost its fingerprint's tag (a kill between its `Complete` and the tagging):
    /// the server's composite CRC32C of it is the one the staged copy's parts make, so it is
    /// tagged and copied; its upload is not started again, nothing goes to an alternative key.
    @Test func aSourceWithoutItsFingerprintIsProvenByTheServersDigestOfTheStagedCopyThenCopied() async throws {
        let partSize: Int64 = 5 << 20
        let bench = try await Self.uploadedContent(size: Int(3 * partSize) + 1000, partSize: partSize)
        bench.store.unlabel(ObjectUploaderTests.key)
        #expect(bench.store.objects[ObjectUploaderTests.key]?.checksumCRC32C != nil)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/SUB/CLIP_copy.MP4", key: "k/CLIP_copy.MP4", streamed: true)

        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))

        #expect(bench.store.objects[ObjectUploaderTests.key]?.tags[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(bench.store.objects["k/CLIP_copy.MP4"]?.bytes == bench.bytes)
        #expect(bench.store.objects["k/CLIP_copy.MP4"]?.metadata[ObjectLabelKeys.fingerprint] == bench.fingerprint.hex)
        #expect(bench.store.objects.count == 2 && !bench.store.objects.keys.contains { $0.contains("~") })
        #expect(try await bench.journal.upload(id: bench.uploadID)?.0.phase == .completed, "its upload not started again")
    }

    @Test func anEmptyFileIsItsOwnEmptyPutObjectNotACopy() async throws {
        let bench = try await Self.uploadedContent(size: 0)
        let copy = try await Self.plannedCopy(bench, path: "DCIM/EMPTY2", key: "k/EMPTY2")
        #expect(try await Self.copy(bench, copy.id) == .uploaded(alreadyThere: false))
        #expect(bench.store.objects["k/EMPTY2"]?.bytes == [])
        #expect(bench.store.calls(.copy) == 0 && bench.store.calls(.put) == 2)
    }
}
