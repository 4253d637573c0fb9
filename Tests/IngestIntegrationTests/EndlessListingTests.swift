import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Logging
import Testing

/// A server that answers every listing with one more truncated page, each with new markers,
/// forever (or, under the prefix `circle/`, with two markers in turn): the client follows a
/// bounded number of pages and stops, never forever, and keeps a bounded number of entries.
@Suite(.serialized)
final class EndlessListingTests {
    /// Counts requests (one line on stdout each) and answers ListObjectsV2,
    /// ListMultipartUploads and ListParts with a truncated page and fresh markers; SigV4 is
    /// not checked. Under `circle/` the markers go round two values; under `many/` a page
    /// lists 1,000 uploads; under `long/` an upload's key is 2,000 bytes.
    static let script = #"""
        import sys
        from http.server import BaseHTTPRequestHandler, HTTPServer
        from urllib.parse import urlparse, parse_qs

        class Endless(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body in one segment, sent at once: thousands of pages in seconds.
            wbufsize = 1 << 16
            disable_nagle_algorithm = True
            count = 0

            def do_GET(self):
                Endless.count += 1
                n = Endless.count
                query = parse_qs(urlparse(self.path).query, keep_blank_values=True)
                prefix = query.get("prefix", [""])[0]
                marker = "ab"[n % 2] if prefix == "circle/" else str(n)
                if "uploadId" in query:
                    body = ("<ListPartsResult><IsTruncated>true</IsTruncated>"
                            f"<NextPartNumberMarker>{n}</NextPartNumberMarker></ListPartsResult>")
                elif query.get("list-type") == ["2"]:
                    body = ("<ListBucketResult><IsTruncated>true</IsTruncated>"
                            f"<NextContinuationToken>t{marker}</NextContinuationToken>"
                            f"<Contents><Key>{prefix}k{n:08d}</Key><Size>1</Size><ETag>\"e\"</ETag>"
                            "<LastModified>2026-11-01T10:00:00.000Z</LastModified></Contents>"
                            "</ListBucketResult>")
                else:
                    count = 1000 if prefix == "many/" else 1
                    key = "k" * 2000 if prefix == "long/" else f"k{n:08d}"
                    uploads = "".join(
                        f"<Upload><Key>{key}</Key><UploadId>u{n}-{i}</UploadId>"
                        "<Initiated>2026-11-01T10:00:00.000Z</Initiated></Upload>" for i in range(count))
                    body = ("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                            f"<NextKeyMarker>k{marker}</NextKeyMarker><NextUploadIdMarker>u{marker}</NextUploadIdMarker>"
                            f"{uploads}</ListMultipartUploadsResult>")
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                print("request", flush=True)

            def log_message(self, *args):
                pass

        server = HTTPServer(("127.0.0.1", 0), Endless)
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
        port = try #require(found, "the endless server did not start: \(server.standardErrorSoFar)")
    }

    deinit {
        kill(server.pid, SIGKILL)
        _ = try? server.wait(timeout: 5)
    }

    var requests: Int { server.standardOutputSoFar.split(separator: "\n").count - 1 }

    func client() throws -> S3Client {
        let credentials = CredentialsProvider(environment: [
            "AWS_ACCESS_KEY_ID": "endless", "AWS_SECRET_ACCESS_KEY": "endless-secret",
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        ])
        let destination = S3Destination(endpoint: "http://127.0.0.1:\(port)", bucket: "cards", region: "us-east-1", addressing: .path)
        return try S3Client(
            destination: destination, credentials: credentials, transport: CurlTransport(settings: TransportSettings()),
            logger: Logger(label: "test"))
    }

    @Test(.timeLimit(.minutes(2)))
    func listMultipartUploadsStopsAtItsPageBoundAndSaysSo() async throws {
        let listing = try await client().listMultipartUploads(prefix: "fleet/", keeping: { $0.uploadID.hasSuffix("7-0") })
        #expect(listing.isTruncated, "the server had more")
        #expect(listing.pages == S3Client.maxListPages)
        #expect(listing.listed == S3Client.maxListPages)
        #expect(listing.uploads.count == 10, "only what the caller kept is held: u7-0, u17-0, … u97-0")
        #expect(requests == S3Client.maxListPages, "no request beyond the bound")
    }

    @Test(.timeLimit(.minutes(3)))
    func listPartsThatPagesPastItsBoundIsAnError() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            _ = try await client().listParts(key: "fleet/a.MP4", uploadID: "u")
        }
        guard case .unexpectedAnswer(_, let detail)? = error else {
            Issue.record("expected an unexpected answer, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("\(S3Client.maxListPartsPages)"))
        #expect(requests == S3Client.maxListPartsPages)
    }

    @Test(.timeLimit(.minutes(2)))
    func listObjectsThatPagesPastItsBoundIsAnErrorAndHoldsOnePageAtATime() async throws {
        var objects = 0
        var largestPage = 0
        let error = await #expect(throws: S3ClientError.self) {
            try await client().listObjectsV2(prefix: "fleet/") { page in
                objects += page.count
                largestPage = max(largestPage, page.count)
            }
        }
        guard case .unexpectedAnswer(_, let detail)? = error else {
            Issue.record("expected an unexpected answer, got \(String(describing: error))")
            return
        }
        let bound = S3Client.maxObjectListPages
        #expect(detail.contains("ListObjectsV2 still said there was more after \(bound) pages"), "\(detail)")
        #expect(detail.contains("list a narrower prefix"))
        #expect(objects == bound)
        #expect(largestPage == 1)
        #expect(requests == bound, "no request beyond the bound")
    }

    @Test(.timeLimit(.minutes(2)))
    func aListingWhoseMarkersGoRoundInACircleIsAnErrorAtTheFirstRepeat() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            try await client().listObjectsV2(prefix: "circle/") { _ in }
        }
        guard case .unexpectedAnswer(_, let detail)? = error else {
            Issue.record("expected an unexpected answer, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("ListObjectsV2 gave a marker it gave before"), "\(detail)")
        #expect(requests == 3, "tb, ta, then tb again")
        await #expect(throws: S3ClientError.self) {
            _ = try await client().listMultipartUploads(prefix: "circle/")
        }
        #expect(requests == 6)
    }

    @Test(.timeLimit(.minutes(2)))
    func listMultipartUploadsKeepsAtMostItsBoundOfUploads() async throws {
        let listing = try await client().listMultipartUploads(prefix: "many/")
        #expect(listing.uploads.count == S3Client.maxKeptUploads)
        #expect(listing.isTruncated)
        #expect(requests == S3Client.maxKeptUploads / 1000, "it stops once it holds its bound")
    }

    @Test(.timeLimit(.minutes(2)))
    func anUploadWithAKeyLongerThanS3AllowsIsAnError() async throws {
        let error = await #expect(throws: S3ClientError.self) {
            _ = try await client().listMultipartUploads(prefix: "long/")
        }
        guard case .unexpectedAnswer(_, let detail)? = error else {
            Issue.record("expected an unexpected answer, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("longer than 1024 bytes"))
    }
}
