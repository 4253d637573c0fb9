import Foundation

/// The checks of `ingest check` on what makes a machine an ingest station (`make install`):
/// the udev rule that starts `ingest@.service` when a card appears, the units, and the
/// nightly rescan enabled.
///
/// Files are looked for where udev and systemd look, in their order (a file in `/etc` wins
/// over one of the same name in `/usr/lib`), and one that is a link to `/dev/null` masks the
/// others. The timer is enabled when `systemctl enable` has left its link in a
/// `timers.target.wants` directory; the files are the primary evidence because they are
/// there whether or not systemd runs (in a container, an image, a chroot). Only on a live
/// system booted with systemd is `systemctl is-enabled` asked besides, for what it knows
/// that the links do not show.
struct StationReadiness {
    /// The machine's root: `/`, or a tree such as a `make install DESTDIR=`.
    let root: String
    /// The variables a `systemctl` gets (its PATH).
    let environment: [String: String]

    static let udevRuleDirectories = ["/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"]
    static let unitDirectories = [
        "/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
        "/lib/systemd/system",
    ]
    static let rule = "99-ingest.rules"
    static let units = ["ingest@.service", "ingest-rescan.service", "ingest-rescan.timer"]
    static let timer = "ingest-rescan.timer"
    /// Where hosts without systemd schedule the rescan (`udev-rules/ingest.cron`).
    static let cronFile = "/etc/cron.d/ingest"

    /// `path` (absolute on the station) where it is on this machine.
    private func onDisk(_ path: String) -> String { root == "/" ? path : root + path }

    /// The udev rule, the units, the nightly rescan.
    func run() -> [ReadinessCheck] { [udevRule(), unitFiles(), rescanTimer()] }

    /// Where a file named `name` is found first in `directories`, and whether that one masks it.
    enum Lookup: Equatable {
        case found(path: String)
        case masked(path: String)
        case missing
    }

    func lookUp(_ name: String, in directories: [String]) -> Lookup {
        for directory in directories {
            let path = directory + "/" + name
            guard let info = try? System.status(onDisk(path), followingLinks: false) else { continue }
            if info.isSymlink,
                (try? FileManager.default.destinationOfSymbolicLink(atPath: onDisk(path))) == "/dev/null"
            {
                return .masked(path: path)
            }
            return .found(path: path)
        }
        return .missing
    }

    private var install: String { root == "/" ? "sudo make install" : "make install DESTDIR=\(root)" }

    func udevRule() -> ReadinessCheck {
        switch lookUp(Self.rule, in: Self.udevRuleDirectories) {
        case .found(let path):
            return .passed(.udevRule, path)
        case .masked(let path):
            return .failed(
                .udevRule, "\(path) masks it (a link to /dev/null): cards inserted start nothing",
                remedy: "rm \(path); udevadm control --reload", status: .config)
        case .missing:
            return .failed(
                .udevRule,
                "\(Self.rule) is in none of \(Self.udevRuleDirectories.joined(separator: ", ")): cards inserted start nothing",
                remedy: "\(install); udevadm control --reload", status: .config)
        }
    }

    func unitFiles() -> ReadinessCheck {
        var found: [String] = []
        var problems: [String] = []
        var remedies: [String] = []
        for unit in Self.units {
            switch lookUp(unit, in: Self.unitDirectories) {
            case .found(let path): found.append(path)
            case .masked(let path):
                problems.append("\(unit) is masked (\(path) is a link to /dev/null)")
                remedies.append("systemctl unmask \(unit)")
            case .missing:
                problems.append("\(unit) is missing")
                if !remedies.contains(install) { remedies.append(install) }
            }
        }
        guard problems.isEmpty else {
            return .failed(
                .units, problems.joined(separator: "; ") + " (looked in \(Self.unitDirectories.joined(separator: ", ")))",
                remedy: (remedies + ["systemctl daemon-reload"]).joined(separator: "; "), status: .config)
        }
        return .passed(.units, found.joined(separator: ", "))
    }

    /// Enabled by `systemctl enable` (its link in `timers.target.wants`), or scheduled by cron
    /// (a line of `/etc/cron.d` or `/etc/crontab` that runs `ingest rescan`). The shipped
    /// `/etc/cron.d/ingest` runs it only where systemd did not boot the host (`test -d
    /// /run/systemd/system ||`), so on a live system booted with systemd such a line
    /// schedules nothing and the timer must be enabled.
    ///
    /// Neither is a failure where a cron daemon is installed, only a warning: a crontab that
    /// is not ours to read (a user's, under `/var/spool/cron`) may run the rescan, and the
    /// station ingests cards without it. Where there is no cron, nothing can run it.
    func rescanTimer() -> ReadinessCheck {
        if case .found(let path) = lookUp(Self.timer, in: Self.unitDirectories.map { $0 + "/timers.target.wants" }) {
            return .passed(.rescanTimer, "\(Self.timer) is enabled (\(path))")
        }
        if let entry = cronEntryRunningRescan() {
            return .passed(.rescanTimer, "scheduled by cron (\(entry))")
        }
        if systemctlSaysEnabled() {
            return .passed(.rescanTimer, "\(Self.timer) is enabled (systemctl is-enabled)")
        }
        let unscheduled =
            "\(Self.timer) is not enabled (no link in timers.target.wants) and no file in /etc/cron.d "
            + "or /etc/crontab runs ingest rescan"
        let waiting = "pending uploads, cards left in a reader and staging wait for someone to run ingest rescan"
        let remedy =
            "systemctl enable --now \(Self.timer), or schedule it with cron: "
            + "cp \(InstalledDocuments.named("ingest.cron")) \(Self.cronFile)"
        if let cron = cronDaemon() {
            return .warned(
                .rescanTimer,
                "\(unscheduled); this station has cron (\(cron)), and a crontab ingest does not read may run it: "
                    + "if none does, \(waiting)",
                remedy: remedy)
        }
        return .failed(.rescanTimer, "\(unscheduled), and this station has no cron: \(waiting)", remedy: remedy, status: .config)
    }

    /// The programs of a cron daemon (Debian's cron, cronie, busybox's crontab), the first found.
    static let cronPrograms = ["/usr/sbin/cron", "/usr/sbin/crond", "/usr/bin/crontab"]

    private func cronDaemon() -> String? {
        Self.cronPrograms.first { (try? System.access(onDisk($0), .execute)) != nil }
    }

    /// The first file of the system's crontabs with a line (not a comment) that runs
    /// `ingest rescan`.
    private func cronEntryRunningRescan() -> String? {
        let directory = "/etc/cron.d"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: onDisk(directory))) ?? []
        for path in ["/etc/crontab"] + names.sorted().map({ directory + "/" + $0 }) {
            guard let info = try? System.status(onDisk(path)), info.isRegularFile, info.st_size <= 1 << 20,
                let data = FileManager.default.contents(atPath: onDisk(path))
            else { continue }
            let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            let deferring = bootedWithSystemd
            if lines.contains(where: { line in
                let text = line.drop { $0 == " " || $0 == "\t" }
                guard !text.hasPrefix("#"), text.contains("ingest rescan") else { return false }
                return !(deferring && text.contains("test -d /run/systemd/system ||"))
            }) {
                return path
            }
        }
        return nil
    }

    /// This is the live system, and systemd booted it.
    private var bootedWithSystemd: Bool {
        root == "/" && (try? System.status("/run/systemd/system"))?.isDirectory == true
    }

    /// `systemctl is-enabled` on a live system booted with systemd; false elsewhere.
    private func systemctlSaysEnabled() -> Bool {
        guard bootedWithSystemd else { return false }
        let command = ShellCommand(
            command: "systemctl is-enabled --quiet \(Self.timer)",
            environment: ["PATH": environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"])
        guard let result = try? command.run(timeout: .seconds(10), outputLimit: 4096) else { return false }
        return result.termination == .exited(0)
    }
}
