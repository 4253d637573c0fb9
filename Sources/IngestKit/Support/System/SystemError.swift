import Glibc

/// A system call that failed: which call, the `errno` it left, and the path it concerned.
///
/// The one place where `errno` becomes a Swift error; every other file calls through
/// ``retryingEINTR(_:path:_:)`` or ``SystemError/last(_:path:)``.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    public let path: String?

    public init(call: String, errno: Int32, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }

    /// The error for the call that just failed, read from `errno`.
    public static func last(_ call: String, path: String? = nil) -> SystemError {
        SystemError(call: call, errno: Glibc.errno, path: path)
    }

    /// The C library's text for the error number, e.g. "No space left on device".
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String {
        if let path { return "\(call) \(path): \(reason)" }
        return "\(call): \(reason)"
    }

    /// The file system is out of space or quota.
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}

/// Runs a system call, retrying it while it fails with `EINTR`; any other failure throws.
@discardableResult
func retryingEINTR<T: BinaryInteger>(
    _ call: String, path: String? = nil, _ body: () -> T
) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        if errno != EINTR { throw SystemError.last(call, path: path) }
    }
}
