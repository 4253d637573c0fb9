import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Logging
import Testing

/// The answers Ceph RGW 16 gives that S3 does not, from a server on loopback that gives
/// exactly them (SigV4 is not checked): a `CompleteMultipartUploadResult` with an empty
/// `<ETag>`, `NoSuchKey` for `ListParts` of an upload it completed, a 412 with an empty
/// `<Message>`. The real RGW is in the compatibility matrix; this pins each answer down.
@Suite(.serialized)
final class OddServerAnswersTests {
    static let script = #"""
        from http.server import BaseHTTPRequestHandler, HTTPServer
        from urllib.parse import urlparse, parse_qs

        class Odd(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, status, body):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = urlparse(self.path).path.split("/", 2)[2]
                if key == "not-a-result":
                    self.answer(200, "<Something><ETag>\"e\"</ETag></Something>")
                else:
                    self.answer(200, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUploadResult>"
                                     f"<Location>http://127.0.0.1/cards/{key}</Location><Bucket>cards</Bucket>"
                                     f"<Key>{key}</Key><ETag></ETag></CompleteMultipartUploadResult>")

            def do_GET(self):
                self.answer(404, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code>"
                                 "<Message></Message><RequestId>tx1</RequestId></Error>")

            def do_HEAD(self):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_PUT(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.answer(412, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>PreconditionFailed</Code>"
                                 "<Message></Message><RequestId>tx2</RequestId></Error>")

            def log_message(self, *args):
                pass

        server = HTTPServer(("127.0.0.1", 0), Odd)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#

    let server: ChildProcess
    let port: Int

    init() throws {
        server = try ChildProcess(try TestVenv.tool("python3"), ["-c", Self.script])
        var found: Int?
        for _ in 0..<200 where found == nil {
            found = server.standardOutputSoFar.split(separator: "\n").first.flatMap { Int($0) }
            if found == nil { usleep(25_000) }
        }
        port = try #require(found, "the odd server did not start: \(server.standardErrorSoFar)")
    }

    deinit {
        kill(server.pid, SIGKILL)
        _ = try? server.wait(timeout: 5)
    }

    func client() throws -> S3Client {
        let credentials = CredentialsProvider(environment: [
            "AWS_ACCESS_KEY_ID": "odd", "AWS_SECRET_ACCESS_KEY": "odd-secret",
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        ])
        let destination = S3Destination(endpoint: "http://127.0.0.1:\(port)", bucket: "cards", region: "us-east-1", addressing: .path)
        return try S3Client(
            destination: destination, credentials: credentials, transport: CurlTransport(settings: TransportSettings()),
            logger: Logger(label: "test"))
    }

    @Test(.timeLimit(.minutes(1)))
    func aCompleteResultWithAnEmptyETagIsASuccessThatNamesNoETag() async throws {
        let etag = try await client().completeMultipartUpload(
            key: "DJI_0001.MP4", uploadID: "u1", parts: [CompletedPart(number: 1, etag: "\"p\"")])
        #expect(etag == nil)
    }

    @Test(.timeLimit(.minutes(1)))
    func aCompleteAnsweredWithSomethingElseIsAnError() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            _ = try await client().completeMultipartUpload(
                key: "not-a-result", uploadID: "u1", parts: [CompletedPart(number: 1, etag: "\"p\"")])
        }
        guard case .unexpectedAnswer(_, let detail)? = error else {
            Issue.record("expected an unexpected answer, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("CompleteMultipartUploadResult"))
    }

    @Test(.timeLimit(.minutes(1)))
    func noSuchKeyForARequestNamingAnUploadIsTheUploadGone() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            _ = try await client().listParts(key: "DJI_0001.MP4", uploadID: "u1")
        }
        guard case .uploadGone(let s3)? = error else {
            Issue.record("expected the upload gone, got \(String(describing: error))")
            return
        }
        #expect(s3.code == .noSuchKey)
        // Without an upload id, NoSuchKey is what it says: no such object.
        #expect(try await client().headObject(key: "DJI_0001.MP4") == nil)
    }

    @Test(.timeLimit(.minutes(1)))
    func aRefusalWithAnEmptyMessageIsAPreconditionFailedToldWithoutIt() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            _ = try await client().putObject(
                key: "taken", body: .bytes(Array("x".utf8)), payloadHash: .unsigned, headers: [.ifNoneMatchAny])
        }
        #expect(error?.isPreconditionFailed == true)
        #expect(!"\(String(describing: error))".contains(": ["), "no empty message in \(String(describing: error))")
    }
}
