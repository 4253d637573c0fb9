import Foundation
import Glibc

/// Ceph RGW (Debian 12's `radosgw`, 16.2.15) on a one-node cluster in a temporary directory:
/// one monitor, one OSD on memstore, radosgw with the beast frontend on 127.0.0.1, an S3 user
/// made with radosgw-admin, and one bucket. Started and stopped by `scripts/rgw.sh`, the one
/// recipe of its `ceph.conf` (also used by hand and by the fault suite); stopped by the PIDs
/// the script records. About 13 s to start on an idle machine, about 200 MB of RSS.
public final class CephRGW: S3TestServer {
    public let accessKey = "ingesttestaccess\(UInt32.random(in: 0...UInt32.max))"
    public let secretKey = "ingest-test-secret-\(UInt32.random(in: 0...UInt32.max))"
    public let bucket: String
    public let directory = TemporaryDirectory()
    public private(set) var endpoint = ""
    /// The cluster's directory of the start that worked (one per try).
    private var cluster: String?

    public var kind: S3ServerKind { .cephRGW }

    /// `scripts/rgw.sh` of the checkout these tests were built from.
    public static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/rgw.sh").path

    /// The monitor, the OSD and the gateway, from the script's `pids` file.
    public var processIDs: [pid_t] {
        guard let cluster, let text = try? String(contentsOfFile: cluster + "/pids", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { $0.split(separator: " ").last.flatMap { pid_t($0) } }
    }

    /// Starts the cluster and creates `bucket`. The script picks free ports; one taken before
    /// a daemon binds it fails the start, which leaves nothing running, and it is tried again
    /// in a fresh directory, at most three times.
    public init(bucket: String = "cards", timeout: TimeInterval = 120) throws {
        self.bucket = bucket
        _ = try TestVenv.tool("aws")
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AWS_") }
        environment["AWS_ACCESS_KEY_ID"] = accessKey
        environment["AWS_SECRET_ACCESS_KEY"] = secretKey
        environment["AWS_CONFIG_FILE"] = "/dev/null"
        environment["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"
        environment["VENV"] = TestVenv.directory
        for attempt in 1...3 {
            let cluster = directory.path + "/cluster-\(attempt)"
            self.cluster = cluster
            let result: ProcessResult
            do {
                result = try run("/bin/bash", [Self.script, "start", cluster, bucket], environment: environment, timeout: timeout)
            } catch {
                stop()  // timed out: the script was killed before it could stop what it started
                throw error
            }
            if result.status == 0 {
                endpoint = result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
                return
            }
            stop()  // the script stops what it started when it fails; this makes sure
            if attempt == 3 { throw CommandFailed(command: "\(Self.script) start \(cluster)", result: result) }
        }
    }

    public func stop() {
        guard let cluster else { return }
        _ = try? run("/bin/bash", [Self.script, "stop", cluster], timeout: 60)
    }

    deinit { stop() }
}
