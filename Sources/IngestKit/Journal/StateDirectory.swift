import Foundation
import Synchronization

/// The directory that holds everything `ingest` keeps between runs:
///
/// ```
/// journal.sqlite   (+ -wal, -shm)   the journal
/// staging/                          staged copies, named by fingerprint
/// locks/                            one lock file per volume and device; uploads.lock, one byte per
///                                   upload; streams.lock, one byte per stream
/// runs/                             one empty file per process that uploads (`<boot id>-<pid>`),
///                                   removed when it ends: one left behind tells of an unclean stop
/// ```
public struct StateDirectory: Sendable {
    public let path: String

    public var journalPath: String { Self.journalPath(in: path) }
    public static func journalPath(in directory: String) -> String { directory + "/journal.sqlite" }
    public var stagingPath: String { Self.stagingPath(in: path) }
    public static func stagingPath(in directory: String) -> String { directory + "/staging" }
    var locksPath: String { path + "/locks" }

    /// `/var/lib/ingest` for root, otherwise `$XDG_STATE_HOME/ingest` (`~/.local/state/ingest`).
    public static func defaultPath(environment: [String: String], isRoot: Bool = System.effectiveUserID == 0) -> String {
        if isRoot { return "/var/lib/ingest" }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/ingest" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/ingest"
    }

    /// Opens the state directory, creating it (mode 0750) if needed.
    public init(path: String) throws(IngestError) {
        self.path = path
        for directory in [path, path + "/locks"] {
            do { try makeDirectories(directory) } catch {
                throw .stateUnusable(path: directory, reason: "cannot create it: \(error.reason)")
            }
        }
    }

    /// Takes the exclusive lock of one volume, so that two triggers for one card never
    /// ingest it at once. Fails at once, with `.volumeBusy`, if another process holds it.
    public func lockVolume(_ identity: VolumeIdentity) throws(IngestError) -> VolumeLock {
        let name = Fingerprint.of(Array(identity.key.utf8)).hex
        let lockPath = "\(locksPath)/\(name).lock"
        guard let lock = try lock(at: lockPath, note: identity.key) else {
            throw .volumeBusy(volume: identity.displayName, lockPath: lockPath)
        }
        return lock
    }

    /// Takes the lock of one card device (`device-<kernel name>.lock`) before it is
    /// mounted, so that two `--device` runs (or `watch` and a `--device` run) never both
    /// mount and ingest it. Fails at once, with `.deviceBusy`, if another process holds it.
    public func lockDevice(kernelName: String, node: String) throws(IngestError) -> VolumeLock {
        let lockPath = "\(locksPath)/device-\(kernelName).lock"
        guard let lock = try lock(at: lockPath, note: node) else {
            throw .deviceBusy(device: node, lockPath: lockPath)
        }
        return lock
    }

    /// Takes the lock of one upload, so that two processes (a card's ingest and a `resume`,
    /// two cards with the same photo) never drive one upload at once. Nil when another
    /// process holds it: that one will finish it.
    ///
    /// Every upload's lock is one byte of `locks/uploads.lock` (``ByteLock``): no file is
    /// created or removed per upload. The byte is the upload id read as a number (ids are
    /// at most 15 hex digits, so no two share one); any other id is hashed to a byte.
    public func lockUpload(_ id: String) throws(IngestError) -> VolumeLock? {
        let path = "\(locksPath)/uploads.lock"
        do {
            return try ByteLock.ifFree(path: path, slot: Self.lockSlot(ofUpload: id)).map(VolumeLock.init)
        } catch {
            throw .stateUnusable(path: path, reason: error.reason)
        }
    }

    /// Takes the lock of one stream (``StreamRecord``), byte `id` of `locks/streams.lock`:
    /// its owner holds it while it sends the stream's parts, so a stream whose lock is free
    /// is one a kill or a power cut left, for another process to adopt. Nil when another
    /// process holds it.
    public func lockStream(_ id: Int64) throws(IngestError) -> VolumeLock? {
        let path = "\(locksPath)/streams.lock"
        do {
            return try ByteLock.ifFree(path: path, slot: id).map(VolumeLock.init)
        } catch {
            throw .stateUnusable(path: path, reason: error.reason)
        }
    }

    /// The byte of `locks/uploads.lock` that locks upload `id`.
    static func lockSlot(ofUpload id: String) -> Int64 {
        if id.utf8.count <= 15, let number = UInt64(id, radix: 16) { return Int64(number) }
        return Int64(bitPattern: Fingerprint.of(Array(id.utf8)).high & UInt64(Int64.max))
    }

    /// Opens (creating) and locks the file at `lockPath`, and writes in it who holds it;
    /// nil when another process holds it.
    private func lock(at lockPath: String, note: String) throws(IngestError) -> VolumeLock? {
        let lock: FileLock
        do {
            guard let free = try FileLock.ifFree(path: lockPath) else { return nil }
            lock = free
        } catch {
            throw .stateUnusable(path: lockPath, reason: error.reason)
        }
        // For people looking at a held lock: who holds it, and for what.
        let text = "\(System.processID) \(note)\n"
        try? lock.file.truncate(to: 0)
        Array(text.utf8).withUnsafeBytes { _ = try? lock.file.write($0, at: 0) }
        return VolumeLock(lock)
    }
}

extension StateDirectory {
    var runsPath: String { path + "/runs" }

    /// Marks this process as one that uploads from this state directory, until the mark
    /// ends (``RunMark/end()``, or the mark is dropped); the mark is on disk before this
    /// returns, so that a power cut leaves it. Returns it with the number of marks found of
    /// processes that are gone (killed, crashed, or the power went out), which it removes.
    public func markRun() throws(IngestError) -> RunMark {
        let directory = runsPath
        do { try makeDirectories(directory) } catch {
            throw .stateUnusable(path: directory, reason: "cannot create it: \(error.reason)")
        }
        let boot = Self.bootID
        var unclean = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            guard let dash = name.lastIndex(of: "-"), let pid = Int32(name[name.index(after: dash)...]) else { continue }
            let alive = name[..<dash] == boot && System.processExists(pid)
            if !alive, (try? System.unlink("\(directory)/\(name)")) != nil { unclean += 1 }
        }
        let mark = "\(directory)/\(boot)-\(System.processID)"
        do {
            _ = try FileDescriptor(path: mark, flags: [.writeOnly, .create, .truncate], mode: 0o640)
            try FileDescriptor(path: directory, flags: [.readOnly, .directory]).sync(path: directory)
        } catch {
            throw .stateUnusable(path: mark, reason: error.reason)
        }
        return RunMark(path: mark, uncleanStops: unclean)
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`): a mark of another boot is an
    /// unclean stop whatever its pid, which may be another process's now.
    static let bootID: String = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return "boot" }
        return text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "-", with: "")
    }()
}

/// A process's mark in `runs/` (``StateDirectory/markRun()``).
///
/// Only a process that vanished (killed, crashed, the power gone) leaves its mark: one that
/// ends by itself removes it when its service goes, or at `exit`, and one a signal stops
/// (SIGINT, SIGTERM: clean stops) removes it before it dies by the signal
/// (``ShutdownSignals/dieBy(_:)`` calls ``endAll()``).
public final class RunMark: Sendable {
    let path: String
    /// Processes found gone without removing their marks.
    public let uncleanStops: Int

    /// The marks of this process not ended yet.
    private static let live = Mutex<Set<String>>([])
    /// Whether ``endAll()`` is registered to run at `exit`, once per process.
    private static let endsAtExit = Atomic<Bool>(false)

    init(path: String, uncleanStops: Int) {
        self.path = path
        self.uncleanStops = uncleanStops
        Self.live.withLock { _ = $0.insert(path) }
        if !Self.endsAtExit.exchange(true, ordering: .acquiringAndReleasing) { System.atExit { RunMark.endAll() } }
    }

    /// The process ends cleanly: its mark goes. (Not made durable: a power cut that brings
    /// it back only makes the next process say it recovered from an unclean stop.)
    public func end() {
        Self.live.withLock { _ = $0.remove(path) }
        try? System.unlink(path)
    }

    /// Ends every mark of this process: it is about to end cleanly, by `exit` or by the
    /// signal that asked it to stop, with its services still held.
    public static func endAll() {
        for path in live.withLock({ marks in defer { marks.removeAll() }; return marks }) { try? System.unlink(path) }
    }

    deinit { end() }
}

/// A held lock (of a volume, a device or an upload); released when released or dropped, or
/// when the process dies.
public final class VolumeLock: Sendable {
    private enum Held: Sendable {
        case file(FileLock)
        case byte(ByteLock)
    }

    private let held: Held

    fileprivate init(_ lock: FileLock) { held = .file(lock) }
    fileprivate init(_ lock: ByteLock) { held = .byte(lock) }

    public func release() {
        switch held {
        case .file(let lock): lock.unlock()
        case .byte(let lock): lock.unlock()
        }
    }

    deinit { release() }
}
