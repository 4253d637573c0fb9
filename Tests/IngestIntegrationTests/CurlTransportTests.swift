import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// A real HTTP server on 127.0.0.1 (Python's http.server) that answers every request with
/// what it received: method, path, headers, body length and SHA-256. `/status/N` answers N
/// with an S3-style error body, `/stall` never answers, `/reset` drops the connection.
final class EchoServer {
    static let script = """
        import hashlib, json, socket, struct, time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Echo(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args): pass
            def answer(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                if self.path == "/stall":
                    time.sleep(60)
                    return
                if self.path == "/reset":
                    # No answer: the server closes the connection at once, with an RST.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                status = int(self.path.split("/")[2]) if self.path.startswith("/status/") else 200
                payload = b"<Error><Code>SlowDown</Code></Error>" if status != 200 else json.dumps({
                    "method": self.command, "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("X-Echo", "one")
                self.send_header("X-Echo", "two")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

        class Server(ThreadingHTTPServer):
            request_queue_size = 64  # every connection the transport opens at once, accepted

        server = Server(("127.0.0.1", 0), Echo)
        server.daemon_threads = True
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """

    let directory = TemporaryDirectory()
    let process: ChildProcess
    let port: Int

    init() throws {
        try Self.script.write(toFile: directory.path + "/echo.py", atomically: true, encoding: .utf8)
        let output = directory.path + "/port"
        process = try ChildProcess("/bin/sh", ["-c", "exec python3 \(directory.path)/echo.py > \(output)"])
        for _ in 0..<200 {
            if let text = try? String(contentsOfFile: output, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                self.port = port
                return
            }
            usleep(25_000)
        }
        kill(process.pid, SIGKILL)
        throw CommandFailed(command: "python3 echo.py (no port in 5 s)", result: try process.wait(timeout: 5))
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    deinit {
        kill(process.pid, SIGKILL)
        _ = try? process.wait(timeout: 5)
    }
}

@Suite struct CurlTransportTests {
    static func echo(_ response: HTTPResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    @Test func aFileRangeIsStreamedAsTheBodyByteForByte() async throws {
        try await streamsAFileRange(from: TemporaryDirectory())
    }

    /// Read through the page cache, as ramfs refuses direct I/O.
    @Test(needsRoot) func aFileRangeOnAFileSystemWithoutDirectIOIsStreamedToo() async throws {
        let ramfs = try RamfsDirectory()
        try await streamsAFileRange(from: ramfs.directory)
    }

    func streamsAFileRange(from files: TemporaryDirectory) async throws {
        let server = try EchoServer()
        let path = try files.write("part.bin", randomBytes(3 << 20))
        let (offset, length) = (1000, (2 << 20) + 7)
        let oracle = try sh("dd if=\(path) iflag=skip_bytes,count_bytes skip=\(offset) count=\(length) bs=64K status=none | sha256sum").prefix(64)

        let response = try await CurlTransport().send(HTTPRequest(
            method: "PUT", url: server.url("/bucket/key"), headers: [("x-amz-meta-origin", "DCIM/a.jpg")],
            body: .file(path: path, offset: Int64(offset), length: Int64(length))))

        #expect(response.status == 200)
        let echo = try Self.echo(response)
        #expect(echo["method"] as? String == "PUT")
        #expect(echo["length"] as? Int == length)
        #expect(echo["sha256"] as? String == String(oracle))
        let headers = try #require(echo["headers"] as? [String: String])
        #expect(headers["x-amz-meta-origin"] == "DCIM/a.jpg")
        #expect(headers["content-length"] == String(length))
        #expect(headers["expect"] == nil, "no 100-continue round trip before a part")
    }

    @Test func methodsCarryTheirBodiesAndHeadHasNone() async throws {
        let server = try EchoServer()
        let transport = CurlTransport()
        let post = try await transport.send(HTTPRequest(method: "POST", url: server.url("/b/k?uploads"), body: .bytes(Array("<x/>".utf8))))
        #expect(try Self.echo(post)["method"] as? String == "POST")
        #expect(try Self.echo(post)["path"] as? String == "/b/k?uploads")
        #expect(try Self.echo(post)["length"] as? Int == 4)
        let emptyPost = try await transport.send(HTTPRequest(method: "POST", url: server.url("/b/k?uploads")))
        #expect(try Self.echo(emptyPost)["length"] as? Int == 0)
        let delete = try await transport.send(HTTPRequest(method: "DELETE", url: server.url("/b/k?uploadId=1")))
        #expect(try Self.echo(delete)["method"] as? String == "DELETE")
        let head = try await transport.send(HTTPRequest(method: "HEAD", url: server.url("/b/k")))
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head[header: "Content-Length"] != nil)
    }

    @Test func anErrorStatusIsAnAnswerWithItsBodyAndHeaders() async throws {
        let server = try EchoServer()
        let response = try await CurlTransport().send(HTTPRequest(method: "GET", url: server.url("/status/503")))
        #expect(response.status == 503)
        #expect(String(decoding: response.body, as: UTF8.self).contains("<Code>SlowDown</Code>"))
        #expect(response[header: "x-echo"] == "one, two", "a repeated header keeps both values")
    }

    @Test func aPortWithNothingListeningIsAFailedConnection() async throws {
        let port = try SeaweedFS.freePorts(1)[0]
        await #expect(throws: TransportError.self) {
            try await CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/"))
        }
        do {
            _ = try await CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/"))
        } catch {
            #expect(error.kind == .connectionFailed)
            #expect(error.description.contains("check the endpoint"))
        }
    }

    /// The person wrote https:// for a server that speaks plain http: the error names that
    /// server and the URL to use, and is not a broken connection (which would be retried).
    @Test func httpsToAPlainHTTPServerIsNamedAsPlainHTTP() async throws {
        let server = try EchoServer()
        let host = "127.0.0.1:\(server.port)"
        do {
            _ = try await CurlTransport().send(HTTPRequest(method: "GET", url: "https://\(host)/bucket?location"))
            Issue.record("TLS to a plain-http server succeeded")
        } catch {
            #expect(error.kind == .plainHTTP(server: host), "\(error)")
            #expect(error.description.hasPrefix(
                "the server at https://\(host) speaks plain http, not https: use http://\(host) in the endpoint"))
            #expect(RetryPolicy.classify(.transport(error.kind)) == .permanent)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aServerThatStallsTimesOut() async throws {
        let server = try EchoServer()
        var settings = TransportSettings()
        settings.lowSpeedTime = .seconds(1)
        do {
            _ = try await CurlTransport(settings: settings).send(HTTPRequest(method: "GET", url: server.url("/stall")))
            Issue.record("a stalled request returned")
        } catch {
            #expect(error.kind == .timedOut)
        }
    }

    @Test func aDroppedConnectionIsAReset() async throws {
        let server = try EchoServer()
        do {
            _ = try await CurlTransport().send(HTTPRequest(method: "PUT", url: server.url("/reset"), body: .bytes(randomBytes(1000))))
            Issue.record("a dropped connection returned")
        } catch {
            #expect(error.kind == .connectionReset, "\(error)")
        }
    }

    /// A staged copy that is gone (ENOENT) or shorter than the part (EIO) is a body that
    /// cannot be read, not a connection problem: nothing is sent as if it were whole.
    @Test(arguments: [(false, ENOENT), (true, EIO)])
    func aBodyFileMissingOrCutShortIsReportedAsUnreadable(exists: Bool, errno expected: Int32) async throws {
        let server = try EchoServer()
        let files = TemporaryDirectory()
        let path = exists ? try files.write("part.bin", randomBytes(100_000)) : files.path + "/gone/staged"
        do {
            _ = try await CurlTransport().send(HTTPRequest(
                method: "PUT", url: server.url("/b/k"), body: .file(path: path, offset: 4096, length: 100_000)))
            Issue.record("an unreadable body was sent")
        } catch {
            guard case .bodyUnreadable(let cause) = error.kind else {
                Issue.record("expected bodyUnreadable, got \(error)")
                return
            }
            #expect(cause.errno == Errno(rawValue: expected))
        }
    }

    @Test func manyRequestsAtOnceAllComplete() async throws {
        let server = try EchoServer()
        let transport = CurlTransport()
        let base = server.url("")
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<32 {
                group.addTask {
                    try await transport.send(HTTPRequest(method: "PUT", url: "\(base)/k\(i)", body: .bytes(randomBytes(10_000)))).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 32))
    }

    /// More file bodies at once than the transport's connections, each larger than the
    /// read-ahead's two blocks: transfers pause for their blocks and resume, and every body
    /// arrives whole (sha256sum of each file as the oracle).
    @Test func manyFileBodiesAtOnceEachArriveByteForByte() async throws {
        let server = try EchoServer()
        let files = TemporaryDirectory()
        let sizes = (0..<24).map { (3 << 20) + $0 * 4099 }
        for (i, size) in sizes.enumerated() { _ = try files.write("part\(i)", randomBytes(size)) }
        let oracle = try sh("cd \(files.path) && sha256sum part*").split(separator: "\n").reduce(into: [String: String]()) {
            let fields = $1.split(separator: " ", omittingEmptySubsequences: true)
            $0[String(fields[1])] = String(fields[0])
        }
        let transport = CurlTransport()
        let base = server.url("")
        let echoes = try await withThrowingTaskGroup(of: (String, Int, String?).self) { group in
            for (i, size) in sizes.enumerated() {
                group.addTask {
                    let response = try await transport.send(HTTPRequest(
                        method: "PUT", url: "\(base)/b/part\(i)",
                        body: .file(path: files.path + "/part\(i)", offset: 0, length: Int64(size))))
                    return ("part\(i)", response.status, try Self.echo(response)["sha256"] as? String)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(echoes.count == sizes.count)
        for (name, status, sha256) in echoes {
            #expect(status == 200, "\(name)")
            #expect(sha256 == oracle[name], "\(name)")
        }
    }

    /// Under a send rate, more bodies than connections, from files and from memory, take
    /// turns: each arrives byte for byte, none waits long enough to be taken for stalled
    /// (2 s here), and all of them together take at least the time the rate allows for
    /// their bytes, less the quarter second the bucket holds when it starts.
    @Test(.timeLimit(.minutes(1)))
    func underASendRateManyBodiesAtOnceTakeTurnsAndArriveByteForByteNoFasterThanTheRate() async throws {
        let server = try EchoServer()
        let files = TemporaryDirectory()
        let sizes = (0..<20).map { (100 << 10) + $0 * 4099 }
        let bodies = try sizes.enumerated().map { i, size in
            let bytes = randomBytes(size)
            let path = try files.write("part\(i)", bytes)
            let body: HTTPBody = i.isMultiple(of: 2) ? .file(path: path, offset: 0, length: Int64(size)) : .bytes(bytes)
            return (body, PayloadHash(sha256Of: bytes).value)
        }
        let rate = 1 << 20
        var settings = TransportSettings()
        settings.maxSendRate = ByteRate(bytesPerSecond: Int64(rate))
        settings.lowSpeedTime = .seconds(2)
        let transport = CurlTransport(settings: settings)
        let base = server.url("")
        let started = ContinuousClock.now
        let echoes = try await withThrowingTaskGroup(of: (Int, Int, String?).self) { group in
            for (i, (body, _)) in bodies.enumerated() {
                group.addTask {
                    let response = try await transport.send(HTTPRequest(method: "PUT", url: "\(base)/b/part\(i)", body: body))
                    return (i, response.status, try Self.echo(response)["sha256"] as? String)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let (seconds, attoseconds) = (ContinuousClock.now - started).components
        #expect(echoes.count == bodies.count)
        for (i, status, sha256) in echoes {
            #expect(status == 200, "part\(i)")
            #expect(sha256 == bodies[i].1, "part\(i)")
        }
        let least = Double(sizes.reduce(0, +) - rate / 4) / Double(rate)
        #expect(Double(seconds) + Double(attoseconds) / 1e18 >= least, "\(sizes.reduce(0, +)) bytes at 1 MiB/s")
    }
}
