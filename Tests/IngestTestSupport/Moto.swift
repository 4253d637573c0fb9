import Foundation
import Glibc

/// moto's S3 server (`moto_server` from the venv, PyPI `moto[server]`) on 127.0.0.1 with one
/// bucket: AWS's behaviour (conditional writes, checksum types, tagging, copy, error bodies)
/// as moto models it, in one Python process kept in memory. Stopped by its PID.
///
/// moto accepts any access key and secret; the ones given are still sent, signed, as to AWS.
public final class Moto: S3TestServer {
    public let accessKey = "ingest-test-access"
    public let secretKey = "ingest-test-secret-\(UInt32.random(in: 0...UInt32.max))"
    public let bucket: String
    public let directory = TemporaryDirectory()
    public private(set) var port = 0
    private var server: ChildProcess?

    public var kind: S3ServerKind { .moto }
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    public var processIDs: [pid_t] { server.map { [$0.pid] } ?? [] }

    /// Starts the server and creates `bucket`; throws when S3 does not answer within
    /// `timeout`. A port free when picked may be taken before moto binds it: a server that
    /// exits at start is started again on another port, at most three times.
    public init(bucket: String = "cards", timeout: TimeInterval = 60) throws {
        self.bucket = bucket
        let moto = try TestVenv.tool("moto_server")
        for attempt in 1...3 {
            guard let failure = try start(moto, timeout: timeout) else { break }
            if attempt == 3 { throw failure }
        }
        do {
            try createBucket(bucket)
        } catch {
            stop()
            throw error
        }
    }

    /// Nil once S3 answers; otherwise why not, with the server stopped.
    private func start(_ moto: String, timeout: TimeInterval) throws -> CommandFailed? {
        port = try SeaweedFS.freePorts(1)[0]
        // No region or account from the machine; a fixed region, as the client's requests name.
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AWS_") && !$0.key.hasPrefix("MOTO_") }
        environment["AWS_DEFAULT_REGION"] = "us-east-1"
        let server = try ChildProcess(moto, ["-H", "127.0.0.1", "-p", String(port)], environment: environment)
        self.server = server
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let result = try? aws(["s3api", "list-buckets"], timeout: 10), result.status == 0 { return nil }
            guard server.isRunning else { break }
            usleep(100_000)
        }
        let running = server.isRunning
        stop()
        let failure = CommandFailed(command: "moto_server (S3 not answering within \(timeout) s)", result: try server.wait(timeout: 5))
        if running { throw failure }  // a server that ran and never answered: no second try
        return failure
    }

    public func stop() { server?.terminate() }

    deinit { stop() }
}
