import Foundation
import Glibc

/// The directory that holds everything `ingest` keeps between runs:
///
/// ```
/// journal.sqlite   (+ -wal, -shm)   the journal
/// staging/                          staged copies, named by fingerprint
/// locks/                            one lock file per volume and device, one per upload while it runs
/// ```
public struct StateDirectory: Sendable {
    public let path: String

    public var journalPath: String { Self.journalPath(in: path) }
    public static func journalPath(in directory: String) -> String { directory + "/journal.sqlite" }
    public var stagingPath: String { Self.stagingPath(in: path) }
    public static func stagingPath(in directory: String) -> String { directory + "/staging" }
    var locksPath: String { path + "/locks" }

    /// `/var/lib/ingest` for root, otherwise `$XDG_STATE_HOME/ingest` (`~/.local/state/ingest`).
    public static func defaultPath(environment: [String: String], isRoot: Bool = geteuid() == 0) -> String {
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
    /// The lock file lives only while the lock is held: releasing it removes the file, so a
    /// card of 20,000 files leaves no 20,000 lock files behind.
    public func lockUpload(_ id: String) throws(IngestError) -> VolumeLock? {
        try lock(at: "\(locksPath)/upload-\(id).lock", note: "upload \(id)", removeOnRelease: true)
    }

    /// How many times a lock is tried again when its file was removed (by the holder it was
    /// waiting for) between opening and locking it; each retry means another process made
    /// progress, so running out means something other than `ingest` keeps removing it.
    static let lockAttempts = 100

    /// Opens (creating) and locks the file at `lockPath`. Lock files that are removed on
    /// release follow the usual protocol: the holder removes the file while it still holds
    /// the lock, and a locker, once `flock` succeeds, checks that the file it locked is still
    /// the one at the path (same device and inode from `fstat` and `stat`); if not, it locked
    /// a file already removed, and it starts again with the new one. Two processes can then
    /// never both hold one path's lock.
    private func lock(at lockPath: String, note: String, removeOnRelease: Bool = false) throws(IngestError) -> VolumeLock? {
        for _ in 0..<Self.lockAttempts {
            let lock: FileLock
            do {
                guard let free = try FileLock.ifFree(path: lockPath) else { return nil }
                lock = free
            } catch {
                throw .stateUnusable(path: lockPath, reason: error.reason)
            }
            guard lock.isStillAtPath else { continue }  // dropping `lock` unlocks and closes it
            // For people looking at a held lock: who holds it, and for what.
            let text = "\(getpid()) \(note)\n"
            _ = ftruncate(lock.file.raw, 0)
            _ = text.withCString { pwrite(lock.file.raw, $0, strlen($0), 0) }
            return VolumeLock(lock, removingItsFile: removeOnRelease)
        }
        throw .stateUnusable(
            path: lockPath,
            reason: "its lock file was replaced \(Self.lockAttempts) times while it was being locked; "
                + "something other than ingest is removing files in \(locksPath)")
    }
}

/// A held lock (of a volume, a device or an upload); released when released or dropped, or
/// when the process dies. A lock whose file is removed on release removes it while it still
/// holds the lock (see ``StateDirectory`` for why that is safe against a racing locker).
public final class VolumeLock: Sendable {
    private let lock: FileLock
    private let removingItsFile: Bool

    fileprivate init(_ lock: FileLock, removingItsFile: Bool) {
        self.lock = lock
        self.removingItsFile = removingItsFile
    }

    public func release() { lock.unlock(removingFile: removingItsFile) }

    deinit { release() }
}
