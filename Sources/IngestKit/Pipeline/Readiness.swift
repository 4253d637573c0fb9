/// One check of `ingest check`: what it looked at, what it found, and what to do about it.
public struct ReadinessCheck: Sendable, Equatable {
    /// The checks, in the order they are shown: the station itself first, then the
    /// destination, then the files that start ingest on their own.
    public enum Name: String, Sendable, CaseIterable {
        case configuration = "config"
        case stateDirectory = "state_dir"
        case stagingSpace = "staging_space"
        case credentials
        case bucket
        case conditionalWrite = "conditional_write"
        /// Whether the server reports a multipart object's CRC32C, and in which form.
        case checksums
        /// Whether the server keeps an object's tags.
        case tagging
        case clock
        /// One of several S3 gateways of the bucket: it answers, and shows the same bucket.
        case gateway
        case udevRule = "udev_rule"
        case units
        case rescanTimer = "rescan_timer"

        /// How the console names it.
        public var title: String {
            switch self {
            case .configuration: "configuration"
            case .stateDirectory: "state directory"
            case .stagingSpace: "staging space"
            case .credentials: "credentials"
            case .bucket: "bucket"
            case .conditionalWrite: "conditional write"
            case .checksums: "checksums"
            case .tagging: "tagging"
            case .clock: "clock"
            case .gateway: "gateway"
            case .udevRule: "udev rule"
            case .units: "systemd units"
            case .rescanTimer: "nightly rescan"
            }
        }
    }

    public enum Outcome: String, Sendable, Equatable {
        case pass
        /// Works, but something deserves a look; does not change the exit status.
        case warn
        case fail
        /// Not looked at: a check it needs failed, or it does not apply here.
        case skip

        /// The mark in front of the console line.
        public var mark: String {
            switch self {
            case .pass: "✓"
            case .warn: "!"
            case .fail: "✗"
            case .skip: "–"
            }
        }
    }

    public var name: Name
    public var outcome: Outcome
    /// What was found (or, for a skipped check, why it was not looked at).
    public var detail: String
    /// What to do: set for failures and warnings.
    public var remedy: String?
    /// The exit status a failure stands for: the one a run would end with for the same
    /// problem (77 for credentials, 73 for a full staging disk…).
    public var failureStatus: ExitStatus?

    public static func passed(_ name: Name, _ detail: String) -> Self {
        Self(name: name, outcome: .pass, detail: detail)
    }

    public static func warned(_ name: Name, _ detail: String, remedy: String) -> Self {
        Self(name: name, outcome: .warn, detail: detail, remedy: remedy)
    }

    public static func failed(_ name: Name, _ detail: String, remedy: String, status: ExitStatus) -> Self {
        Self(name: name, outcome: .fail, detail: detail, remedy: remedy, failureStatus: status)
    }

    public static func skipped(_ name: Name, because reason: String) -> Self {
        Self(name: name, outcome: .skip, detail: reason)
    }
}

/// Everything `ingest check` found, rendered for a person or a program.
public struct ReadinessReport: Sendable, Equatable {
    public var checks: [ReadinessCheck]

    public init(checks: [ReadinessCheck]) { self.checks = checks }

    public var failures: [ReadinessCheck] { checks.filter { $0.outcome == .fail } }

    /// 0 when nothing failed (warnings and skipped checks allowed); otherwise the status of
    /// the first failure, in the order the checks are shown.
    public var exitStatus: ExitStatus {
        failures.first.map { $0.failureStatus ?? .partial } ?? .success
    }

    /// One line per check, its remedy indented under it, and a verdict.
    public var consoleLines: [String] {
        var lines: [String] = []
        for check in checks {
            lines.append("\(check.outcome.mark) \(check.name.title): \(check.detail)")
            if let remedy = check.remedy, check.outcome == .fail || check.outcome == .warn {
                lines.append("    fix: \(remedy)")
            }
        }
        lines.append(verdict)
        return lines
    }

    /// "ready: …" or "not ready: …", with the counts and the failed checks' names.
    public var verdict: String {
        func count(_ outcome: ReadinessCheck.Outcome) -> Int { checks.filter { $0.outcome == outcome }.count }
        var counts = ["\(count(.pass)) passed"]
        if count(.warn) > 0 { counts.append("\(count(.warn)) with a warning") }
        if count(.fail) > 0 { counts.append("\(count(.fail)) failed") }
        if count(.skip) > 0 { counts.append("\(count(.skip)) not checked") }
        let failed = failures.map(\.name.title)
        return failed.isEmpty
            ? "ready: " + counts.joined(separator: ", ")
            : "not ready (\(failed.joined(separator: ", "))): " + counts.joined(separator: ", ")
    }

    /// NDJSON, as every `--json` of ingest: a `check` object per check, then `check_summary`.
    public var jsonLines: [String] {
        var lines = checks.map { check in
            var object: [String: JSONValue] = [
                "event": "check", "check": .string(check.name.rawValue), "status": .string(check.outcome.rawValue),
                "detail": .string(check.detail),
            ]
            object["remedy"] = check.remedy.map(JSONValue.string)
            if check.outcome == .fail { object["exit_status"] = .int(Int64((check.failureStatus ?? .partial).rawValue)) }
            return JSONValue.line(object)
        }
        func count(_ outcome: ReadinessCheck.Outcome) -> JSONValue {
            .int(Int64(checks.filter { $0.outcome == outcome }.count))
        }
        lines.append(
            JSONValue.line([
                "event": "check_summary", "ready": .bool(failures.isEmpty), "passed": count(.pass),
                "warnings": count(.warn), "failed": count(.fail), "skipped": count(.skip),
                "failed_checks": .string(failures.map(\.name.rawValue).joined(separator: ",")),
                "exit_status": .int(Int64(exitStatus.rawValue)),
            ]))
        return lines
    }
}
