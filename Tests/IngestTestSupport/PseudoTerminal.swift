import Foundation
import Glibc

/// A program run on a pseudo-terminal, as a person at a terminal runs it: its standard input,
/// output and error are the terminal (`isatty` says yes), `columns` wide, and everything it
/// writes there is kept as written, carriage returns and escape sequences included.
public final class PseudoTerminal: @unchecked Sendable {
    public let process: ChildProcess
    private let master: Int32
    private let lock = NSLock()
    private var written: [UInt8] = []
    /// Drains the terminal as the program writes (a full terminal buffer would block it), and
    /// ends when the last descriptor of the terminal's other side closes.
    private var reader: Thread?
    private let drained = DispatchSemaphore(value: 0)

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, columns: UInt16 = 200) throws {
        // posix_openpt, unlockpt and ptsname, which Swift's Glibc does not import: the
        // multiplexer, unlocked (TIOCSPTLCK), and the number of its other side (TIOCGPTN).
        // Linux's generic ioctl numbers, those of x86-64 and arm64.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        let name = "/dev/pts/\(number)"
        var size = winsize(ws_row: 50, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        let terminal = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(terminal) }  // the child has its own copies
        process = try ChildProcess(executable, arguments, environment: environment, terminal: terminal)
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(master, &buffer, buffer.count)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { break }  // EIO: the other side is closed
                lock.withLock { written += buffer[..<n] }
            }
            drained.signal()
        }
        reader = thread
        thread.start()
    }

    deinit { close(master) }

    /// What the program wrote so far.
    public var output: String { lock.withLock { String(decoding: written, as: UTF8.self) } }

    /// Waits for the program to exit (at most `timeout` seconds) and for its output to be read.
    public func wait(timeout: TimeInterval = 600) throws -> (status: Int32, output: String) {
        let result = try process.wait(timeout: timeout)
        _ = drained.wait(timeout: .now() + 5)
        return (result.status, output)
    }
}
