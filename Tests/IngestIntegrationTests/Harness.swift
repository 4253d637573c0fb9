import Foundation
import Glibc
import Synchronization
import IngestTestSupport
import Testing

/// The `ingest` binary built next to this test bundle.
enum IngestBinary {
    static var path: String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [bundle, bundle.deletingLastPathComponent()].map { $0.appendingPathComponent("ingest").path }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }
}

/// The release build of `ingest`, the only one `make install` and `make deb` take:
/// INGEST_RELEASE_BINARY, or the release build in the scratch path of this debug one (`make
/// test` builds `.build/release/ingest` first, for the fault suite).
enum ReleaseBinary {
    static var path: String {
        if let path = ProcessInfo.processInfo.environment["INGEST_RELEASE_BINARY"], !path.isEmpty { return path }
        let scratch = URL(fileURLWithPath: IngestBinary.path).deletingLastPathComponent().deletingLastPathComponent()
        return scratch.appendingPathComponent("release/ingest").path
    }

    /// The path, once it is known to hold a binary; a test that needs it fails saying how to make one.
    static func required() throws -> String {
        let path = path
        try #require(
            FileManager.default.isExecutableFile(atPath: path),
            "no release build at \(path): run make release (make test does), or set INGEST_RELEASE_BINARY")
        return path
    }
}

/// One run of the real binary, with its NDJSON events parsed.
struct IngestRun {
    let result: ProcessResult
    var status: Int32 { result.status }
    var stderr: String { result.stderr }

    var events: [[String: Any]] {
        result.stdoutText.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func events(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }

    var summary: [String: Any]? { events("summary").last }

    /// Runs `ingest` with `arguments`, as root or (with `asUser`) as that user through setpriv.
    static func ingest(
        _ arguments: [String], asUser user: String? = nil, environment extra: [String: String] = [:],
        timeout: TimeInterval = 600
    ) throws -> IngestRun {
        let (executable, prefix) = command(asUser: user)
        return IngestRun(
            result: try run(
                executable, prefix + arguments, environment: environment.merging(extra) { $1 }, timeout: timeout))
    }

    /// Starts `ingest` without waiting for it.
    static func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(IngestBinary.path, arguments, environment: environment.merging(extra) { $1 })
    }

    static func command(asUser user: String?) -> (String, [String]) {
        guard let user else { return (IngestBinary.path, []) }
        return ("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)", "--clear-groups", "--", IngestBinary.path])
    }

    /// No configuration from the machine leaks in: no /etc file is read unless a test says so.
    static var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env = env.filter { !$0.key.hasPrefix("INGEST_") }
        env["INGEST_CONFIG"] = "/dev/null"
        return env
    }
}

/// A running udev daemon, so that loop devices get their `ID_FS_*` properties, held for as
/// long as a test keeps its handle. Uses the machine's if one answers; otherwise the first
/// holder in this process starts one, and the last holder to let go stops it (by PID), so a
/// test never loses the daemon another test started while it still needs it.
final class Udevd: Sendable {
    /// The daemon this process started, if any, and how many handles hold it.
    private struct Shared {
        var holders = 0
        var child: ChildProcess?
    }
    private static let shared = Mutex(Shared())
    private let held = Mutex(true)

    init() throws {
        try Self.shared.withLock { shared in
            if shared.holders == 0, (try? sh("udevadm control --ping -t 2")) == nil {
                shared.child = try Self.start()
            }
            shared.holders += 1
        }
    }

    /// Lets go of the daemon; the last holder stops the one this process started.
    func stop() {
        guard held.withLock({ held in defer { held = false }; return held }) else { return }
        Self.shared.withLock { shared in
            shared.holders -= 1
            guard shared.holders == 0, let child = shared.child else { return }
            child.terminate(grace: 10)
            shared.child = nil
        }
    }

    deinit { stop() }

    private static func start() throws -> ChildProcess {
        try sh("mkdir -p /run/udev")
        let child = try ChildProcess("/lib/systemd/systemd-udevd", [])
        for _ in 0..<100 {
            if (try? sh("udevadm control --ping -t 1")) != nil { return child }
            usleep(50_000)
        }
        throw CommandFailed(command: "systemd-udevd", result: try child.wait(timeout: 1))
    }
}

/// A card: an ext4 image on a loop device, mounted, with a known label and UUID.
final class LoopCard {
    let directory: TemporaryDirectory
    let image: String
    let label: String
    let uuid: String
    private(set) var device = ""
    private(set) var mountPoint: String

    /// Makes the image, attaches and mounts it read-write; call `populate` then `seal`.
    /// `imageName` from `TestCardRule.imageName` makes udev see the card as one in a USB reader.
    init(sizeMiB: Int, label: String, uuid: String = UUID().uuidString.lowercased(), imageName: String = "card.img") throws {
        directory = TemporaryDirectory()
        chmod(directory.path, 0o755)  // other users (the tests' `nobody`) must reach the mount
        image = directory.path + "/" + imageName
        self.label = label
        self.uuid = uuid
        mountPoint = directory.path + "/mnt"
        try sh("""
            truncate -s \(sizeMiB)M \(image)
            mkfs.ext4 -q -F -L \(shellQuoted(label)) -U \(uuid) -E lazy_itable_init=1,lazy_journal_init=1 \(image)
            mkdir -p \(mountPoint)
            """)
        try attach(readOnly: false)
    }

    /// Attaches the image and mounts it (what inserting the card does).
    func attach(readOnly: Bool) throws {
        device = try sh("losetup -f --show \(image)").trimmingCharacters(in: .whitespacesAndNewlines)
        try sh("udevadm settle -t 10 || true; mount \(readOnly ? "-o ro" : "") \(device) \(mountPoint)")
    }

    /// Flushes what was written and remounts read-only, as a card is ingested.
    func seal() throws { try sh("sync; mount -o remount,ro \(mountPoint)") }

    /// Unmounts (if mounted here) and detaches (pulling the card out after the fact): every
    /// loop device of the image, however many a test attached, each tried again while udev
    /// still holds it (a loop device left behind outlives the test and its image).
    func detach() throws {
        try sh("""
            if mountpoint -q \(mountPoint); then umount \(mountPoint) || umount -l \(mountPoint); fi
            for loop in $(losetup -n -O NAME -j \(image)); do
                for try in 1 2 3 4 5 6 7 8 9 10; do losetup -d "$loop" 2>/dev/null && break; udevadm settle -t 2 || sleep 0.2; done
            done
            """)
        device = ""
    }

    /// Attaches the image without mounting it: a card inserted, for udev and ingest to find.
    func insert() throws {
        device = try sh("losetup -f --show \(image)").trimmingCharacters(in: .whitespacesAndNewlines)
        try sh("udevadm settle -t 10 || true")
    }

    /// The device's kernel name, e.g. `loop3`.
    var kernelName: String { String(device.split(separator: "/").last ?? "") }

    deinit {
        if !device.isEmpty { _ = try? detach() }
    }
}

extension Dictionary where Key == String, Value == Any {
    func string(_ key: String) -> String? { self[key] as? String }
    func int(_ key: String) -> Int? { (self[key] as? NSNumber)?.intValue }
}

/// `xxh128sum` of every regular file under `root`, by path relative to it (raw bytes of the
/// names, so that names that are not UTF-8 compare exactly).
func xxh128sums(under root: String) throws -> [[UInt8]: String] {
    let result = try run("/bin/bash", ["-c", "cd \(shellQuoted(root)) && find . -type f -readable -print0 | xargs -0 -r xxh128sum"])
    guard result.status == 0 else { throw CommandFailed(command: "xxh128sum", result: result) }
    var sums: [[UInt8]: String] = [:]
    for line in result.stdout.split(separator: UInt8(ascii: "\n")) {
        let bytes = Array(line)
        guard bytes.count > 36, bytes[32] == UInt8(ascii: " ") else { continue }
        let path = Array(bytes[36...])  // "<32 hex>  ./path"
        sums[path] = String(decoding: bytes[..<32], as: UTF8.self)
    }
    return sums
}

/// A udev rules file that tests install in /run/udev/rules.d while any of them holds it.
///
/// The file name carries this process's id (`98-ingest-test-card-1234.rules`), so that test
/// processes running at once (two worktrees, two suites) never remove each other's copy;
/// copies left by a process that died are removed the next time one is installed. Within
/// a process the copy is reference-counted: the first holder installs it and reloads
/// udevd, the last one removes it and reloads again.
final class UdevRulesFile: Sendable {
    static let directory = "/run/udev/rules.d"

    /// The file's name without the process id and `.rules`, like `98-ingest-test-card`.
    let stem: String
    let text: String
    let path: String
    private let holders = Mutex(0)

    init(stem: String, text: String) {
        self.stem = stem
        self.text = text
        path = "\(Self.directory)/\(stem)-\(getpid()).rules"
    }

    /// Installs the file (and reloads udevd) for the duration of `body`.
    func whileInstalled<T>(_ body: () throws -> T) throws -> T {
        try holders.withLock { count in
            if count == 0 {
                try FileManager.default.createDirectory(atPath: Self.directory, withIntermediateDirectories: true)
                removeCopiesOfDeadProcesses()
                try text.write(toFile: path, atomically: true, encoding: .utf8)
                try sh("udevadm control --reload")
            }
            count += 1
        }
        defer {
            holders.withLock { count in
                count -= 1
                if count == 0 {
                    unlink(path)
                    _ = try? sh("udevadm control --reload")
                }
            }
        }
        return try body()
    }

    private func removeCopiesOfDeadProcesses() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: Self.directory)) ?? []
        for name in names where name.hasPrefix(stem + "-") && name.hasSuffix(".rules") {
            let pid = name.dropFirst(stem.count + 1).dropLast(".rules".count)
            guard let pid = pid_t(pid), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            unlink("\(Self.directory)/\(name)")
        }
    }
}

/// A test-only udev rule that makes a loop device look like a card in a USB reader, so that
/// the shipped rule and `ingest watch` treat it as one. Only images named `ingest-card-*.img`
/// qualify, so loop devices of other tests (and of the machine) are left alone. It sorts
/// before `99-ingest.rules` and never loosens the shipped rule.
///
/// Installed in /run/udev/rules.d while any test holds it; the last release removes it.
enum TestCardRule {
    static let text = """
        # ingest tests only: a loop device backed by ingest-card-*.img is a card in a USB reader.
        SUBSYSTEM=="block", KERNEL=="loop[0-9]*", ATTR{loop/backing_file}=="*/ingest-card-*.img", ENV{ID_BUS}="usb"

        """
    private static let file = UdevRulesFile(stem: "98-ingest-test-card", text: text)
    static var path: String { file.path }

    /// The image name a `LoopCard` must have for the rule to apply.
    static func imageName(_ tag: String) -> String { "ingest-card-\(tag).img" }

    /// Installs the rule (and reloads udevd) for the duration of `body`.
    static func whileInstalled<T>(_ body: () throws -> T) throws -> T { try file.whileInstalled(body) }
}

/// The checkout these tests were built from: the Makefile, udev-rules/, man/, etc/.
enum Repository {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func text(_ relative: String) throws -> String {
        try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
    }
}

/// The shipped `udev-rules/99-ingest.rules`, installed for tests under a name that sorts
/// where the real one does (after `98-ingest-test-card`, before `99-systemd.rules`).
enum ShippedIngestRule {
    static let repositoryPath = Repository.root + "/udev-rules/99-ingest.rules"

    private static let file: UdevRulesFile = {
        let text = (try? String(contentsOfFile: repositoryPath, encoding: .utf8)) ?? ""
        return UdevRulesFile(stem: "99-ingest-test-shipped", text: text)
    }()
    static var path: String { file.path }

    /// Installs the shipped rule (and reloads udevd) for the duration of `body`.
    static func whileInstalled<T>(_ body: () throws -> T) throws -> T {
        guard !file.text.isEmpty else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: repositoryPath]) }
        return try file.whileInstalled(body)
    }
}

/// `path` with its links resolved, as `realpath` prints it: what a card's root is journalled as.
func realPath(_ path: String) throws -> String {
    try sh("realpath \(shellQuoted(path))").trimmingCharacters(in: .whitespacesAndNewlines)
}
