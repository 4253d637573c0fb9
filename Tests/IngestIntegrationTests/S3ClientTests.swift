import Foundation
import IngestKit
import IngestTestSupport
import Logging
import Testing

/// The S3 client against a real SeaweedFS, with the aws CLI as the oracle for what landed.
@Suite(.serialized)
struct S3ClientTests {
    static func client(
        _ server: SeaweedFS, bucket: String, secret: String? = nil, endpoint: String? = nil,
        settings custom: TransportSettings? = nil
    ) throws -> S3Client {
        let credentials = CredentialsProvider(environment: [
            "AWS_ACCESS_KEY_ID": server.accessKey, "AWS_SECRET_ACCESS_KEY": secret ?? server.secretKey,
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        ])
        var settings = custom ?? TransportSettings()
        if custom == nil { settings.connectTimeout = .seconds(2) }
        let destination = S3Destination(
            endpoint: endpoint ?? server.endpoint, bucket: bucket, region: "us-east-1", addressing: .path)
        return try S3Client(
            destination: destination, credentials: credentials, transport: CurlTransport(settings: settings),
            logger: Logger(label: "test"))
    }

    /// The SHA-256 of a file's byte range, by dd and sha256sum.
    static func sha256(_ path: String, offset: Int, length: Int) throws -> PayloadHash {
        let hex = try sh("dd if=\(path) iflag=skip_bytes,count_bytes skip=\(offset) count=\(length) bs=1M status=none | sha256sum")
        return try #require(PayloadHash(hex: String(hex.prefix(64))))
    }

    @Test(.timeLimit(.minutes(3)))
    func aMultipartUploadOfFileRangesLandsByteForByte() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let client = try Self.client(server, bucket: "cards")
        let files = TemporaryDirectory()
        let size = (12 << 20) + 5
        let source = try files.write("DJI_0001.MP4", randomBytes(size))
        let key = "drone/2026-11-21/DCIM/DJI 0001 é+$.MP4"
        let ranges = [(0, 5 << 20), (5 << 20, 5 << 20), (10 << 20, (2 << 20) + 5)]

        let uploadID = try await client.createMultipartUpload(key: key, headers: [SigV4Header("x-amz-meta-xxh128", "abc")])
        var etags: [CompletedPart] = []
        for (index, (offset, length)) in ranges.enumerated() {
            let etag = try await client.uploadPart(
                key: key, uploadID: uploadID, partNumber: index + 1,
                body: .file(path: source, offset: Int64(offset), length: Int64(length)),
                payloadHash: try Self.sha256(source, offset: offset, length: length))
            etags.append(CompletedPart(number: index + 1, etag: etag))
        }
        let listed = try await client.listParts(key: key, uploadID: uploadID)
        #expect(listed.map(\.number) == [1, 2, 3])
        #expect(listed.map(\.size) == ranges.map { Int64($0.1) })
        #expect(listed.map(\.etag) == etags.map(\.etag))

        let objectETag = try await client.completeMultipartUpload(key: key, uploadID: uploadID, parts: etags)
        #expect(objectETag?.hasSuffix("-3\"") == true, "a multipart ETag names its part count: \(String(describing: objectETag))")

        let head = try #require(try await client.headObject(key: key))
        #expect(head.size == Int64(size))
        #expect(head.metadata["xxh128"] == "abc")
        let copy = files.path + "/copy"
        let get = try server.aws(["s3api", "get-object", "--bucket", "cards", "--key", key, copy])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(try xxh128sum(copy) == (try xxh128sum(source)))
        #expect(try await client.headObject(key: "no/such/key") == nil)

        let single = try await client.putObject(
            key: "small.txt", body: .bytes(Array("hello".utf8)), payloadHash: PayloadHash(sha256Of: Array("hello".utf8)))
        #expect(single.etag.hasPrefix("\""))
        #expect(try await client.headObject(key: "small.txt")?.size == 5)
    }

    @Test(.timeLimit(.minutes(3)))
    func abortLeavesNothingAndTheServerRefusesACorruptedPart() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let client = try Self.client(server, bucket: "cards")
        let files = TemporaryDirectory()
        let source = try files.write("part", randomBytes(5 << 20))
        let other = try files.write("other", randomBytes(5 << 20))

        // A part whose bytes do not match the Content-MD5 sent with it is refused, never
        // stored. (SeaweedFS does not check x-amz-content-sha256; it does check Content-MD5.)
        let uploadID = try await client.createMultipartUpload(key: "a.bin")
        let rightHash = try Self.sha256(source, offset: 0, length: 5 << 20)
        let wrongMD5 = try sh("openssl md5 -binary < \(other) | base64").trimmingCharacters(in: .whitespacesAndNewlines)
        do throws(S3ClientError) {
            _ = try await client.uploadPart(
                key: "a.bin", uploadID: uploadID, partNumber: 1, body: .file(path: source, offset: 0, length: 5 << 20),
                payloadHash: rightHash, headers: [SigV4Header("Content-MD5", wrongMD5)])
            Issue.record("a corrupted part was accepted")
        } catch {
            guard case .server(let s3Error, _) = error else {
                Issue.record("expected a server error, got \(error)")
                return
            }
            #expect(s3Error.code?.rawValue == "BadDigest", "\(s3Error)")
        }
        #expect(try await client.listParts(key: "a.bin", uploadID: uploadID).isEmpty)

        // Abort: nothing left on the server, and a second abort is not an error.
        _ = try await client.uploadPart(
            key: "a.bin", uploadID: uploadID, partNumber: 1, body: .file(path: source, offset: 0, length: 5 << 20),
            payloadHash: try Self.sha256(source, offset: 0, length: 5 << 20))
        try await client.abortMultipartUpload(key: "a.bin", uploadID: uploadID)
        let uploads = try server.aws(["s3api", "list-multipart-uploads", "--bucket", "cards"])
        #expect(uploads.status == 0)
        #expect(!uploads.stdoutText.contains(uploadID), "\(uploads.stdoutText)")
        try await client.abortMultipartUpload(key: "a.bin", uploadID: uploadID)
        await #expect(throws: S3ClientError.self) { _ = try await client.listParts(key: "a.bin", uploadID: uploadID) }
    }

    @Test(.timeLimit(.minutes(3)))
    func wrongCredentialsAMissingBucketAndADeadEndpointAreEachTold() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }

        let wrongSecret = "wrong-secret-\(UInt32.random(in: 0...UInt32.max))"
        let impostor = try Self.client(server, bucket: "cards", secret: wrongSecret)
        do throws(S3ClientError) {
            _ = try await impostor.createMultipartUpload(key: "x")
            Issue.record("a wrong secret was accepted")
        } catch {
            guard case .server(let s3Error, let attempts) = error else {
                Issue.record("expected a server error, got \(error)")
                return
            }
            #expect(["SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied"].contains(s3Error.code?.rawValue ?? ""))
            #expect(attempts == 1, "a wrong secret fails fast")
            #expect(!error.description.contains(wrongSecret))
            #expect(!error.description.contains(server.secretKey))
        }

        #expect(try await Self.client(server, bucket: "cards").bucketExists())
        #expect(try await !Self.client(server, bucket: "no-such-bucket").bucketExists())

        let deadPort = try SeaweedFS.freePorts(1)[0]
        let unreachable = try Self.client(server, bucket: "cards", endpoint: "http://127.0.0.1:\(deadPort)")
        do throws(S3ClientError) {
            _ = try await unreachable.headObject(key: "x")
            Issue.record("a dead endpoint answered")
        } catch {
            guard case .transport(let transportError, let attempts) = error else {
                Issue.record("expected a transport error, got \(error)")
                return
            }
            #expect(transportError.kind == .connectionFailed)
            #expect(attempts == RetryPolicy.control.maxAttempts, "retried as the control policy allows")
        }
    }
}
