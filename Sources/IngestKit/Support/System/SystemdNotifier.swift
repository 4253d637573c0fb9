import Glibc

/// Tells the service manager how the process is doing, as `sd_notify(3)` does: one datagram
/// of `KEY=VALUE` lines to the AF_UNIX socket `$NOTIFY_SOCKET` names. A unit of
/// `Type=notify` hears `READY=1` once the process is up (until then it stays "activating"),
/// and `systemctl status` shows the last `STATUS=` line.
///
/// The protocol is spoken directly rather than through libsystemd: it is one `sendto`, and a
/// station then needs no library beyond what it has. A path names a socket in the file
/// system; a leading `@` names one in the abstract namespace (the `@` becomes a NUL byte).
/// Sending never blocks and never fails the caller: a manager that is not listening only
/// misses a message.
public struct SystemdNotifier: Sendable {
    /// `sun_path`'s bytes and how many of them the address uses.
    private let path: [UInt8]

    /// The socket `$NOTIFY_SOCKET` names; nil when it is unset (not started by a service
    /// manager, or by one that listens to nothing), empty, too long for an AF_UNIX address,
    /// or of a kind this does not speak (`vsock:`).
    public init?(environment: [String: String]) {
        guard let name = environment["NOTIFY_SOCKET"], let first = name.utf8.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@")
        else { return nil }
        var bytes = Array(name.utf8)
        if first == UInt8(ascii: "@") {
            bytes[0] = 0  // abstract: a leading NUL, no trailing one
        } else {
            bytes.append(0)  // a path ends with its NUL
        }
        guard bytes.count > 1, bytes.count <= MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
        path = bytes
    }

    /// The service is up: a `Type=notify` unit leaves "activating".
    public func ready() { send("READY=1") }

    /// What `systemctl status` shows under the unit, one line.
    public func status(_ text: String) {
        send("STATUS=" + String(text.map { $0.isNewline ? " " : $0 }))
    }

    /// Sends `message` (newline-separated assignments) in one datagram; false if it could
    /// not be handed to the socket.
    @discardableResult
    public func send(_ message: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count)
        var message = message
        return message.withUTF8 { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), socketAddress, length)
                        == bytes.count
                }
            }
        }
    }
}
