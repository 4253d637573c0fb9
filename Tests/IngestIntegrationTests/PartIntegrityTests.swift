import Foundation
import IngestTestSupport
import Testing

@testable import IngestKit

/// Per-part digests and the whole-object check against a real SeaweedFS: the server must
/// refuse bytes that do not match the digest sent with them, and report for the object what
/// the parts sent add up to. Also the two listings a rescan relies on.
@Suite(.serialized)
struct PartIntegrityTests {
    /// A part's digest, computed as the uploader does: on a thread of its own, off the pool.
    static func digest(
        _ algorithm: PartDigestAlgorithm, _ path: String, offset: Int, length: Int
    ) async throws(SystemError) -> PartDigest {
        try await onDedicatedThread("part-digest") { () throws(SystemError) -> PartDigest in
            try PartDigest.compute(algorithm, path: path, offset: Int64(offset), length: Int64(length))
        }
    }

    /// The S3 error a request failed with, or a recorded issue if it did not fail that way.
    static func serverError(_ body: () async throws(S3ClientError) -> Void) async -> S3Error? {
        do {
            try await body()
            Issue.record("the request was accepted")
        } catch {
            guard case .server(let s3Error, _) = error else {
                Issue.record("expected an S3 error answer, got \(error)")
                return nil
            }
            return s3Error
        }
        return nil
    }

    @Test(.timeLimit(.minutes(3)), arguments: PartDigestAlgorithm.allCases)
    func theServerRefusesACorruptedPartAndTheObjectMatchesThePartsSent(algorithm: PartDigestAlgorithm) async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let client = try S3ClientTests.client(server, bucket: "cards")
        let files = TemporaryDirectory()
        let size = (10 << 20) + 4321
        let source = try files.write("DJI_0002.MP4", randomBytes(size))
        let other = try files.write("other", randomBytes(5 << 20))
        let ranges = [(0, 5 << 20), (5 << 20, 5 << 20), (10 << 20, 4321)]
        let key = "drone/DJI 0002 é+%.MP4"

        let uploadID = try await client.createMultipartUpload(key: key, headers: algorithm.createMultipartUploadHeaders)
        let body = HTTPBody.file(path: source, offset: 0, length: 5 << 20)
        let payloadHash = try S3ClientTests.sha256(source, offset: 0, length: 5 << 20)

        // Part 1 sent with the digest of other bytes: what a bit flipped on the way looks like.
        let wrong = try await Self.digest(algorithm, other, offset: 0, length: 5 << 20)
        let refused = await Self.serverError { () throws(S3ClientError) in
            _ = try await client.uploadPart(
                key: key, uploadID: uploadID, partNumber: 1, body: body, payloadHash: payloadHash, headers: wrong.headers)
        }
        #expect(refused?.code == .badDigest, "\(String(describing: refused))")
        #expect(try await client.listParts(key: key, uploadID: uploadID).isEmpty, "a refused part is not stored")

        // The right digests: every part accepted.
        var parts: [CompletedPart] = []
        for (index, (offset, length)) in ranges.enumerated() {
            let digest = try await Self.digest(algorithm, source, offset: offset, length: length)
            let etag = try await client.uploadPart(
                key: key, uploadID: uploadID, partNumber: index + 1,
                body: .file(path: source, offset: Int64(offset), length: Int64(length)),
                payloadHash: try S3ClientTests.sha256(source, offset: offset, length: length), headers: digest.headers)
            parts.append(CompletedPart(number: index + 1, etag: etag, digest: digest))
        }
        _ = try await client.completeMultipartUpload(key: key, uploadID: uploadID, parts: parts)

        let expected = WholeObjectDigest.expected(parts: parts.compactMap(\.digest), lengths: ranges.map { Int64($0.1) })
        let head = try #require(try await client.headObject(key: key, checksumMode: expected.needsChecksumMode))
        #expect(head.size == Int64(size))
        #expect(expected.check(head) == .matches, "\(expected) against \(head)")

        // An object that is not all the parts sent is told apart: complete a second upload
        // without its middle part, and compare with what all three add up to.
        let shortID = try await client.createMultipartUpload(key: "short", headers: algorithm.createMultipartUploadHeaders)
        var shortParts: [CompletedPart] = []
        for part in parts where part.number != 2 {
            let (offset, length) = ranges[part.number - 1]
            let etag = try await client.uploadPart(
                key: "short", uploadID: shortID, partNumber: part.number,
                body: .file(path: source, offset: Int64(offset), length: Int64(length)),
                payloadHash: try S3ClientTests.sha256(source, offset: offset, length: length),
                headers: part.digest?.headers ?? [])
            shortParts.append(CompletedPart(number: part.number, etag: etag, digest: part.digest))
        }
        _ = try await client.completeMultipartUpload(key: "short", uploadID: shortID, parts: shortParts)
        let shortHead = try #require(try await client.headObject(key: "short", checksumMode: expected.needsChecksumMode))
        guard case .mismatch = expected.check(shortHead) else {
            Issue.record("an object missing a part was not told apart: \(expected.check(shortHead))")
            return
        }

        // A single PUT: refused with the wrong digest, accepted and checked with the right one.
        let small = try files.write("small.jpg", randomBytes(70_000))
        let smallBody = HTTPBody.file(path: small, offset: 0, length: 70_000)
        let smallHash = try S3ClientTests.sha256(small, offset: 0, length: 70_000)
        let wrongSmall = try await Self.digest(algorithm, other, offset: 0, length: 70_000)
        let refusedPut = await Self.serverError { () throws(S3ClientError) in
            _ = try await client.putObject(key: "small.jpg", body: smallBody, payloadHash: smallHash, headers: wrongSmall.headers)
        }
        #expect(refusedPut?.code == .badDigest, "\(String(describing: refusedPut))")
        #expect(try await client.headObject(key: "small.jpg") == nil, "a refused PUT stores nothing")
        let smallDigest = try await Self.digest(algorithm, small, offset: 0, length: 70_000)
        let written = try await client.putObject(key: "small.jpg", body: smallBody, payloadHash: smallHash, headers: smallDigest.headers)
        let single = WholeObjectDigest.expected(singlePut: smallDigest)
        #expect(written.confirms(single), "the PUT's own answer carries the server's digest of what it stored: \(written)")
        let smallHead = try #require(try await client.headObject(key: "small.jpg", checksumMode: single.needsChecksumMode))
        #expect(single.check(smallHead) == .matches, "\(single) against \(smallHead)")
    }

    /// Keys with a space, `+`, `%`, `&`, `<` and non-ASCII text: they must come back exactly.
    static let awkwardKeys = [
        "card 1/DCIM/a b.JPG", "card 1/DCIM/é ü+%.JPG", "card 1/DCIM/x&y<z>.MOV", "card 1/DCIM/日本 2.MP4",
        "card 1/DCIM/plain.WAV",
    ]

    @Test(.timeLimit(.minutes(3)))
    func listMultipartUploadsSeesOpenUploadsNotAbortedOnesAcrossPages() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let client = try S3ClientTests.client(server, bucket: "cards")

        var open: [String: String] = [:]
        for key in Self.awkwardKeys {
            open[try await client.createMultipartUpload(key: key)] = key
        }
        let aborted = try await client.createMultipartUpload(key: "card 1/DCIM/aborted.JPG")
        try await client.abortMultipartUpload(key: "card 1/DCIM/aborted.JPG", uploadID: aborted)
        let elsewhere = try await client.createMultipartUpload(key: "card 2/DCIM/a b.JPG")

        let started = Date()
        let listing = try await client.listMultipartUploads(prefix: "card 1/", pageSize: 2)
        let listed = listing.uploads
        #expect(listing.listed == open.count && !listing.isTruncated)
        #expect(listing.pages >= open.count / 2)
        #expect(Dictionary(listed.map { ($0.uploadID, $0.key) }, uniquingKeysWith: { first, _ in first }) == open)
        #expect(listed.count == open.count, "every upload once, across pages of 2")
        #expect(!listed.contains { $0.uploadID == aborted }, "an aborted upload is not listed")
        #expect(!listed.contains { $0.uploadID == elsewhere }, "the prefix is honoured")
        #expect(listed.allSatisfy { abs($0.initiated.timeIntervalSince(started)) < 600 }, "\(listed.map(\.initiated))")

        let everything = try await client.listMultipartUploads().uploads
        #expect(Set(everything.map(\.uploadID)) == Set(open.keys).union([elsewhere]))

        let kept = try await client.listMultipartUploads(pageSize: 2, keeping: { $0.key.hasPrefix("card 2/") })
        #expect(kept.uploads.map(\.uploadID) == [elsewhere], "only what the caller keeps is held")
        #expect(kept.listed == open.count + 1)

        let bounded = try await client.listMultipartUploads(prefix: "card 1/", pageSize: 1, maxPages: 2)
        #expect(bounded.isTruncated, "the server had more pages than were followed")
        #expect(bounded.pages == 2 && bounded.uploads.count == 2)
    }

    @Test(.timeLimit(.minutes(3)))
    func listObjectsV2PagesAndReturnsKeysExactly() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let client = try S3ClientTests.client(server, bucket: "cards")

        var etags: [String: String] = [:]
        for (index, key) in Self.awkwardKeys.enumerated() {
            let body = Array(repeating: UInt8(ascii: "a"), count: index + 1)
            etags[key] = try await client.putObject(key: key, body: .bytes(body), payloadHash: PayloadHash(sha256Of: body)).etag
        }
        _ = try await client.putObject(key: "card 2/other.JPG", body: .bytes([1]), payloadHash: PayloadHash(sha256Of: [1]))

        let started = Date()
        let listed = try await client.listObjectsV2(prefix: "card 1/", pageSize: 2)
        // S3 lists keys in the byte order of their UTF-8 form.
        let sortedKeys = Self.awkwardKeys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        #expect(listed.map(\.key) == sortedKeys)
        for object in listed {
            let index = try #require(Self.awkwardKeys.firstIndex(of: object.key))
            #expect(object.size == Int64(index + 1), "\(object.key)")
            #expect(object.etag == etags[object.key], "\(object.key)")
            #expect(abs(object.lastModified.timeIntervalSince(started)) < 600)
        }
        #expect(try await client.listObjectsV2().count == Self.awkwardKeys.count + 1)
        #expect(try await client.listObjectsV2(prefix: "card 3/").isEmpty)
    }
}
