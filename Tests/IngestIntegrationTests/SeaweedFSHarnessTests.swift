import Foundation
import IngestTestSupport
import Testing

/// The object store the uploader's tests run against: a real SeaweedFS on loopback, and the
/// `aws` CLI as the external oracle for what landed.
@Suite(.serialized)
struct SeaweedFSHarnessTests {
    @Test(.timeLimit(.minutes(3)))
    func seaweedFSStoresAndReturnsAnObjectByteForByte() throws {
        let server = try SeaweedFS(bucket: "harness")
        defer { server.stop() }
        let files = TemporaryDirectory()
        let source = try files.write("photo.jpg", randomBytes(3 << 20))

        #expect(try server.json(["s3api", "list-objects-v2", "--bucket", "harness"])["Contents"] == nil, "the bucket is there, empty")
        let put = try server.aws(["s3api", "put-object", "--bucket", "harness", "--key", "DCIM/photo 1.jpg", "--body", source])
        #expect(put.status == 0, "\(put.stderr)")
        let head = try server.aws(["s3api", "head-object", "--bucket", "harness", "--key", "DCIM/photo 1.jpg"])
        #expect(head.stdoutText.contains("\"ContentLength\": \(3 << 20)"))
        let copy = files.path + "/copy.jpg"
        #expect(try server.aws(["s3api", "get-object", "--bucket", "harness", "--key", "DCIM/photo 1.jpg", copy]).status == 0)
        #expect(try xxh128sum(copy) == (try xxh128sum(source)))
    }

    @Test(.timeLimit(.minutes(3)))
    func wrongCredentialsAreRefused() throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        var env = server.awsEnvironment
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        let result = try run(
            try TestVenv.tool("aws"), ["--endpoint-url", server.endpoint, "--region", "us-east-1", "s3api", "list-buckets"],
            environment: env)
        #expect(result.status != 0)
        #expect(result.stderr.contains("SignatureDoesNotMatch") || result.stderr.contains("AccessDenied"), "\(result.stderr)")
    }

    @Test(.timeLimit(.minutes(3)))
    func stoppingTheServerEndsItsProcess() throws {
        let server = try SeaweedFS()
        #expect(!processIsGone(server.pid))
        server.stop()
        #expect(processIsGone(server.pid))
    }
}
