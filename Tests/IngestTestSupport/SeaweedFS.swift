import Foundation
import Glibc
import Testing

/// A real SeaweedFS S3 server on 127.0.0.1 with one bucket, started for a test and stopped by
/// its PID: the one fixture every test against an object store starts.
///
/// `weed server` runs master, volume server, filer and S3 gateway in one process. Ports are
/// picked free; the Iceberg and Lance side servers are switched off so that two instances
/// never collide, and the volume limits are raised so that new buckets get volumes at once.
///
/// A suite holds one in a stored property (started in its `init`, stopped when the suite
/// instance goes, after each test); a test that starts its own writes
/// `let server = try SeaweedFS()` and `defer { server.stop() }`, so that the server stops
/// however the test ends.
public final class SeaweedFS {
    public let accessKey = "ingest-test-access"
    public let secretKey: String
    /// The bucket created at start, empty.
    public let bucket: String
    public let directory = TemporaryDirectory()
    public private(set) var s3Port = 0
    private var server: ChildProcess!

    /// The `weed server` process, while it runs.
    public var pid: pid_t { server.pid }
    public var endpoint: String { "http://127.0.0.1:\(s3Port)" }

    /// Starts the server and creates `bucket`; throws when S3 does not answer within
    /// `timeout`. Ports are free when picked but may be taken before weed binds them (other
    /// tests start servers at the same time): a server that exits at start is started again
    /// on new ports, at most three times.
    ///
    /// `secretKey`: the secret of the access key, random unless given. Two servers given the
    /// same (`SeaweedFS(secretKey: first.secretKey)`) take the same credentials, as two clusters
    /// of one organisation may: one station's configuration can then list gateways of both.
    public init(bucket: String = "cards", secretKey: String? = nil, timeout: TimeInterval = 60) throws {
        self.bucket = bucket
        self.secretKey = secretKey ?? "ingest-test-secret-\(UInt32.random(in: 0...UInt32.max))"
        let weed = try TestVenv.tool("weed")
        try FileManager.default.createDirectory(atPath: directory.path + "/data", withIntermediateDirectories: true)
        for attempt in 1...3 {
            guard let failure = try start(weed, timeout: timeout) else { break }
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
    private func start(_ weed: String, timeout: TimeInterval) throws -> CommandFailed? {
        // weed also listens on each port + 10000 for gRPC: both must be free.
        let ports = try Self.freePorts(4)
        s3Port = ports[3]
        let config = """
            {"identities": [{"name": "ingest-test", "credentials": [{"accessKey": "\(accessKey)", "secretKey": "\(secretKey)"}],
              "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
            """
        try config.write(toFile: directory.path + "/s3.json", atomically: true, encoding: .utf8)
        server = try ChildProcess(weed, [
            "server", "-dir=\(directory.path)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.port=\(ports[0])", "-volume.port=\(ports[1])", "-filer.port=\(ports[2])",
            "-s3", "-s3.port=\(ports[3])", "-s3.config=\(directory.path)/s3.json",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
            "-master.volumeSizeLimitMB=512", "-volume.max=100",
        ])
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let result = try? aws(["s3api", "list-buckets"], timeout: 10), result.status == 0 { return nil }
            guard server.isRunning else { break }
            usleep(250_000)
        }
        let running = server.isRunning
        stop()
        let failure = CommandFailed(command: "weed server (S3 not answering within \(timeout) s)", result: try server.wait(timeout: 5))
        if running { throw failure }  // a server that ran and never answered: no second try
        return failure
    }

    /// SIGTERM, then SIGKILL after a grace period: weed can take long to stop.
    public func stop() {
        server?.terminate()
    }

    deinit { stop() }

    /// Ports that are free now, with their gRPC twins (port + 10000) free too.
    public static func freePorts(_ count: Int) throws -> [Int] {
        var ports: [Int] = []
        while ports.count < count {
            let port = try freePort()
            if port < 55535, !ports.contains(port), isFree(port + 10000) { ports.append(port) }
        }
        return ports
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
