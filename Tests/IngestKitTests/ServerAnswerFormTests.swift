import Foundation
import Testing

@testable import IngestKit

/// Each S3 server answers in its own way: the CRC32C of a multipart object composite (S3's
/// default, SeaweedFS), full-object (moto) or absent (Ceph RGW before Squid); a
/// `CompleteMultipartUploadResult` with an empty ETag (Ceph RGW 16). A multipart upload is
/// proven and recorded in every one of them, and a proof that fails never moves the file to
/// another key.
@Suite struct ServerAnswerFormTests {
    typealias Bench = ObjectUploaderTests.Bench
    static let partSize = ObjectUploaderTests.partSize

    @Test(arguments: ScriptedStore.ChecksumForm.allCases)
    func aMultipartObjectIsProvenAndRecordedWhateverFormTheServerReportsItsChecksumIn(
        _ form: ScriptedStore.ChecksumForm
    ) async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(multipartChecksums: form))

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        #expect(bench.store.objects.count == 1, "no second key")
        let object = try #require(bench.store.objects[ObjectUploaderTests.key])
        let (record, _) = try await bench.journalled()
        #expect(record.phase == .completed)
        #expect(record.etag == object.etag, "the object's identity is recorded as the server gave it")
        #expect(record.objectChecksum == object.checksumCRC32C)
        #expect(try await bench.fileState() == .uploaded)
    }

    @Test func aCompleteAnswerThatNamesNoETagIsVerifiedByLookingAtTheObjectAndItsETagRecorded() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(completeNamesETag: false))

        #expect(try await bench.run() == .uploaded(alreadyThere: false))

        #expect(bench.landed())
        let object = try #require(bench.store.objects[ObjectUploaderTests.key])
        #expect(try await bench.journalled().0.etag == object.etag)
    }

    /// A `Complete` whose answer was lost, then an object of our size and label whose digest
    /// is not what our parts make: the proof failed. The file stays at its key, not counted,
    /// run after run; nothing is written anywhere else, and nothing replaced.
    @Test(arguments: [ScriptedStore.ChecksumForm.composite, .fullObject])
    func anObjectWhoseDigestIsNotOurPartsStaysAtItsKeyUncountedAndNoAlternativeKeyIsWritten(
        _ form: ScriptedStore.ChecksumForm
    ) async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(multipartChecksums: form))
        bench.store.script(.complete, .after(ScriptedStore.connectionReset()))
        #expect(Self.failedStatus(try await bench.run()) == .unavailable)
        var other = bench.bytes
        other[7 << 20] ^= 0xFF
        bench.store.replaceBytes(ObjectUploaderTests.key, with: other, partSize: Int(Self.partSize))

        for _ in 1...2 {
            let result = try await bench.run(resumed: true)
            let error = try #require(ObjectUploaderTests.failed(result))
            #expect(error.exitStatus == .integrity)
            #expect(error.message.contains("does not match the parts sent"), "\(error.message)")
            #expect(error.message.contains("nothing is moved to another key"), "\(error.message)")
        }

        #expect(Array(bench.store.objects.keys) == [ObjectUploaderTests.key], "no alternative key")
        #expect(bench.store.objects[ObjectUploaderTests.key]?.bytes == other, "nothing replaced")
        #expect(bench.store.calls(.create) == 1)
        #expect(try await bench.fileState() != .uploaded)
    }

    /// Where the server keeps no checksum, a resumed `Complete` is judged by what can still be
    /// compared (size and fingerprint): the file is counted once, at its key.
    @Test func withoutAServerChecksumALostCompleteAnswerIsJudgedBySizeAndFingerprint() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(multipartChecksums: .none))
        bench.store.script(.complete, .after(ScriptedStore.connectionReset()))
        #expect(Self.failedStatus(try await bench.run()) == .unavailable)

        #expect(try await bench.run(resumed: true) == .uploaded(alreadyThere: true))
        #expect(bench.landed())
        #expect(bench.store.partsSent.count == 3)
        #expect(Array(bench.store.objects.keys) == [ObjectUploaderTests.key])
    }

    /// A server that keeps no CRC32C (Ceph RGW before Squid) gets MD5 part digests, which it
    /// checks, for uploads not begun yet; one that has sent a part keeps its algorithm to the
    /// end, since the whole-object check combines the digests of every part.
    @Test func anUploadNotBegunTakesMD5DigestsAndOneBegunKeepsItsOwn() async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize, store: ScriptedStore(multipartChecksums: .none))
        let switched = try #require(try await bench.journal.useDigest(.md5, forUnstartedUpload: bench.uploadID))
        #expect(switched.checksum == .md5)
        #expect(try await bench.run() == .uploaded(alreadyThere: false))
        #expect(bench.landed())
        #expect(try await bench.journalled().0.etag == bench.store.objects[ObjectUploaderTests.key]?.etag)

        let begun = try await Bench(size: 12 << 20, partSize: Self.partSize)
        begun.store.script(.uploadPart, call: 2, .before(ScriptedStore.serverError()))
        #expect(Self.failedStatus(try await begun.run()) == .unavailable)
        let kept = try #require(try await begun.journal.useDigest(.md5, forUnstartedUpload: begun.uploadID))
        #expect(kept.checksum == .crc32c)
        #expect(try await begun.run(resumed: true) == .uploaded(alreadyThere: false))
        #expect(begun.landed())
    }

    /// A `Complete` that reached the server, whose answer was the upload gone (`NoSuchUpload`
    /// from S3, `NoSuchKey` from Ceph RGW 16 once it completed it): the object is looked
    /// for, found ours, and counted, with no part sent again and no second upload.
    @Test(arguments: [S3ErrorCode.noSuchUpload, .noSuchKey])
    func aCompleteAnsweredUploadGoneAfterItCompletedFindsItsObject(_ code: S3ErrorCode) async throws {
        let bench = try await Bench(size: 12 << 20, partSize: Self.partSize)
        bench.store.script(.complete, .after(.uploadGone(S3Error(status: 404, code: code, message: nil))))

        #expect(try await bench.run() == .uploaded(alreadyThere: true))
        #expect(bench.landed())
        #expect(bench.store.partsSent.count == 3)
        #expect(bench.store.calls(.create) == 1)
        #expect(Array(bench.store.objects.keys) == [ObjectUploaderTests.key])
    }

    static func failedStatus(_ result: UploadResult) -> IngestKit.ExitStatus? { ObjectUploaderTests.failed(result)?.exitStatus }
}
