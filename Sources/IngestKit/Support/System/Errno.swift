import Glibc

/// An error number a system call left in `errno`, typed: what ``SystemError`` carries and what
/// callers compare against (`error.errno == .noSuchFileOrDirectory`), as swift-system's
/// `Errno` does.
///
/// Only the numbers ingest tells apart have names; any other number is still an `Errno`,
/// described by the C library's text for it.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The number the last failed call on this thread left in `errno`. Set it to
    /// ``success`` before a call that reports failure only through `errno` (`readdir`).
    static var current: Errno {
        get { Errno(rawValue: Glibc.errno) }
        set { Glibc.errno = newValue.rawValue }
    }

    /// The C library's text for the number, e.g. "No space left on device".
    public var description: String { String(cString: strerror(rawValue)) }

    /// No error (0): what `errno` is set to before a call that can fail silently.
    public static let success = Errno(rawValue: 0)
    /// `EPERM`: the operation needs a privilege this process lacks.
    public static let notPermitted = Errno(rawValue: EPERM)
    /// `ENOENT`: nothing at the path.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `ESRCH`: no process of that id.
    public static let noSuchProcess = Errno(rawValue: ESRCH)
    /// `EINTR`: a signal interrupted the call; ``retryingOnInterrupt(_:)`` calls it again.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `EIO`: the device failed to read or write (or, for ingest, a file shorter than planned).
    public static let ioError = Errno(rawValue: EIO)
    /// `E2BIG`: the arguments and environment of a new program are too long.
    public static let argumentListTooLong = Errno(rawValue: E2BIG)
    /// `ENOMEM`: out of memory (also what reads of a card pulled out can give).
    public static let noMemory = Errno(rawValue: ENOMEM)
    /// `EACCES`: the permission bits refuse it.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EBUSY`: the device or resource is in use.
    public static let resourceBusy = Errno(rawValue: EBUSY)
    /// `EEXIST`: something already has that name.
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `EXDEV`: a link or rename across file systems.
    public static let improperLink = Errno(rawValue: EXDEV)
    /// `ENODEV`: no such device, or a file system type the kernel does not know.
    public static let noSuchDevice = Errno(rawValue: ENODEV)
    /// `ENOTDIR`: a component of the path is not a directory.
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EINVAL`: an argument the call refuses (for a direct read or write: an unaligned one).
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOSPC`: the file system is full.
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// `EROFS`: the file system is read-only.
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    /// `EPIPE`: the reading end of the pipe is closed.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `EAGAIN`, also `EWOULDBLOCK` on Linux: a non-blocking call would have to wait.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `ENAMETOOLONG`: a path or one of its names is too long.
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `ELOOP`: a symbolic link where `O_NOFOLLOW` refuses one, or too many links in a path.
    public static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
    /// `EDQUOT`: the user's disk quota is used up.
    public static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
}
