import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The files that configure ingest cannot hang it or eat the station's memory: a `--config`
/// (or `INGEST_CONFIG`, or an AWS shared file) naming a FIFO, `/dev/zero`, `/dev/urandom` or a
/// directory is refused with 78 at once, naming the file, what it is and the fix.
@Suite struct BoundedInputTests {
    /// One run of the binary under `/usr/bin/time`: its result, the seconds it took, the CPU
    /// seconds it spent (user and system) and its peak resident set in KiB. A run that hangs
    /// is killed after 20 s, and the test fails.
    ///
    /// "Within a second" is held on the process's own time: its CPU under a second (reading
    /// `/dev/zero` would spend it), and its wall time under 5 s (a FIFO waited on would
    /// take the 20). A wall bound of one second would measure the suite's other hundred
    /// tests on two cores, not ingest (it refuses in about 0.1 s on a quiet machine).
    private func measured(
        _ arguments: [String], environment extra: [String: String] = [:]
    ) throws -> (run: IngestRun, seconds: Double, cpu: Double, peakKiB: Int) {
        let started = ContinuousClock.now
        let result = try run(
            "/usr/bin/time", ["-f", "measured %M %U %S", IngestBinary.path] + arguments,
            environment: IngestRun.environment.merging(extra) { $1 }, timeout: 20)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let line = result.stderr.split(separator: "\n").last { $0.hasPrefix("measured ") }
        let fields = try #require(line?.split(separator: " ").dropFirst().map(String.init), "\(result.stderr)")
        let peak = try #require(fields.count == 3 ? Int(fields[0]) : nil, "\(result.stderr)")
        let cpu = (Double(fields[1]) ?? 99) + (Double(fields[2]) ?? 99)
        return (IngestRun(result: result), seconds, cpu, peak)
    }

    /// A path of each kind the operator could name by mistake (or that could be put there).
    private static func make(_ kind: String, in dir: TemporaryDirectory) throws -> String {
        switch kind {
        case "fifo":
            let path = dir.path + "/ingest.toml"
            #expect(mkfifo(path, 0o600) == 0)
            return path
        case "directory":
            let path = dir.path + "/conf.d"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            return path
        default:
            return kind
        }
    }

    @Test(arguments: ["fifo", "/dev/zero", "/dev/urandom", "directory"])
    func aConfigurationThatIsNoRegularFileExits78WithinASecondInLittleMemory(kind: String) throws {
        let dir = TemporaryDirectory()
        let path = try Self.make(kind, in: dir)
        let state = dir.path + "/state"
        for (arguments, environment) in [
            (["status", "--config", path, "--state-dir", state], [:]),
            (["status", "--state-dir", state], ["INGEST_CONFIG": path]),
        ] as [([String], [String: String])] {
            let (run, seconds, cpu, peakKiB) = try measured(arguments, environment: environment)
            #expect(run.status == 78, "\(run.stderr)")
            #expect(cpu < 1 && seconds < 5, "refused after \(seconds) s, \(cpu) CPU s")
            #expect(peakKiB < 64 * 1024, "peak RSS \(peakKiB) KiB")
            #expect(run.stderr.contains("invalid configuration (\(path)): is "), "\(run.stderr)")
            #expect(run.stderr.contains("not a regular file"), "\(run.stderr)")
            #expect(run.stderr.contains("point --config or INGEST_CONFIG at the configuration itself"), "\(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: state), "nothing is created")
    }

    @Test func aConfigurationOver1MiBExits78AndOneOf1MiBIsRead() throws {
        let dir = TemporaryDirectory()
        let header = "[staging]\nverify = \"nonsense\"\n"
        let padding = String(repeating: "#", count: (1 << 20) - header.utf8.count - 1) + "\n"
        let config = try dir.write("ingest.toml", Array((header + padding).utf8))
        let read = try IngestRun.ingest(["status", "--config", config, "--state-dir", dir.path + "/state"])
        #expect(read.status == 78)
        #expect(read.stderr.contains("'nonsense'"), "a file of exactly 1 MiB is read (and its error found): \(read.stderr)")

        try dir.write("ingest.toml", Array((header + "#" + padding).utf8))
        let (run, seconds, cpu, peakKiB) = try measured(["status", "--config", config, "--state-dir", dir.path + "/state"])
        #expect(run.status == 78)
        #expect(cpu < 1 && seconds < 5 && peakKiB < 64 * 1024, "\(seconds) s, \(cpu) CPU s, \(peakKiB) KiB")
        #expect(run.stderr.contains("invalid configuration (\(config)): is larger than 1 MiB"), "\(run.stderr)")
    }

    /// A configuration the operator links from elsewhere is legitimate; `/dev/null` is none.
    @Test func aLinkedConfigurationIsReadAndDevNullIsNone() throws {
        let dir = TemporaryDirectory()
        let real = try dir.write("real.toml", Array("state_dir = \"\(dir.path)/linked-state\"\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/ingest.toml", withDestinationPath: real)
        let linked = try IngestRun.ingest(["status", "--config", dir.path + "/ingest.toml"])
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(linked.result.stdoutText.contains("State directory: \(dir.path)/linked-state"))
        let none = try IngestRun.ingest(["status", "--config", "/dev/null", "--state-dir", dir.path + "/state"])
        #expect(none.status == 0, "\(none.stderr)")
    }

    /// AWS's shared files are configuration too: one that is a FIFO (or a device) is refused
    /// with 78 at the first request, naming the variable to fix, and nothing is sent.
    @Test(arguments: ["fifo", "/dev/zero"])
    func aCredentialsFileThatIsNoRegularFileExits78WithinASecond(kind: String) throws {
        let dir = TemporaryDirectory()
        let path = try Self.make(kind, in: dir)
        var environment = ["AWS_SHARED_CREDENTIALS_FILE": path, "AWS_CONFIG_FILE": "/dev/null", "AWS_PROFILE": ""]
        environment["AWS_ACCESS_KEY_ID"] = ""
        environment["AWS_SECRET_ACCESS_KEY"] = ""
        // Nothing listens on port 9: a request sent would fail otherwise (69), not with 78.
        let (run, seconds, cpu, peakKiB) = try measured(
            ["ls", "--endpoint", "http://127.0.0.1:9", "--bucket", "cards", "--state-dir", dir.path + "/state"],
            environment: environment)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(cpu < 1 && seconds < 5 && peakKiB < 64 * 1024, "\(seconds) s, \(cpu) CPU s, \(peakKiB) KiB")
        #expect(run.stderr.contains("refusing to read \(path): it is "), "\(run.stderr)")
        #expect(run.stderr.contains("not a regular file"), "\(run.stderr)")
        #expect(run.stderr.contains("AWS_SHARED_CREDENTIALS_FILE"), "the fix: \(run.stderr)")
    }
}
