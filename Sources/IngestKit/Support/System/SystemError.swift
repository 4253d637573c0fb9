/// A system call that failed: which call, the ``Errno`` it left, and the path it concerned.
///
/// The one place where `errno` becomes a Swift error: the calls of Syscalls.swift and the
/// methods of ``FileDescriptor`` throw it, made by ``retryingOnInterrupt(_:)`` or
/// ``SystemError/last(_:path:)``; no other file reads `errno`.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Errno
    public let path: String?

    public init(call: String, errno: Errno, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }

    /// The error for the call that just failed, read from `errno`.
    public static func last(_ call: String, path: String? = nil) -> SystemError {
        SystemError(call: call, errno: .current, path: path)
    }

    /// The C library's text for the error number, e.g. "No space left on device".
    public var reason: String { errno.description }

    public var description: String {
        if let path { return "\(call) \(path): \(reason)" }
        return "\(call): \(reason)"
    }

    /// The file system is out of space or quota.
    public var isOutOfSpace: Bool { errno == .noSpace || errno == .diskQuotaExceeded }
}
