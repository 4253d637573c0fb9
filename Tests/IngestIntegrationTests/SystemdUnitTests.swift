import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The shipped systemd units: `systemd-analyze verify` accepts them as installed, and the
/// sandbox they set up allows what `ingest` really does (traced with strace).
@Suite struct SystemdUnitTests {
    static let services = ["ingest@.service", "ingest-rescan.service"]

    /// `make install` into a fresh root, with the host's own units beside ours: verify
    /// follows dependencies such as sysinit.target, and looks for them in the root it gets.
    static func installedRoot() throws -> TemporaryDirectory {
        let root = TemporaryDirectory()
        let result = try InstallTests.make("install", destdir: root.path, ["PREFIX": "/usr"])
        guard result.status == 0 else { throw CommandFailed(command: "make install", result: result) }
        try sh("cp -an /usr/lib/systemd/system/. \(root.path)/usr/lib/systemd/system/")
        return root
    }

    /// `systemd-analyze verify` of units in `root`; ExecStart= binaries are looked up there,
    /// Documentation= man pages in the installed ones.
    static func verify(root: String, _ units: [String]) throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["MANPATH"] = root + "/usr/share/man"
        return try run("/usr/bin/systemd-analyze", ["verify", "--root=\(root)"] + units, environment: environment)
    }

    @Test func systemdAnalyzeVerifyAcceptsTheInstalledUnits() throws {
        let root = try Self.installedRoot()
        let accepted = try Self.verify(root: root.path, ["ingest@sdb1.service", "ingest-rescan.service", "ingest-rescan.timer"])
        #expect(accepted.status == 0)
        // verify exits 0 on unknown keys and bad values too; it only prints them.
        #expect(accepted.stderr.isEmpty && accepted.stdoutText.isEmpty, "\(accepted.stderr)\(accepted.stdoutText)")

        // The same check speaks up about a mistake, so its silence above means something.
        let unit = root.path + "/usr/lib/systemd/system/ingest-rescan.service"
        try (try String(contentsOfFile: unit, encoding: .utf8) + "ProtectSytem=strict\n")
            .write(toFile: unit, atomically: true, encoding: .utf8)
        let refused = try Self.verify(root: root.path, ["ingest-rescan.service"])
        #expect(refused.stderr.contains("Unknown key 'ProtectSytem'"), "\(refused.stderr)")
    }

    /// The value of a key in a unit of the checkout (the last one, as systemd reads it).
    static func setting(_ key: String, of unit: String) throws -> String? {
        try Repository.text("udev-rules/" + unit).split(separator: "\n")
            .last { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// The system calls a unit's SystemCallFilter= allows, its groups expanded by systemd-analyze.
    static func allowedSystemCalls(_ unit: String) throws -> Set<String> {
        let filter = try #require(try setting("SystemCallFilter", of: unit), "\(unit) has a SystemCallFilter=")
        var allowed: Set<String> = []
        var expanded: Set<String> = []
        var pending = filter.split(separator: " ").map(String.init)
        while let entry = pending.popLast() {
            guard entry.hasPrefix("@") else {
                allowed.insert(entry)
                continue
            }
            guard expanded.insert(entry).inserted else { continue }
            let listing = try sh("systemd-analyze syscall-filter \(shellQuoted(entry))")
            for line in listing.split(separator: "\n") where line.hasPrefix("    ") {
                let name = line.trimmingCharacters(in: .whitespaces)
                if !name.hasPrefix("#") { pending.append(name) }
            }
        }
        return allowed
    }

    /// The calls of a strace log (`strace -f -o`): name and argument text, one per call.
    static func calls(inTrace path: String) throws -> [(name: String, arguments: Substring)] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard let match = line.firstMatch(of: /^\d+\s+([a-z0-9_]+)\((.*)/) else { return nil }
            return (String(match.1), match.2)
        }
    }

    /// Everything a station's ingest does, short of mounting (that is `ingest --device`):
    /// stage and upload a card to a real S3 server (multipart included), ingest it again,
    /// status, ls, scan. Each run under strace; the calls of all of them.
    static func tracedRuns() throws -> [(name: String, arguments: Substring)] {
        let server = try SeaweedFS()
        defer { server.stop() }

        let work = TemporaryDirectory()
        try work.write("card/DCIM/100MEDIA/DJI_0001.JPG", randomBytes(200_000))
        try work.write("card/DCIM/100MEDIA/DJI_0002.MP4", randomBytes(12 << 20))
        try work.write("card/MISC/flight.log", randomBytes(3000))
        let config = try work.write("ingest.toml", Array("""
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            [staging]
            verify = "both"
            """.utf8))
        var environment = server.awsEnvironment.filter { !$0.key.hasPrefix("INGEST_") }
        environment["INGEST_CONFIG"] = config
        // As systemd runs it: READY=1 and STATUS= go to the notification socket, a datagram
        // the sandbox must let through.
        let notify = try NotifySocket()
        environment["NOTIFY_SOCKET"] = notify.name
        let card = work.path + "/card"
        let state = ["--state-dir", work.path + "/state"]
        let destination = ["--endpoint", server.endpoint, "--bucket", "cards"]
        let runs: [(arguments: [String], status: Int32)] = [
            ([card] + destination + state + ["--json"], 0),
            ([card] + destination + state, 0),
            (["status"] + state, 0),
            (["ls"] + destination + state, 0),
            (["scan", card, "--list"] + state, 0),
        ]
        var calls: [(name: String, arguments: Substring)] = []
        for (index, (arguments, status)) in runs.enumerated() {
            let trace = work.path + "/trace-\(index)"
            let result = try run(
                "/usr/bin/strace", ["-f", "-qq", "-s", "0", "-o", trace, IngestBinary.path] + arguments, environment: environment)
            #expect(result.status == status, "ingest \(arguments.joined(separator: " ")): \(result.stderr)")
            calls += try Self.calls(inTrace: trace)
        }
        #expect(calls.count > 1000, "strace recorded the runs")
        #expect(notify.receive(timeout: 5) == "READY=1", "the runs spoke to the service manager")
        return calls
    }

    /// The card's service waits for READY=1 and shows STATUS= (`Type=notify`); the nightly
    /// one, a oneshot, shows STATUS= too. Neither hears any process but ingest itself.
    @Test func theServicesHearTheRunsReadinessAndProgressFromItsMainProcessOnly() throws {
        #expect(try Self.setting("Type", of: "ingest@.service") == "notify")
        #expect(try Self.setting("Type", of: "ingest-rescan.service") == "oneshot")
        for service in Self.services {
            #expect(try Self.setting("NotifyAccess", of: service) == "main", "\(service)")
        }
    }

    @Test func theServicesSandboxesAllowEverySystemCallIngestMakes() throws {
        let calls = try Self.tracedRuns()
        let made = Set(calls.map(\.name))
        for service in Self.services {
            let allowed = try Self.allowedSystemCalls(service)
            #expect(allowed.count > 100, "\(service): the filter's groups expanded")
            #expect(made.subtracting(allowed).isEmpty, "\(service) refuses \(made.subtracting(allowed).sorted())")

            // MemoryDenyWriteExecute=: no writable and executable mapping, no memory made executable.
            #expect(try Self.setting("MemoryDenyWriteExecute", of: service) == "yes")
            for call in calls {
                switch call.name {
                case "mmap":
                    #expect(!(call.arguments.contains("PROT_WRITE") && call.arguments.contains("PROT_EXEC")), "\(call)")
                case "mprotect", "pkey_mprotect":
                    #expect(!call.arguments.contains("PROT_EXEC"), "\(call)")
                default: break
                }
            }

            // RestrictAddressFamilies=: every socket is of an allowed family.
            let families = Set(try #require(try Self.setting("RestrictAddressFamilies", of: service)).split(separator: " ").map(String.init))
            let opened = Set(calls.filter { $0.name == "socket" }.compactMap { $0.arguments.split(separator: ",").first.map(String.init) })
            #expect(opened.contains("AF_INET"), "the upload's sockets were traced")
            #expect(opened.isSubset(of: families), "\(service) refuses sockets of \(opened.subtracting(families).sorted())")

            // Nothing a card holds can exhaust the station or leave secrets in a core file.
            #expect(try Self.setting("MemoryMax", of: service) == "512M")
            #expect(try Self.setting("TasksMax", of: service) == "64")
            #expect(try Self.setting("LimitCORE", of: service) == "0")
            #expect(try Self.setting("DevicePolicy", of: service) == "closed")
            // Every thread and process the traced runs made fits in TasksMax= many times over.
            #expect(calls.filter { ["clone", "clone3", "fork", "vfork"].contains($0.name) }.count < 64)

            // RestrictNamespaces=yes: no namespace is made or entered.
            #expect(try Self.setting("RestrictNamespaces", of: service) == "yes")
            #expect(!calls.contains { ["unshare", "setns"].contains($0.name) || $0.arguments.contains("CLONE_NEW") })
        }
    }

    /// ingest@.service's main process, run as the unit runs it (``CardService``: its own
    /// mount namespace, no CAP_SYS_ADMIN) on a card `ingest mount-card` mounted, ingests and
    /// uploads it; every call it makes is in the unit's filter, and none mounts, unmounts or
    /// opens the card's device (the filter would refuse the first two anyway).
    @Test(needsRoot, .timeLimit(.minutes(5)))
    func theCardServicesMainProcessNeitherMountsNorOpensTheCardsDeviceAndStaysInItsFilter() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let destination = try CardDestination()
        let (card, sums) = try pulledOutCard(sizeMiB: 64, label: "TRACED", small: 6, big: 1, bigMiB: 12)
        try card.insert()
        let state = TemporaryDirectory()
        let work = TemporaryDirectory()
        let environment = CardService.environment(destination.environment)
        let mounted = try CardService.mountCard(card.device, state: state, environment: environment)
        #expect(mounted.status == 0, "\(mounted.stderr)")
        defer { _ = try? CardService.unmountCard(card.device) }

        let trace = work.path + "/trace"
        let ingested = try CardService.main(
            ["--device", card.device, "--json", "--state-dir", state.path] + destination.arguments, environment: environment,
            trace: trace)
        #expect(ingested.status == 0, "\(ingested.stderr)")
        #expect(ingested.events("uploaded").count == sums.count)

        let calls = try Self.calls(inTrace: trace)
        #expect(calls.count > 1000, "strace recorded the run")
        let made = Set(calls.map(\.name))
        let allowed = try Self.allowedSystemCalls("ingest@.service")
        #expect(made.subtracting(allowed).isEmpty, "ingest@.service refuses \(made.subtracting(allowed).sorted())")
        let mounting: Set = [
            "mount", "umount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
            "pivot_root",
        ]
        #expect(made.isDisjoint(with: mounting), "\(made.intersection(mounting).sorted())")
        #expect(allowed.isDisjoint(with: mounting), "the filter refuses \(allowed.intersection(mounting).sorted()) too")
        #expect(!calls.contains { $0.name.hasPrefix("open") && $0.arguments.contains("\"\(card.device)\"") }, "the device is never opened")

        let unit = "ingest@.service"
        #expect(try Self.setting("CapabilityBoundingSet", of: unit) == "CAP_DAC_READ_SEARCH")
        #expect(try Self.setting("ExecStartPre", of: unit) == "+@BINDIR@/ingest mount-card /dev/%I")
        #expect(try Self.setting("ExecStopPost", of: unit) == "+@BINDIR@/ingest unmount-card /dev/%I")
        #expect(try Self.setting("PrivateMounts", of: unit) == "yes")
    }
}
