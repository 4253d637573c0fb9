import Foundation
import Glibc

/// A service manager's notification socket, as systemd binds it for a `Type=notify` unit: an
/// AF_UNIX datagram socket, at a path or in the abstract namespace, whose name goes in
/// `NOTIFY_SOCKET`. It receives what a process under test says with `sd_notify`.
public final class NotifySocket: @unchecked Sendable {
    private let fd: Int32
    /// What goes in `NOTIFY_SOCKET`: the path, or `@name` for the abstract namespace.
    public let name: String

    /// Binds at `path`, or with `abstract`, at `@<random name>`.
    public init(path: String? = nil, abstract: Bool = false) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes: [UInt8]
        if abstract {
            name = "@ingest-test-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            bytes = [0] + Array(name.utf8.dropFirst())
        } else {
            name = path ?? NSTemporaryDirectory() + "ingest-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            bytes = Array(name.utf8) + [0]
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let error = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
    }

    deinit {
        close(fd)
        if !name.hasPrefix("@") { unlink(name) }
    }

    /// The next datagram, waiting at most `timeout` seconds; nil if none came.
    public func receive(timeout: TimeInterval) -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count < 0 ? nil : String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Every datagram until none comes for `quiet` seconds, or `deadline` passes.
    public func receiveAll(quiet: TimeInterval, until deadline: Date) -> [String] {
        var messages: [String] = []
        while Date() < deadline, let message = receive(timeout: quiet) { messages.append(message) }
        return messages
    }
}
