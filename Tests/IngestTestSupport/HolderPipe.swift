import Foundation
import Glibc

/// A named pipe that the processes a test has started hold open for writing (`exec 9>PATH`
/// in their shell, inherited by whatever it starts): its reading end tells when the last of
/// them has closed it, which a process does when it exits. How a test waits for processes
/// that are not its children (killed by the code under test, reaped by someone else) to end,
/// without sleeping.
public final class HolderPipe: @unchecked Sendable {
    public let path: String
    private let fd: Int32

    /// A new pipe in `directory`, open for reading (so that a writer's open does not block).
    public init(in directory: TemporaryDirectory, name: String = "holders") throws {
        path = directory.path + "/" + name
        guard mkfifo(path, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// The shell command that makes a shell, and everything it starts, a holder.
    public var holdCommand: String { "exec 9>" + shellQuoted(path) }

    /// True once some process opened the pipe for writing and every one that did has closed
    /// it (has exited); false if that has not happened within `timeout`.
    public func holdersGone(within timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let left = deadline - .now
            if left <= .zero { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, Int32(min(left.components.seconds * 1000 + 1, 60_000)))
            // Whatever a holder wrote is not the point: read it, so that only the hang-up stays.
            while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
            if entry.revents & Int16(POLLHUP) != 0 { return true }
        }
    }

    deinit { close(fd) }
}
