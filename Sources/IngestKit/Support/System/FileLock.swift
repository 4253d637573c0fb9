import Glibc
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
    static func waiting(path: String, mode: mode_t = 0o640) throws(SystemError) -> FileLock {
        let file = try FileDescriptor(path: path, flags: O_RDWR | O_CREAT, mode: mode)
        try retryingEINTR("flock", path: path) { flock(file.raw, LOCK_EX) }
        return FileLock(file: file, path: path)
    }

    /// Opens (creating, with `mode`) the file at `path` and takes its exclusive lock if no
    /// one holds it; nil if someone does.
    static func ifFree(path: String, mode: mode_t = 0o640) throws(SystemError) -> FileLock? {
        let file = try FileDescriptor(path: path, flags: O_RDWR | O_CREAT, mode: mode)
        while flock(file.raw, LOCK_EX | LOCK_NB) != 0 {
            switch errno {
            case EINTR: continue
            case EWOULDBLOCK: return nil
            default: throw .last("flock", path: path)
            }
        }
        return FileLock(file: file, path: path)
    }

    /// Whether `path` still names the locked file (same device and inode from `fstat` and
    /// `stat`). A lock file that its holder removes on release (while still holding it) can
    /// be locked by a waiter after its removal: that waiter then holds a lock of a file no
    /// one else will ever open, and must start again with the path's new file.
    var isStillAtPath: Bool {
        var atPath = stat()
        guard let open = try? file.stat(), stat(path, &atPath) == 0 else { return false }
        return open.st_dev == atPath.st_dev && open.st_ino == atPath.st_ino
    }

    /// Releases the lock; the second and later calls do nothing. With `removingFile`, first
    /// removes the file, while still holding its lock, if `path` still names it.
    func unlock(removingFile: Bool = false) {
        guard held.withLock({ was in defer { was = false }; return was }) else { return }
        if removingFile, isStillAtPath { unlink(path) }
        flock(file.raw, LOCK_UN)
    }

    deinit { unlock() }
}
