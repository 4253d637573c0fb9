import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// The parts of `ingest check` that need no server: how a report reads and what it exits
/// with, and the checks of the state directory, the staging space and the station's files,
/// on real directories.
@Suite struct ReadinessReportTests {
    static let mixed = ReadinessReport(checks: [
        .passed(.configuration, "/etc/ingest/ingest.toml with s3://cards at https://s3.example.net"),
        .warned(.stateDirectory, "others can read it", remedy: "chmod o-rwx /var/lib/ingest"),
        .failed(.stagingSpace, "300.0 MiB free, reserve 1.0 GiB", remedy: "free space", status: .cantCreate),
        .failed(.credentials, "refused", remedy: "check the key", status: .noPermission),
        .skipped(.bucket, because: "needs credentials the server accepts"),
    ])

    @Test func theExitStatusIsTheFirstFailuresInTheOrderShown() {
        #expect(Self.mixed.exitStatus == .cantCreate)
        #expect(Self.mixed.failures.map(\.name) == [.stagingSpace, .credentials])
    }

    @Test func warningsAndSkippedChecksLeaveTheExitStatusZero() {
        let report = ReadinessReport(checks: [
            .passed(.configuration, "ok"), .warned(.clock, "2 min 0 s ahead", remedy: "enable NTP"),
            .skipped(.units, because: "--no-station"),
        ])
        #expect(report.exitStatus == .success)
        #expect(report.verdict == "ready: 1 passed, 1 with a warning, 1 not checked")
    }

    @Test func eachCheckIsOneLineWithItsMarkAndTheFixFollowsFailuresAndWarningsOnly() {
        #expect(Self.mixed.consoleLines == [
            "✓ configuration: /etc/ingest/ingest.toml with s3://cards at https://s3.example.net",
            "! state directory: others can read it",
            "    fix: chmod o-rwx /var/lib/ingest",
            "✗ staging space: 300.0 MiB free, reserve 1.0 GiB",
            "    fix: free space",
            "✗ credentials: refused",
            "    fix: check the key",
            "– bucket: needs credentials the server accepts",
            "not ready (staging space, credentials): 1 passed, 1 with a warning, 2 failed, 1 not checked",
        ])
    }

    @Test func jsonIsOneCheckObjectPerCheckThenASummary() throws {
        let objects = try Self.mixed.jsonLines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 6)
        #expect(objects.dropLast().allSatisfy { $0["event"] as? String == "check" })
        #expect(objects.dropLast().map { $0["check"] as? String } == ["config", "state_dir", "staging_space", "credentials", "bucket"])
        #expect(objects.dropLast().map { $0["status"] as? String } == ["pass", "warn", "fail", "fail", "skip"])
        #expect(objects[2]["exit_status"] as? Int == 73 && objects[2]["remedy"] as? String == "free space")
        #expect(objects[0]["exit_status"] == nil && objects[0]["remedy"] == nil, "a passed check has neither")
        let summary = try #require(objects.last)
        #expect(summary["event"] as? String == "check_summary")
        #expect(summary["ready"] as? Bool == false && summary["exit_status"] as? Int == 73)
        #expect(summary["failed_checks"] as? String == "staging_space,credentials")
        #expect(summary["passed"] as? Int == 1 && summary["warnings"] as? Int == 1 && summary["failed"] as? Int == 2)
        #expect(summary["skipped"] as? Int == 1)
    }

    @Test func clockOffsetsReadInTheLargestUnits() {
        #expect(DestinationReadiness.describe(.seconds(45)) == "45 s")
        #expect(DestinationReadiness.describe(.seconds(20 * 60 + 3)) == "20 min 3 s")
        #expect(DestinationReadiness.describe(.seconds(2 * 3600 + 5 * 60 + 9)) == "2 h 5 min")
    }
}

@Suite struct LocalReadinessTests {
    static func stateDirectory(mode: mode_t) -> (TemporaryDirectory, ReadinessCheck) {
        let directory = TemporaryDirectory()
        chmod(directory.path, mode)
        return (directory, LocalReadiness(statePath: directory.path, reserve: 0).stateDirectory())
    }

    @Test func aStateDirectoryOnlyItsOwnerCanUsePasses() {
        let (_, check) = Self.stateDirectory(mode: 0o700)
        #expect(check.outcome == .pass, "\(check)")
    }

    @Test func aStateDirectoryOthersCanReadIsAWarning() {
        let (directory, check) = Self.stateDirectory(mode: 0o755)
        #expect(check.outcome == .warn, "\(check)")
        #expect(check.remedy == "chmod o-rwx \(directory.path) (make install makes it 0700)")
    }

    @Test func aStateDirectoryOthersCanWriteFails() {
        let (directory, check) = Self.stateDirectory(mode: 0o777)
        #expect(check.outcome == .fail && check.failureStatus == .cantCreate, "\(check)")
        #expect(check.remedy == "chmod go-w \(directory.path)")
    }

    @Test func aStateDirectoryNotMadeYetPassesWhenItsParentIsWritableAndIsNotCreated() {
        let parent = TemporaryDirectory()
        let path = parent.path + "/a/b/state"
        let check = LocalReadiness(statePath: path, reserve: 0).stateDirectory()
        #expect(check.outcome == .pass && check.detail.contains("does not exist yet"), "\(check)")
        #expect(access(parent.path + "/a", F_OK) != 0, "checking changes nothing")
    }

    @Test func aFileWhereTheStateDirectoryShouldBeFails() throws {
        let parent = TemporaryDirectory()
        let path = try parent.write("state", [1])
        let check = LocalReadiness(statePath: path, reserve: 0).stateDirectory()
        #expect(check.outcome == .fail && check.detail == "\(path) is not a directory", "\(check)")
    }

    @Test func stagingSpaceFailsBelowTheReserveAndPassesAboveIt() throws {
        let directory = TemporaryDirectory()
        let free = try StagingArea.availableBytes(onFileSystemOf: directory.path)
        let roomy = LocalReadiness(statePath: directory.path, reserve: 1 << 20).stagingSpace()
        #expect(roomy.outcome == .pass, "\(roomy)")
        #expect(roomy.detail.hasSuffix("free at \(directory.path), reserve 1.0 MiB"), "measured where staging will be: \(roomy.detail)")
        let tight = LocalReadiness(statePath: directory.path, reserve: free * 2).stagingSpace()
        #expect(tight.outcome == .fail && tight.failureStatus == .cantCreate, "\(tight)")
    }
}

@Suite struct StationReadinessTests {
    /// A root with `files` (relative paths, made empty) and `links` (path → target).
    static func root(files: [String] = [], links: [String: String] = [:]) throws -> TemporaryDirectory {
        let root = TemporaryDirectory()
        for file in files { try root.write(String(file.dropFirst()), []) }
        for (path, target) in links {
            try FileManager.default.createDirectory(
                atPath: root.path + (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root.path + path, withDestinationPath: target)
        }
        return root
    }

    static let installed = [
        "/usr/lib/udev/rules.d/99-ingest.rules", "/usr/lib/systemd/system/ingest@.service",
        "/usr/lib/systemd/system/ingest-rescan.service", "/usr/lib/systemd/system/ingest-rescan.timer",
    ]

    static func checks(_ root: TemporaryDirectory) -> [ReadinessCheck.Name: ReadinessCheck] {
        Dictionary(uniqueKeysWithValues: StationReadiness(root: root.path, environment: [:]).run().map { ($0.name, $0) })
    }

    @Test func anInstalledStationWithTheTimerEnabledPasses() throws {
        let root = try Self.root(
            files: Self.installed,
            links: ["/etc/systemd/system/timers.target.wants/ingest-rescan.timer": "/usr/lib/systemd/system/ingest-rescan.timer"])
        let checks = Self.checks(root)
        #expect(checks.values.allSatisfy { $0.outcome == .pass }, "\(checks)")
        #expect(checks[.udevRule]?.detail == "/usr/lib/udev/rules.d/99-ingest.rules")
    }

    /// The shipped cron line defers to the timer where systemd booted the host (`test -d
    /// /run/systemd/system ||`); in a station's image, which may boot either way, it counts.
    @Test func aCronFileStandsForTheTimerOnHostsWithoutSystemd() throws {
        let root = try Self.root(files: Self.installed)
        try root.write(
            "etc/cron.d/ingest",
            Array("30 2 * * *  root  test -d /run/systemd/system || flock -n /run/lock/ingest-rescan.lock /usr/bin/ingest rescan\n".utf8))
        let check = try #require(Self.checks(root)[.rescanTimer])
        #expect(check.outcome == .pass && check.detail == "scheduled by cron (/etc/cron.d/ingest)", "\(check)")
    }

    @Test func nothingInstalledFailsEachWithTheInstallCommand() throws {
        let root = try Self.root()
        let checks = Self.checks(root)
        for name in [ReadinessCheck.Name.udevRule, .units, .rescanTimer] {
            #expect(checks[name]?.outcome == .fail && checks[name]?.failureStatus == .config, "\(name)")
        }
        #expect(checks[.udevRule]?.remedy == "make install DESTDIR=\(root.path); udevadm control --reload")
        #expect(checks[.units]?.detail.hasPrefix("ingest@.service is missing; ingest-rescan.service is missing") == true)
    }

    @Test func aLinkToDevNullInEtcMasksTheFileInUsrLib() throws {
        let root = try Self.root(
            files: Self.installed,
            links: [
                "/etc/udev/rules.d/99-ingest.rules": "/dev/null", "/etc/systemd/system/ingest@.service": "/dev/null",
            ])
        let checks = Self.checks(root)
        #expect(checks[.udevRule]?.outcome == .fail && checks[.udevRule]?.remedy == "rm /etc/udev/rules.d/99-ingest.rules; udevadm control --reload")
        #expect(checks[.units]?.outcome == .fail && checks[.units]?.remedy == "systemctl unmask ingest@.service; systemctl daemon-reload")
    }

    /// Right after `make install` the timer is not enabled; on a station with cron that is a
    /// warning that says so (a crontab ingest does not read may run the rescan), not a failure.
    @Test(arguments: ["/usr/sbin/cron", "/usr/sbin/crond", "/usr/bin/crontab"])
    func aTimerNotEnabledIsAWarningOnAStationWithCron(program: String) throws {
        let root = try Self.root(files: Self.installed + [program])
        chmod(root.path + program, 0o755)
        let check = try #require(Self.checks(root)[.rescanTimer])
        #expect(check.outcome == .warn, "\(check)")
        #expect(check.failureStatus == nil)
        #expect(check.detail.contains("this station has cron (\(program))"), "\(check.detail)")
        #expect(check.remedy?.hasPrefix("systemctl enable --now ingest-rescan.timer, or schedule it with cron: cp ") == true)
        #expect(check.remedy?.hasSuffix("ingest.cron /etc/cron.d/ingest") == true, "\(check.remedy ?? "")")
    }

    @Test func aTimerNotEnabledFailsWhereNoCronCanRunTheRescan() throws {
        let check = try #require(Self.checks(try Self.root(files: Self.installed))[.rescanTimer])
        #expect(check.outcome == .fail && check.failureStatus == .config, "\(check)")
        #expect(check.detail.contains("this station has no cron"), "\(check.detail)")
    }

    /// A line of /etc/cron.d or /etc/crontab that runs `ingest rescan` schedules it, whatever
    /// the file's name; a line commented out does not.
    @Test func aCronLineRunningIngestRescanSchedulesIt() throws {
        let root = try Self.root(files: Self.installed + ["/usr/sbin/cron"])
        chmod(root.path + "/usr/sbin/cron", 0o755)
        try root.write("etc/cron.d/nightly", Array("# 30 2 * * * root /usr/local/bin/ingest rescan\n".utf8))
        #expect(Self.checks(root)[.rescanTimer]?.outcome == .warn, "a comment schedules nothing")
        try root.write("etc/crontab", Array("SHELL=/bin/sh\n30 2 * * *  root  /usr/local/bin/ingest rescan\n".utf8))
        let check = try #require(Self.checks(root)[.rescanTimer])
        #expect(check.outcome == .pass && check.detail == "scheduled by cron (/etc/crontab)", "\(check)")
    }

    @Test func aFileInEtcOverridesTheOneInUsrLib() throws {
        let root = try Self.root(files: Self.installed + ["/etc/udev/rules.d/99-ingest.rules"])
        #expect(Self.checks(root)[.udevRule]?.detail == "/etc/udev/rules.d/99-ingest.rules")
    }
}

/// The fix `ingest check` gives for a configuration that is not there or lacks what a run needs.
@Suite struct ConfigurationRemedyTests {
    static let example = "/usr/local/share/doc/ingest/ingest.toml.example"

    @Test func withNoConfigurationFileTheFixSaysHowToCreateOneFromTheExample() throws {
        let endpoint = try #require(throws: IngestError.self) { try Config().s3.target() }
        let remedy = ReadinessChecker.remedy(for: endpoint, source: nil, example: Self.example)
        #expect(remedy == "no configuration file was found at /etc/ingest/ingest.toml: create /etc/ingest/ingest.toml "
            + "from the example (install -m 0644 \(Self.example) /etc/ingest/ingest.toml) and set [s3] endpoint in it, "
            + "or give --endpoint URL (INGEST_ENDPOINT)")
        var config = Config()
        config.s3.endpoint = "https://s3.example.net"
        let bucket = try #require(throws: IngestError.self) { try config.s3.target() }
        #expect(ReadinessChecker.remedy(for: bucket, source: nil, example: Self.example).hasSuffix(
            "and set [s3] bucket in it, or give --bucket NAME (INGEST_BUCKET)"))
    }

    @Test func aFileWithoutAnEndpointIsCompletedInThatFile() throws {
        let endpoint = try #require(throws: IngestError.self) { try Config().s3.target() }
        #expect(ReadinessChecker.remedy(for: endpoint, source: "/etc/ingest/ingest.toml", example: Self.example)
            == "set [s3] endpoint in /etc/ingest/ingest.toml, or give --endpoint URL (INGEST_ENDPOINT)")
    }

    @Test func aNamedFileThatIsNotThereIsCreatedFromTheExample() {
        let missing = TemporaryDirectory().path + "/none.toml"
        let error = IngestError.config(file: missing, key: nil, problem: "no such file (check --config or INGEST_CONFIG)")
        #expect(ReadinessChecker.remedy(for: error, source: nil, example: Self.example)
            == "create \(missing) from the example (install -m 0644 \(Self.example) \(missing)) and set [s3] endpoint "
            + "and bucket in it, or name the right file with --config or INGEST_CONFIG")
    }

    @Test func aWrongKeyOfAFileIsCorrectedThere() throws {
        let directory = TemporaryDirectory()
        let file = try directory.write("ingest.toml", Array("[staging]\nreserve = \"lots\"\n".utf8))
        let error = IngestError.config(file: file, key: "staging.reserve", problem: "'lots' is not a size")
        #expect(ReadinessChecker.remedy(for: error, source: nil, example: Self.example)
            == "correct staging.reserve in \(file); man ingest.toml lists every key")
    }

    /// The example is named where the install that the binary belongs to put it, and where
    /// an install puts it when it is not there.
    @Test func theExampleIsNamedWhereTheInstallPutIt() throws {
        let prefix = TemporaryDirectory()
        let binary = try prefix.write("bin/ingest", [])
        #expect(InstalledDocuments.named("ingest.toml.example", executable: binary)
            == "PREFIX/share/doc/ingest/ingest.toml.example")
        let example = URL(fileURLWithPath: try prefix.write("share/doc/ingest/ingest.toml.example", []))
            .resolvingSymlinksInPath().path
        #expect(InstalledDocuments.named("ingest.toml.example", executable: binary) == example)
        let link = prefix.path + "/ingest-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: binary)
        #expect(InstalledDocuments.path("ingest.toml.example", executable: link) == example, "the link is followed")
    }
}

/// How `ingest check` reads the CRC32C a server reported for its one-part multipart probe
/// object: each form a server answers in (issue 51) is named, with the proof ingest takes.
@Suite struct ChecksumProbeReadingTests {
    /// The probe's one part and what it makes: the composite value (the CRC32C of the part's
    /// CRC32C, then `-1`) and the full-object one (the part's own CRC32C).
    static let part = PartDigest.compute(.crc32c, bytes: DestinationReadiness.featureProbeBytes)
    static var composite: String {
        let length = Int64(DestinationReadiness.featureProbeBytes.count)
        guard case .crc32c(let value, _) = WholeObjectDigest.expected(parts: [part], lengths: [length]) else { return "" }
        return value
    }

    static func reading(_ crc32c: String?, type: String? = nil, completeError: S3ClientError? = nil) -> ReadinessCheck {
        DestinationReadiness.checksums(
            ObjectHead(size: 62, etag: "\"7b729934e0d5448870ad257748881816-1\"", checksumCRC32C: crc32c, checksumType: type),
            expected: part, completeError: completeError)
    }

    @Test func aCompositeCRC32CWithItsPartCountPasses() {
        let check = Self.reading(Self.composite, type: "COMPOSITE")
        #expect(check.outcome == .pass && check.detail.hasPrefix("composite CRC32C reported ("), "\(check.detail)")
        #expect(check.detail.contains("proven by the CRC32C of their parts"))
        #expect(Self.reading(Self.composite).outcome == .pass, "the -N says composite without the type")
    }

    @Test func theCompositeValueWithoutItsPartCountIsNamedAsMotoSends() {
        let bare = String(Self.composite.prefix { $0 != "-" })
        let check = Self.reading(bare)
        #expect(check.outcome == .pass && check.detail.hasPrefix("composite CRC32C reported without its -N part count"), "\(check.detail)")
    }

    @Test func aFullObjectCRC32CIsNamedWithOrWithoutItsType() {
        for check in [Self.reading(Self.part.base64), Self.reading(Self.part.base64, type: "FULL_OBJECT")] {
            #expect(check.outcome == .pass && check.detail.hasPrefix("full-object CRC32C reported"), "\(check.detail)")
            #expect(check.detail.contains("combined from their parts' CRC32Cs"))
        }
    }

    @Test func noChecksumIsAWarningNamingTheFallbackProof() {
        let check = Self.reading(nil, completeError: .unexpectedAnswer(status: 200, detail: "no ETag in CompleteMultipartUploadResult"))
        #expect(check.outcome == .warn && check.detail.hasPrefix("none reported"), "\(check.detail)")
        #expect(check.detail.contains("Content-MD5, which the server checks"))
        #expect(check.detail.contains("ETag of their part MD5s"))
        #expect(check.detail.contains("no ETag in CompleteMultipartUploadResult"), "the unreadable answer is said too")
    }

    /// moto without Python's `crc32c` module computes zlib's CRC32 and calls it CRC32C: every
    /// multipart upload would fail its check, so the station is not ready, and the fix is named.
    @Test func aCRC32COfNoFormIsAFailureNamingMD5() {
        for check in [Self.reading("AAAAAA=="), Self.reading("AAAAAA==", type: "FULL_OBJECT"), Self.reading("AAAAAA==-1")] {
            #expect(check.outcome == .fail && check.detail.hasPrefix("a CRC32C that is not the one of the bytes sent"), "\(check.detail)")
            #expect(check.remedy?.contains("checksum = \"md5\"") == true)
        }
    }
}
