import Foundation
import Glibc
import Logging
import Synchronization
import Testing

@testable import IngestKit

/// A one-request HTTP server on loopback that refuses every request with 412, as a store
/// does a conditional write to a key taken: on the headers alone when they carry
/// `Expect: 100-continue`, else after reading the body. It counts the body's bytes that
/// reached it.
private final class RefusingListener: Sendable {
    let port: UInt16
    private let listener: Int32
    private let received = Mutex<(bytes: Int, sawExpect: Bool)?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in serveOne() }
    }

    deinit { close(listener) }

    /// The body's bytes that arrived, and whether the request asked for `100 Continue`;
    /// waits for the one request to end.
    func result() -> (bytes: Int, sawExpect: Bool)? {
        _ = done.wait(timeout: .now() + 30)
        return received.withLock { $0 }
    }

    private func serveOne() {
        defer { done.signal() }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var head: [UInt8] = []
        var body = 0
        while true {
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { return }
            head += buffer[..<count]
            if let end = head.firstRange(of: Array("\r\n\r\n".utf8)) {
                body = head.count - end.upperBound
                head.removeSubrange(end.upperBound...)
                break
            }
        }
        let text = String(decoding: head, as: UTF8.self).lowercased()
        let sawExpect = text.contains("expect: 100-continue")
        let declared = text.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        if !sawExpect {
            while body < declared {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                body += count
            }
        }
        let answer = "<Error><Code>PreconditionFailed</Code></Error>"
        let response = "HTTP/1.1 412 Precondition Failed\r\nContent-Length: \(answer.utf8.count)\r\nConnection: close\r\n\r\n\(answer)"
        _ = response.withCString { write(connection, $0, strlen($0)) }
        // Whatever the client still sends before it closes counts too.
        shutdown(connection, Int32(SHUT_WR))
        while true {
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { break }
            body += count
        }
        received.withLock { $0 = (body, sawExpect) }
    }
}

@Suite struct ExpectContinueTests {
    /// A request asking for `100 Continue` and refused on its headers sends (nearly) none
    /// of its body: a conditional PutObject to a key taken costs a round trip, not the file.
    @Test func aRefusedRequestThatExpectsContinueSendsNoneOfItsBody() async throws {
        let listener = try RefusingListener()
        let body = [UInt8](repeating: 7, count: 8 << 20)
        let transport = CurlTransport()
        let response = try await transport.send(
            HTTPRequest(
                method: "PUT", url: "http://127.0.0.1:\(listener.port)/bucket/taken", body: .bytes(body), isPayload: true,
                expectContinue: true))
        #expect(response.status == 412)
        let result = try #require(listener.result())
        #expect(result.sawExpect)
        #expect(result.bytes < 256 << 10, "sent \(result.bytes) bytes of a body refused on its headers")
    }

    /// Without it, the same request sends its whole body before the refusal: what the
    /// option spares.
    @Test func aRequestThatDoesNotExpectContinueSendsItsBodyFirst() async throws {
        let listener = try RefusingListener()
        let body = [UInt8](repeating: 7, count: 8 << 20)
        let transport = CurlTransport()
        let response = try await transport.send(
            HTTPRequest(method: "PUT", url: "http://127.0.0.1:\(listener.port)/bucket/taken", body: .bytes(body), isPayload: true))
        #expect(response.status == 412)
        let result = try #require(listener.result())
        #expect(!result.sawExpect)
        #expect(result.bytes == body.count)
    }

    /// S3Client asks for `100 Continue` on a conditional PutObject of a large body only;
    /// a small body, or one not conditional, is sent at once.
    @Test(arguments: [(4 << 20, true, true), (4 << 20 - 1, true, false), (8 << 20, false, false)])
    func aConditionalPutObjectOfALargeBodyExpectsContinue(size: Int, conditional: Bool, expects: Bool) async throws {
        let listener = try RefusingListener()
        let credentials = CredentialsProvider(environment: [
            "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        ])
        let client = try S3Client(
            destination: S3Destination(endpoint: "http://127.0.0.1:\(listener.port)", bucket: "bucket", region: "us-east-1", addressing: .path),
            credentials: credentials, transport: CurlTransport(), logger: Logger(label: "test"))
        let body = [UInt8](repeating: 7, count: size)
        await #expect(throws: S3ClientError.self) {
            try await client.putObject(
                key: "taken", body: .bytes(body), payloadHash: .unsigned, headers: conditional ? [.ifNoneMatchAny] : [])
        }
        let result = try #require(listener.result())
        #expect(result.sawExpect == expects)
    }
}
