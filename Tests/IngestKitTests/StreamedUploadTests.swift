import Foundation
import Glibc
import Testing

@testable import IngestKit

/// A large file's parts sent while it is staged (``PartStreamer``): the copy they are read
/// from as it grows, and what the journal and the uploader make of the upload once the file
/// is staged: adopted, completed, verified, tagged with its fingerprint.
@Suite struct StreamedUploadTests {
    static let key = "station/2026-06-01/DJI-1a2b3c4d/DCIM/DJI_0002.MP4"
    static let partSize: Int64 = 5 << 20

    // MARK: the growing copy

    @Test func aPartIsReadyOnlyOnceWrittenAndChecksummed() async throws {
        let copy = GrowingCopy(file: ScannedFile(path: CardPath("a.MP4"), size: 25, mtime: 1), partSize: 10)
        #expect(copy.partCount == 3)
        let waiting = Task { await copy.part(2) }
        copy.attach(path: "/staging/.partial/1-2-stream.partial")
        copy.wrote(upTo: 20)
        copy.checksummed(7)
        #expect(await eventually { copy.isAwaited }, "part 2 is not ready: its checksum is missing")
        copy.checksummed(9)
        let part = try #require(await waiting.value)
        #expect(part == GrowingCopy.Part(path: "/staging/.partial/1-2-stream.partial", offset: 10, length: 10, crc32c: 9))

        let last = Task { await copy.part(3) }
        copy.wrote(upTo: 25)
        copy.checksummed(11)
        #expect(try #require(await last.value).length == 5, "the last part is the file's rest")
        copy.ended(.complete(Fingerprint(high: 1, low: 2)))
        #expect(await copy.end() == .complete(Fingerprint(high: 1, low: 2)))
    }

    @Test func aCopyThatFailsReleasesTheStreamWaitingForItsNextPart() async throws {
        let copy = GrowingCopy(file: ScannedFile(path: CardPath("a.MP4"), size: 30, mtime: 1), partSize: 10)
        let waiting = Task { await copy.part(1) }
        copy.attach(path: "/nowhere")
        copy.wrote(upTo: 5)
        copy.ended(.failed)
        #expect(await waiting.value == nil)
        #expect(await copy.end() == .failed)
        copy.ended(.complete(Fingerprint(high: 1, low: 2)))
        #expect(await copy.end() == .failed, "an end is final")
    }

    @Test func closingTheCopyRemovesTheStreamsNameOnly() throws {
        let directory = TemporaryDirectory()
        let partial = try directory.write("1-2.partial", [1, 2, 3])
        let streamName = directory.path + "/1-2-stream.partial"
        #expect(link(partial, streamName) == 0)
        let copy = GrowingCopy(file: ScannedFile(path: CardPath("a.MP4"), size: 3, mtime: 1), partSize: 10)
        copy.attach(path: streamName)
        copy.close()
        copy.close()
        #expect(!FileManager.default.fileExists(atPath: streamName))
        #expect(FileManager.default.fileExists(atPath: partial))
    }

    // MARK: tags

    @Test func theTagsAnObjectWasCreatedWithAreReadBackFromItsTaggingHeader() {
        let tags = ["device": "station 7", "scene": "a/b=c&d", "fs-label": "DJI+1"]
        let record = Self.record(headers: [
            SigV4Header("x-amz-meta-device", "station 7"), SigV4Header(ObjectLabels.taggingHeader, ObjectTagging.header(tags)),
        ])
        #expect(record.objectTags == tags)
        #expect(record.fingerprintGoesInTag)
        let withFingerprint = Self.record(headers: [SigV4Header("x-amz-meta-xxh128", "00")])
        #expect(!withFingerprint.fingerprintGoesInTag)
        #expect(withFingerprint.objectTags.isEmpty)
    }

    @Test func aGetObjectTaggingAnswerIsReadTagByTag() throws {
        let answer = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>
            <Tag><Key>device</Key><Value>station-7</Value></Tag><Tag><Key>xxh128</Key><Value>00ff</Value></Tag>
            </TagSet></Tagging>
            """
        let document = try #require(S3XMLDocument.parse(Array(answer.utf8), records: ["Tag"]))
        #expect(document.records["Tag"] == [["Key": "device", "Value": "station-7"], ["Key": "xxh128", "Value": "00ff"]])
    }

    static func record(headers: [SigV4Header]) -> UploadRecord {
        UploadRecord(
            id: "0123456789ab", endpoint: "http://127.0.0.1:9", bucket: "cards", region: "us-east-1", addressing: .path,
            key: key, fingerprint: "00", size: 1, partSize: nil, checksum: .crc32c, phase: .created, uploadID: nil,
            restartCount: 0, headers: UploadRecord.encode(headers: headers), volumeKey: nil, sourcePath: nil, etag: nil,
            lastError: nil, createdAt: Date(), updatedAt: Date(), completedAt: nil)
    }

    // MARK: the upload the journal adopts

    /// A file of `size` bytes staged, whose parts a stream sent to `store` with every label
    /// but the fingerprint, and claimed with them.
    struct Streamed {
        let card: CardFixture
        let bytes: [UInt8]
        let fingerprint: Fingerprint
        let stagedPath: String
        let claimed: ClaimResult
        var store: ScriptedStore { card.store }
        var journal: Journal { card.journal }
        static let target = CardFixture.target
        static let headers = CardFixture.labels

        init(size: Int) async throws {
            let card = try await CardFixture()
            self.card = card
            bytes = randomBytes(size)
            let scratch = try card.directory.write("scratch", bytes)
            fingerprint = try Fingerprint.ofFile(at: scratch).0
            stagedPath = scratch
            let file = ScannedFile(path: CardPath("DCIM/DJI_0002.MP4"), size: Int64(size), mtime: 1)
            try await card.recordStaged(file, fingerprint: fingerprint)
            let plan = try PartPlan.recorded(fileSize: Int64(size), partSize: StreamedUploadTests.partSize)
            let uploadID = try await card.store.createMultipartUpload(
                key: StreamedUploadTests.key, size: Int64(size), headers: Self.headers)
            var parts: [UploadStateMachine.AcknowledgedPart] = []
            var checksums: [UInt32] = []
            for number in plan.partNumbers {
                let range = plan.range(ofPart: number)
                let body = Array(bytes[Int(range.offset)..<Int(range.offset + range.length)])
                let crc = body.withUnsafeBytes { CRC32C.update(0, $0) }
                checksums.append(crc)
                let etag = try await card.store.uploadPart(
                    key: StreamedUploadTests.key, uploadID: uploadID, partNumber: number, offset: range.offset, body: .bytes(body),
                    payloadHash: .unsigned, headers: [])
                parts.append(.init(number: number, etag: etag, size: range.length, digest: PartDigest(crc32c: crc).journalText))
            }
            var claim = UploadClaim(
                path: file.path, fingerprint: fingerprint, size: file.size, target: Self.target, key: StreamedUploadTests.key,
                headers: Self.headers + [SigV4Header("x-amz-meta-xxh128", fingerprint.hex)], partSize: StreamedUploadTests.partSize,
                cardChecksums: PartChecksums(partSize: StreamedUploadTests.partSize, crc32c: checksums))
            claim.streamed = StreamedParts(uploadID: uploadID, headers: Self.headers, parts: parts)
            claimed = try #require(try await card.journal.claim([claim], volumeKey: card.volume.key).first)
        }

        func run() async throws -> UploadResult {
            guard case .planned(let planned) = claimed else { throw CocoaError(.featureUnsupported) }
            let record = try #require(try await journal.upload(id: planned.id)).0
            return try await card.upload(
                planned.id, from: stagedPath, partSize: StreamedUploadTests.partSize, resumed: false, checksums: record.partChecksums)
        }
    }

    @Test func theJournalAdoptsAStreamedUploadWithEveryPartAndTheHeadersItWasCreatedWith() async throws {
        let streamed = try await Streamed(size: 12 << 20)
        guard case .planned(let record) = streamed.claimed else {
            Issue.record("a new content's claim plans its upload, got \(streamed.claimed)")
            return
        }
        #expect(record.phase == .uploading)
        #expect(record.requestHeaders == Streamed.headers, "a restart creates the object as the stream did")
        #expect(record.fingerprintGoesInTag)
        let (_, parts) = try #require(try await streamed.journal.upload(id: record.id))
        #expect(parts.map(\.number) == [1, 2, 3])
    }

    @Test func anAdoptedStreamIsCompletedWithoutSendingAPartAndTaggedWithItsFingerprintBesideItsTags() async throws {
        let streamed = try await Streamed(size: 12 << 20)

        #expect(try await streamed.run() == .uploaded(alreadyThere: false))

        let object = try #require(streamed.store.objects[StreamedUploadTests.key])
        #expect(object.bytes == streamed.bytes)
        #expect(object.metadata[ObjectLabelKeys.fingerprint] == nil)
        #expect(object.tags == ["device": "station-7", ObjectLabelKeys.fingerprint: streamed.fingerprint.hex])
        #expect(streamed.store.calls(.uploadPart) == 3, "the stream's three parts, none sent again")
        #expect(streamed.store.calls(.putTagging) == 1)
        guard case .planned(let planned) = streamed.claimed else { return }
        #expect(try await streamed.journal.upload(id: planned.id)?.0.phase == .completed)
    }

    @Test func aTaggingThatFailsCountsNothingAndTheNextRunProvesTheObjectOursByItsDigestThenTagsIt() async throws {
        let streamed = try await Streamed(size: 12 << 20)
        streamed.store.script(.putTagging, .before(ScriptedStore.serverError()))

        #expect(ObjectUploaderTests.failed(try await streamed.run()) != nil)
        guard case .planned(let planned) = streamed.claimed else { return }
        #expect(
            try await streamed.journal.upload(id: planned.id)?.0.phase == .completing,
            "not verified: pending, and the next run looks first")
        #expect(streamed.store.objects[StreamedUploadTests.key]?.tags[ObjectLabelKeys.fingerprint] == nil)

        #expect(try await streamed.run() == .uploaded(alreadyThere: true))
        #expect(streamed.store.objects[StreamedUploadTests.key]?.tags[ObjectLabelKeys.fingerprint] == streamed.fingerprint.hex)
        #expect(streamed.store.calls(.uploadPart) == 3 && streamed.store.calls(.complete) == 1, "nothing sent again")
        #expect(streamed.store.objects.count == 1)
    }

    @Test func aCompleteWhoseAnswerWasLostAndWhoseRetryMetA412FindsTheUntaggedObjectOursByItsDigest() async throws {
        let streamed = try await Streamed(size: 12 << 20)
        // The first Complete landed, its answer was lost; the retry was refused as the key is taken.
        streamed.store.script(.complete, .after(ScriptedStore.preconditionFailed()))

        #expect(try await streamed.run() == .uploaded(alreadyThere: true))
        #expect(streamed.store.objects.count == 1, "no copy at an alternative key")
        #expect(streamed.store.objects[StreamedUploadTests.key]?.tags[ObjectLabelKeys.fingerprint] == streamed.fingerprint.hex)
    }

    @Test func anotherWritersObjectOfOurSizeAtTheKeyIsNeverTaggedAndOursGoesToItsAlternativeKey() async throws {
        let streamed = try await Streamed(size: 12 << 20)
        let theirs = randomBytes(12 << 20)
        streamed.store.script(.complete, .anotherWriter(key: StreamedUploadTests.key, bytes: theirs, metadata: [:]))

        #expect(try await streamed.run() == .uploaded(alreadyThere: false))
        let atKey = try #require(streamed.store.objects[StreamedUploadTests.key])
        #expect(atKey.bytes == theirs && atKey.tags.isEmpty, "the other writer's object stays as it was")
        let alternative = try #require(streamed.store.objects.first { $0.key.contains("~" + streamed.fingerprint.hex) })
        #expect(alternative.value.bytes == streamed.bytes)
        #expect(alternative.value.tags[ObjectLabelKeys.fingerprint] == streamed.fingerprint.hex)
        #expect(streamed.store.calls(.putTagging) == 1)
    }

    @Test func theKeyCheckFindsAnObjectWhoseFingerprintIsInItsTagOurs() async throws {
        let bench = try await ObjectUploaderTests.Bench(size: 100_000, partSize: nil)
        bench.store.place(ObjectUploaderTests.key, bytes: bench.bytes, tags: [ObjectLabelKeys.fingerprint: bench.fingerprint.hex])

        #expect(try await bench.run(confirming: true) == .uploaded(alreadyThere: true))
        #expect(bench.store.calls(.put) == 0)
        #expect(bench.store.calls(.getTagging) == 1)
    }

    @Test func anObjectOfOurSizeWithoutAFingerprintAnywhereIsOtherBytes() async throws {
        let bench = try await ObjectUploaderTests.Bench(size: 100_000, partSize: nil)
        bench.store.place(ObjectUploaderTests.key, bytes: randomBytes(100_000), tags: ["device": "elsewhere"])

        #expect(try await bench.run(confirming: true) == .uploaded(alreadyThere: false))
        #expect(bench.store.objects[ObjectUploaderTests.key]?.tags == ["device": "elsewhere"], "nothing replaced")
        #expect(bench.store.objects.keys.contains { $0.contains("~" + bench.fingerprint.hex) }, "ours went to the alternative key")
    }
}
