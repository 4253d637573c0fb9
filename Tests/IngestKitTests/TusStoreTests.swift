import Foundation
import IngestTestSupport
import Testing

@testable import IngestKit

/// How the tus store maps an object onto a tus upload, without a server: the labels it
/// sends, the chunks' checksums, how a part is finished from the server's offset, and the
/// metadata it reads back from a server's answer.
@Suite struct TusStoreTests {
    @Test func anObjectsLabelsBecomeUploadMetadataWithTheKeyAsFilename() throws {
        let headers = [
            SigV4Header("x-amz-meta-xxh128", "0123456789abcdef0123456789abcdef"),
            SigV4Header("X-Amz-Meta-Device", "station-7"),
            // A label that is not ASCII travels in an S3 header as an RFC 2047 word; tus
            // takes bytes, so it goes as its UTF-8.
            SigV4Header("x-amz-meta-original-path", "=?UTF-8?B?TUlTQy/DqXTDqS50eHQ=?="),
            SigV4Header("Content-Type", "video/mp4"),
            SigV4Header("x-amz-tagging", "device=station-7"),
            SigV4Header("If-None-Match", "*"),
        ]
        let metadata = try TusStore.metadata(key: "station-7/card/MISC/été.txt", headers: headers)
        #expect(metadata.text("filename") == "station-7/card/MISC/été.txt")
        #expect(metadata.text("filetype") == "video/mp4")
        #expect(metadata.text("xxh128") == "0123456789abcdef0123456789abcdef")
        #expect(metadata.text("device") == "station-7")
        #expect(metadata.text("original-path") == "MISC/été.txt")
        #expect(Set(metadata.values.keys) == ["filename", "filetype", "xxh128", "device", "original-path"])
    }

    @Test func anObjectWithoutAContentTypeIsSentAsOctetStream() throws {
        #expect(try TusStore.metadata(key: "a", headers: []).text("filetype") == "application/octet-stream")
    }

    @Test func thePartOfABodyFromAnOffsetIsTheRestOfItsRangeOrBytes() {
        #expect(HTTPBody.file(path: "/s", offset: 100, length: 50).suffix(from: 20) == .file(path: "/s", offset: 120, length: 30))
        #expect(HTTPBody.bytes([1, 2, 3, 4]).suffix(from: 3) == .bytes([4]))
        #expect(HTTPBody.bytes([1, 2]).suffix(from: 0) == .bytes([1, 2]))
        #expect(HTTPBody.bytes([1, 2]).suffix(from: 2) == .bytes([]))
    }

    @Test func aServersMetadataHeaderIsReadWithOrWithoutSpacesAndBadPairsAreLeftOut() {
        let read = TusMetadata(headerValue: "filename YS5tcDQ=, xxh128 MDEyMw==,empty,bad%key eA==,broken !!!")
        #expect(read.text("filename") == "a.mp4")
        #expect(read.text("xxh128") == "0123")
        #expect(read.values["empty"] == [])
        #expect(read.values["broken"] == nil, "not base64")
        #expect(read.values.count == 4)
        let flood = (0..<10_000).map { "k\($0) eA==" }.joined(separator: ",")
        #expect(TusMetadata(headerValue: flood).values.count == TusMetadata.maxPairs)
    }

    @Test func theStrongestChecksumBothSidesHaveIsChosen() {
        #expect(TusChecksum.strongest(of: ["crc32", "md5", "sha1"]) == "sha1")
        #expect(TusChecksum.strongest(of: ["sha256", "md5"]) == "sha256")
        #expect(TusChecksum.strongest(of: ["crc32"]) == nil)
        #expect(TusChecksum.strongest(of: []) == nil)
    }

    @Test func aChunksChecksumIsTheDigestOfExactlyTheBytesSent() throws {
        let dir = TemporaryDirectory()
        let path = try dir.write("staged", Array("xxabcxx".utf8))
        // The known digests of "abc" (FIPS 180 and RFC 1321 test vectors).
        let sha1 = try TusChecksum.compute("sha1", of: .file(path: path, offset: 2, length: 3))
        #expect(sha1.headerValue == "sha1 qZk+NkcGgWq6PiVxeFDCbJzQ2J0=")
        let md5 = try TusChecksum.compute("md5", of: .bytes(Array("abc".utf8)))
        #expect(md5.headerValue == "md5 kAFQmDzST7DWlj99KOF/cg==")
        let sha256 = try TusChecksum.compute("sha256", of: .bytes(Array("abc".utf8)))
        #expect(sha256.digest.map { String(format: "%02x", $0) }.joined()
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func aWholeObjectGoesWithItsCreationOnlyWhereNoChunkNeedsAChecksum() {
        func info(_ extensions: Set<String>, _ algorithms: Set<String> = []) -> TusServerInfo {
            TusServerInfo(versions: ["1.0.0"], extensions: extensions, maxSize: nil, checksumAlgorithms: algorithms)
        }
        #expect(TusStore.createsWithBody(info(["creation", "creation-with-upload"])))
        #expect(!TusStore.createsWithBody(info(["creation"])))
        #expect(!TusStore.createsWithBody(info(["creation", "creation-with-upload", "checksum"], ["sha1"])))
        #expect(TusStore.createsWithBody(info(["creation", "creation-with-upload", "checksum"], ["crc32"])))
    }

    @Test func aTusStoreCanDoNothingButWriteAndAnS3BucketEverything() {
        #expect(TusStore.capabilities.isEmpty)
        #expect(S3Client.capabilities == [.listing, .tagging, .serverSideCopy, .documents, .partsInAnyOrder, .rangedReads])
    }
}
