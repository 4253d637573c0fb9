import Synchronization

/// An exclusive `flock(2)` lock on a file, held until ``unlock()``, until it is dropped, or
/// until the process dies (the kernel releases it then, so a killed holder never leaves a
/// lock behind).
///
/// `flock` locks belong to the open file, not the process: two `FileLock`s of one path
/// exclude each other even within one process.
final class FileLock: Sendable {
    /// The locked file, open for reading and writing (a holder may write a note in it).
    let file: FileDescriptor
    let path: String
    private let held = Mutex(true)

    private init(file: FileDescriptor, path: String) {
        self.file = file
        self.path = path
    }

    /// Opens (creating, with `mode`) the file at `path` and waits as long as it takes for
    /// its exclusive lock.
    static func waiting(path: String, mode: UInt32 = 0o640) throws(SystemError) -> FileLock {
        let file = try FileDescriptor(path: path, flags: [.readWrite, .create], mode: mode)
        _ = try file.lockExclusively(waiting: true, path: path)
        return FileLock(file: file, path: path)
    }

    /// Opens (creating, with `mode`) the file at `path` and takes its exclusive lock if no
    /// one holds it; nil if someone does.
    static func ifFree(path: String, mode: UInt32 = 0o640) throws(SystemError) -> FileLock? {
        let file = try FileDescriptor(path: path, flags: [.readWrite, .create], mode: mode)
        guard try file.lockExclusively(waiting: false, path: path) else { return nil }
        return FileLock(file: file, path: path)
    }

    /// Releases the lock; the second and later calls do nothing.
    func unlock() {
        guard held.withLock({ was in defer { was = false }; return was }) else { return }
        file.unlock()
    }

    deinit { unlock() }
}

/// An exclusive lock of one byte of a shared lock file, an open-file-description lock
/// (`F_OFD_SETLK`): held until ``unlock()``, until it is dropped, or until the process dies.
///
/// Many locks share one file, each at its own byte (its `slot`), so taking one creates and
/// removes no file: a card of 100,000 files takes 100,000 upload locks, and a lock file per
/// upload cost an inode's allocation and release on the state disk each time. The file is
/// opened once per process (``SharedLockFile``), so a lock costs one `fcntl` and its release
/// another, not an `open` and a `close` as well. Two `ByteLock`s of one slot exclude each
/// other within one process as across processes.
final class ByteLock: Sendable {
    private let file: SharedLockFile
    private let slot: Int64
    private let held = Mutex(true)

    private init(file: SharedLockFile, slot: Int64) {
        self.file = file
        self.slot = slot
    }

    /// Opens (creating, with `mode`) the file at `path`, once per process, and locks its
    /// byte at `slot` (0 or more; the file need not be that long) if no one holds it; nil if
    /// someone does, in this process or another.
    static func ifFree(path: String, slot: Int64, mode: UInt32 = 0o640) throws(SystemError) -> ByteLock? {
        precondition(slot >= 0, "a lock slot is a byte offset, got \(slot)")
        let file = try SharedLockFile.opened(path: path, mode: mode)
        return try file.lock(slot) ? ByteLock(file: file, slot: slot) : nil
    }

    /// Releases the lock; the second and later calls do nothing.
    func unlock() {
        guard held.withLock({ was in defer { was = false }; return was }) else { return }
        file.unlock(slot)
    }

    deinit { unlock() }
}

/// A lock file's one descriptor in this process, kept open for the process's life, and the
/// bytes this process holds of it. OFD locks taken through one open file description never
/// conflict with each other, so a byte this process holds is refused by the set first, as
/// the kernel refuses it to other processes. (A lock file deleted while the process runs
/// is not noticed: the state directory is ingest's own.)
private final class SharedLockFile: Sendable {
    private static let files = Mutex<[String: SharedLockFile]>([:])

    private let descriptor: FileDescriptor
    private let path: String
    private let held = Mutex<Set<Int64>>([])

    private init(descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    static func opened(path: String, mode: UInt32) throws(SystemError) -> SharedLockFile {
        try files.withLock { files throws(SystemError) -> SharedLockFile in
            if let open = files[path] { return open }
            let file = SharedLockFile(descriptor: try FileDescriptor(path: path, flags: [.readWrite, .create], mode: mode), path: path)
            files[path] = file
            return file
        }
    }

    /// Locks the byte at `slot`; false when this process or another holds it.
    func lock(_ slot: Int64) throws(SystemError) -> Bool {
        guard held.withLock({ $0.insert(slot).inserted }) else { return false }
        let locked: Bool
        do { locked = try descriptor.lockByte(at: slot, path: path) } catch {
            held.withLock { _ = $0.remove(slot) }
            throw error
        }
        if !locked { held.withLock { _ = $0.remove(slot) } }
        return locked
    }

    /// Releases the byte at `slot`, in the kernel first: while it is still in the set, no
    /// lock of this process can take it and then lose it to this release.
    func unlock(_ slot: Int64) {
        descriptor.unlockByte(at: slot)
        held.withLock { _ = $0.remove(slot) }
    }
}
