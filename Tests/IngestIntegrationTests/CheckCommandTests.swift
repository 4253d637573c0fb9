import Foundation
import Glibc
import IngestTestSupport
import Testing

/// `ingest check` against a real SeaweedFS: it passes on a station that is ready, and for
/// each way a station is not (no bucket, no server, a wrong secret, a server clock 20 minutes
/// off, a full staging disk, the timer not enabled) it names that check, says the fix and
/// exits with the status a run would. The station's files are looked at in a
/// `make install DESTDIR=` tree.
@Suite(.serialized)
final class CheckCommandTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }
    /// The state directory: mkdtemp makes it 0700, as `make install` does.
    let state = TemporaryDirectory()
    let configDirectory = TemporaryDirectory()
    /// Short timeouts, and a reserve a test disk can hold.
    let config: String

    init() throws {
        config = try configDirectory.write(
            "ingest.toml", Array("[staging]\nreserve = \"8MiB\"\n[s3]\nconnect_timeout = \"2s\"\nstall_timeout = \"5s\"\n".utf8))
        server = try SeaweedFS()
    }

    /// Runs `ingest check --json` with the server's credentials and short timeouts; the
    /// station's files are not looked at unless `arguments` asks.
    func check(
        _ arguments: [String] = ["--no-station"], endpoint: String? = nil, bucket: String? = nil,
        environment extra: [String: String] = [:]
    ) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            ["check", "--json", "--state-dir", state.path, "--endpoint", endpoint ?? server.endpoint,
             "--bucket", bucket ?? self.bucket] + arguments,
            environment: environment.merging(extra) { $1 }, timeout: 120)
    }

    /// Each check's status (`pass`, `warn`, `fail`, `skip`) by its name.
    static func statuses(_ run: IngestRun) -> [String: String] {
        var statuses: [String: String] = [:]
        for event in run.events("check") {
            if let name = event.string("check") { statuses[name] = event.string("status") }
        }
        return statuses
    }

    static func event(_ run: IngestRun, _ name: String) -> [String: Any]? {
        run.events("check").first { $0.string("check") == name }
    }

    /// The checks that talk to the server or look at the disk, all but the station's files.
    static let withoutStation = [
        "config", "state_dir", "staging_space", "credentials", "bucket", "conditional_write", "checksums", "tagging", "clock",
    ]

    @Test(.timeLimit(.minutes(3)))
    func checkPassesAgainstTheTestServerAndLeavesNothingInTheBucket() throws {
        let run = try check()
        #expect(run.status == 0, "\(run.result.stdoutText)\(run.stderr)")
        let statuses = Self.statuses(run)
        for name in Self.withoutStation { #expect(statuses[name] == "pass", "\(name): \(String(describing: Self.event(run, name)))") }
        for name in ["udev_rule", "units", "rescan_timer"] { #expect(statuses[name] == "skip", "\(name): --no-station") }
        let summary = try #require(run.events("check_summary").last)
        #expect(summary["ready"] as? Bool == true && summary.int("exit_status") == 0)
        #expect(Self.event(run, "credentials")?.string("detail")?.contains(server.accessKey) == true, "it says which key")
        #expect(
            try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] == nil,
            "the conditional write's probe object is deleted")

        // The same for a person: one line per check, ✓ on each, and the verdict.
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        let console = try IngestRun.ingest(
            ["check", "--no-station", "--state-dir", state.path, "--endpoint", server.endpoint, "--bucket", bucket],
            environment: environment, timeout: 120)
        #expect(console.status == 0)
        let lines = console.result.stdoutText.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("✓ ") }.count == Self.withoutStation.count, "\(console.result.stdoutText)")
        #expect(lines.contains { $0.hasPrefix("✓ conditional write: ") && $0.contains("(412)") })
        #expect(lines.last?.hasPrefix("ready: ") == true, "\(console.result.stdoutText)")
        #expect(!console.result.stdoutText.contains(server.secretKey) && !console.stderr.contains(server.secretKey))
    }

    @Test(.timeLimit(.minutes(3)))
    func checkRunsTheCredentialProcessAndSaysTheCredentialsCameFromIt() throws {
        let dir = TemporaryDirectory()
        // No session token: SeaweedFS, without STS, refuses requests that carry one.
        let helper = try dir.write("credentials.sh", Array("""
            #!/bin/sh
            echo '{"Version": 1, "AccessKeyId": "\(server.accessKey)", "SecretAccessKey": "\(server.secretKey)",
              "Expiration": "2099-01-01T00:00:00Z"}'
            """.utf8))
        chmod(helper, 0o700)
        let awsConfig = try dir.write("aws-config", Array("[default]\ncredential_process = \(helper)\n".utf8))
        chmod(awsConfig, 0o600)
        let run = try check(
            environment: [
                "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_CONFIG_FILE": awsConfig,
                "AWS_SHARED_CREDENTIALS_FILE": dir.path + "/no-credentials-file",
            ])
        #expect(run.status == 0, "\(run.result.stdoutText)\(run.stderr)")
        let detail = try #require(Self.event(run, "credentials")?.string("detail"))
        #expect(detail.contains("credential_process") && detail.contains("expiring 2099"), "\(detail)")
        #expect(!run.result.stdoutText.contains(server.secretKey) && !run.stderr.contains(server.secretKey))
    }

    @Test(.timeLimit(.minutes(3)))
    func aMissingBucketFailsTheBucketCheckWithStatus78() throws {
        let run = try check(bucket: "no-such-bucket")
        #expect(run.status == 78, "\(run.result.stdoutText)\(run.stderr)")
        let statuses = Self.statuses(run)
        #expect(statuses["bucket"] == "fail" && statuses["credentials"] == "pass")
        #expect(statuses["conditional_write"] == "skip", "nothing is written to a bucket that is not there")
        #expect(statuses["clock"] == "pass", "the 404 has a Date all the same")
        let bucket = try #require(Self.event(run, "bucket"))
        #expect(bucket.string("detail")?.contains("no-such-bucket does not exist") == true, "\(bucket)")
        #expect(bucket.string("remedy")?.contains("create it") == true, "\(bucket)")
        #expect(run.events("check_summary").last?.string("failed_checks") == "bucket")
        let buckets = (try server.json(["s3api", "list-buckets"])["Buckets"] as? [[String: Any]] ?? []).compactMap { $0["Name"] as? String }
        #expect(buckets == [self.bucket], "the check created no bucket")
    }

    @Test(.timeLimit(.minutes(3)))
    func anEndpointNothingListensOnFailsTheBucketCheckWithStatus69() throws {
        let port = try #require(try SeaweedFS.freePorts(1).first)
        let run = try check(endpoint: "http://127.0.0.1:\(port)")
        #expect(run.status == 69, "\(run.result.stdoutText)\(run.stderr)")
        let statuses = Self.statuses(run)
        #expect(statuses["bucket"] == "fail" && statuses["credentials"] == "pass", "\(statuses)")
        #expect(statuses["conditional_write"] == "skip" && statuses["clock"] == "skip")
        #expect(Self.event(run, "bucket")?.string("remedy")?.contains("endpoint URL") == true)
    }

    @Test(.timeLimit(.minutes(3)))
    func aWrongSecretFailsTheCredentialsCheckWithStatus77AndIsNeverPrinted() throws {
        let wrong = "wrong-secret-\(UInt32.random(in: 0...UInt32.max))"
        let run = try check(environment: ["AWS_SECRET_ACCESS_KEY": wrong])
        #expect(run.status == 77, "\(run.result.stdoutText)\(run.stderr)")
        let statuses = Self.statuses(run)
        #expect(statuses["credentials"] == "fail")
        #expect(statuses["bucket"] == "skip" && statuses["conditional_write"] == "skip")
        #expect(run.events("check_summary").last?.string("failed_checks") == "credentials")
        let credentials = try #require(Self.event(run, "credentials"))
        #expect(credentials.string("detail")?.contains("refused") == true, "\(credentials)")
        for text in [run.result.stdoutText, run.stderr] { #expect(!text.contains(wrong)) }
    }

    @Test(.timeLimit(.minutes(3)))
    func aServerClockTwentyMinutesOffFailsTheClockCheckAndSaysToEnableNTP() throws {
        let proxy = try FaultProxy(upstreamPort: server.s3Port, dateShift: 20 * 60)
        defer { proxy.stop() }
        let run = try check(endpoint: proxy.endpoint)
        #expect(run.status == 77, "\(run.result.stdoutText)\(run.stderr)\n\(proxy.log)")
        let statuses = Self.statuses(run)
        #expect(statuses["clock"] == "fail", "\(statuses)")
        for name in Self.withoutStation where name != "clock" { #expect(statuses[name] == "pass", "\(name)") }
        let clock = try #require(Self.event(run, "clock"))
        #expect(clock.string("detail")?.contains("20 min") == true && clock.string("detail")?.contains("behind") == true, "\(clock)")
        #expect(clock.string("remedy")?.contains("timedatectl set-ntp true") == true, "\(clock)")
        #expect(try proxy.stats().forwarded > 0, "the answers came through the proxy")

        // A clock two minutes off works, with a warning; the exit status stays 0.
        let near = try FaultProxy(upstreamPort: server.s3Port, dateShift: -120)
        defer { near.stop() }
        let warned = try check(endpoint: near.endpoint)
        #expect(warned.status == 0, "\(warned.result.stdoutText)")
        #expect(Self.statuses(warned)["clock"] == "warn")
        #expect(Self.event(warned, "clock")?.string("detail")?.contains("ahead of") == true)
    }

    @Test(.timeLimit(.minutes(3)))
    func aStagingDiskWithLessFreeThanTheReserveFailsTheStagingCheckWithStatus73() throws {
        let disk = TemporaryDirectory()
        try sh("mount -t tmpfs -o size=16m,mode=0700 ingest-test-staging \(shellQuoted(disk.path))")
        defer { _ = try? sh("umount \(shellQuoted(disk.path))") }
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        func checkOnDisk() throws -> IngestRun {
            try IngestRun.ingest(
                ["check", "--json", "--no-station", "--state-dir", disk.path + "/state", "--endpoint", server.endpoint,
                 "--bucket", bucket],
                environment: environment, timeout: 120)
        }
        let empty = try checkOnDisk()
        #expect(empty.status == 0, "16 MiB free, 8 MiB reserve: \(empty.result.stdoutText)")
        #expect(Self.statuses(empty)["staging_space"] == "pass")

        try sh("head -c \(12 << 20) /dev/zero > \(shellQuoted(disk.path))/filler")
        let full = try checkOnDisk()
        #expect(full.status == 73, "\(full.result.stdoutText)\(full.stderr)")
        let statuses = Self.statuses(full)
        #expect(statuses["staging_space"] == "fail")
        #expect(full.events("check_summary").last?.string("failed_checks") == "staging_space")
        let staging = try #require(Self.event(full, "staging_space"))
        #expect(staging.string("detail")?.contains("reserve 8.0 MiB") == true, "\(staging)")
        #expect(staging.string("remedy")?.contains("[staging] reserve") == true, "\(staging)")
    }

    /// Right after `make install` on a station with cron, the timer not enabled is a warning
    /// that says so, and the station is ready (0), not "configuration invalid" (78).
    @Test(.timeLimit(.minutes(3)))
    func rightAfterMakeInstallOnAStationWithCronTheTimerNotEnabledIsAWarning() throws {
        let root = TemporaryDirectory()
        let installed = try InstallTests.make("install", destdir: root.path)
        #expect(installed.status == 0, "\(installed.stderr)")
        let cron = try root.write("usr/sbin/cron", [])
        chmod(cron, 0o755)

        let check = try check(["--station-root", root.path])
        #expect(check.status == 0, "\(check.result.stdoutText)")
        let timer = try #require(Self.event(check, "rescan_timer"))
        #expect(timer.string("status") == "warn", "\(timer)")
        #expect(timer.string("detail")?.contains("this station has cron (/usr/sbin/cron)") == true, "\(timer)")
        #expect(timer.string("remedy")?.contains("systemctl enable --now ingest-rescan.timer") == true, "\(timer)")
        #expect(check.events("check_summary").last?["ready"] as? Bool == true)
    }

    @Test(.timeLimit(.minutes(3)))
    func theStationChecksFindTheInstalledFilesAndFailUntilTheTimerIsEnabled() throws {
        let root = TemporaryDirectory()
        let installed = try InstallTests.make("install", destdir: root.path)
        #expect(installed.status == 0, "\(installed.stderr)")

        let notEnabled = try check(["--station-root", root.path])
        #expect(notEnabled.status == 78, "\(notEnabled.result.stdoutText)")
        let statuses = Self.statuses(notEnabled)
        #expect(statuses["udev_rule"] == "pass" && statuses["units"] == "pass", "\(statuses)")
        #expect(statuses["rescan_timer"] == "fail")
        #expect(Self.event(notEnabled, "rescan_timer")?.string("remedy")?.contains("systemctl enable --now ingest-rescan.timer") == true)

        // What `systemctl enable` leaves: the link in timers.target.wants.
        let wants = root.path + "/etc/systemd/system/timers.target.wants"
        try FileManager.default.createDirectory(atPath: wants, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: wants + "/ingest-rescan.timer", withDestinationPath: "/usr/lib/systemd/system/ingest-rescan.timer")
        let enabled = try check(["--station-root", root.path])
        #expect(enabled.status == 0, "\(enabled.result.stdoutText)")
        #expect(Self.statuses(enabled).values.allSatisfy { $0 == "pass" }, "\(Self.statuses(enabled))")

        // A rule masked in /etc (a link to /dev/null) starts nothing, though /usr/lib has it.
        try FileManager.default.createDirectory(atPath: root.path + "/etc/udev/rules.d", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: root.path + "/etc/udev/rules.d/99-ingest.rules", withDestinationPath: "/dev/null")
        let masked = try check(["--station-root", root.path])
        #expect(masked.status == 78)
        #expect(Self.statuses(masked)["udev_rule"] == "fail")
        #expect(Self.event(masked, "udev_rule")?.string("detail")?.contains("masks it") == true)
    }
}
