import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The S3 servers the compatibility matrix runs against (issue 51), as fixtures: each starts
/// on 127.0.0.1, answers, behaves as S3 in what ingest relies on, and leaves no process behind.
@Suite(.serialized)
struct S3ServersTests {
    /// Each server starts with its bucket, refuses a second `If-None-Match: *` PUT with 412,
    /// keeps tags, copies an object, and after `stop()` none of its processes runs.
    @Test(.timeLimit(.minutes(3)), arguments: S3ServerKind.selected)
    func theServerStartsAnswersAsS3AndLeavesNoProcessWhenStopped(kind: S3ServerKind) throws {
        let started = ContinuousClock.now
        let server = try kind.start(bucket: "fixture")
        defer { server.stop() }
        let startup = ContinuousClock.now - started
        let pids = server.processIDs
        #expect(!pids.isEmpty && pids.allSatisfy { !processIsGone($0) }, "\(kind) runs as \(pids)")
        print("\(kind): answering S3 \(startup) after the start, as \(pids.count) processes of \(residentMiB(pids)) MiB RSS")

        let buckets = try server.json(["s3api", "list-buckets"])["Buckets"] as? [[String: Any]] ?? []
        #expect(buckets.compactMap { $0["Name"] as? String }.contains("fixture"), "\(buckets)")

        let body = try server.directory.write("probe.txt", Array("first\n".utf8))
        let first = try status(of: server, ["s3api", "put-object", "--bucket", "fixture", "--key", "a", "--body", body, "--if-none-match", "*"])
        #expect(first == 200, "the first conditional PUT writes")
        let second = try status(of: server, ["s3api", "put-object", "--bucket", "fixture", "--key", "a", "--body", body, "--if-none-match", "*"])
        #expect(second == 412, "a second If-None-Match: * PUT of the key is refused")

        _ = try server.json([
            "s3api", "put-object-tagging", "--bucket", "fixture", "--key", "a", "--tagging", "TagSet=[{Key=xxh128,Value=00ff}]",
        ])
        let tags = try server.json(["s3api", "get-object-tagging", "--bucket", "fixture", "--key", "a"])["TagSet"] as? [[String: String]]
        #expect(tags == [["Key": "xxh128", "Value": "00ff"]])

        _ = try server.json(["s3api", "copy-object", "--bucket", "fixture", "--key", "b", "--copy-source", "fixture/a"])
        let copied = server.directory.path + "/copied"
        let get = try server.aws(["s3api", "get-object", "--bucket", "fixture", "--key", "b", copied])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(FileManager.default.contentsEqual(atPath: copied, andPath: body), "the copy holds the object's bytes")

        server.stop()
        #expect(processesGone(pids, within: .seconds(15)), "\(kind): \(pids.filter { !processIsGone($0) }) still run after stop")
    }

    /// The HTTP status of the last answer `aws --debug` logs: aws-cli cannot read some
    /// servers' error bodies (RGW 16 sends an empty `<Message>`), the status is what counts.
    func status(of server: any S3TestServer, _ arguments: [String]) throws -> Int {
        let result = try server.aws(arguments + ["--debug"])
        let statuses = result.stderr.split(separator: "\n").compactMap { line -> Int? in
            guard line.contains("urllib3.connectionpool"), let http = line.range(of: " HTTP/1.1\" ") else { return nil }
            return Int(line[http.upperBound...].prefix(3))
        }
        return try #require(statuses.last, "no answer logged: \(result.stderr.suffix(2000))")
    }

    /// The RSS of `pids` together, in MiB, from /proc.
    func residentMiB(_ pids: [pid_t]) -> Int {
        pids.reduce(0) { total, pid in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return total + (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
        }
    }
}
