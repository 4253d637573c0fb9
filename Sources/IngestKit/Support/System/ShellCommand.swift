import CSystemShims
import Glibc

/// How a child process ended.
public enum ProcessTermination: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    /// From the status `waitpid` gives.
    init(waitStatus status: Int32) {
        self = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
    }

    public var description: String {
        switch self {
        case let .exited(status): "exited with status \(status)"
        case let .signalled(signal): "was killed by signal \(signal)"
        }
    }
}

/// A command run through `/bin/sh -c` (so quoting works as in a shell), the one place
/// `ingest` starts another program: a profile's `credential_process`, the `[hooks]`.
///
/// The command runs in a process group of its own, with ``input`` on its standard input
/// (`/dev/null` when there is none), the signal mask and the dispositions a run changes
/// (SIGPIPE, SIGTERM, SIGINT) reset, and exactly the environment given. Its output is
/// collected; a time limit kills the whole group, so a helper's own children cannot keep
/// it alive past the limit. What it writes is bounded too: standard output by a limit past
/// which the run fails (or, with ``outputJoinsErrors``, sent where standard error goes),
/// standard error by keeping only its last ``stderrKept`` bytes, so a command that writes
/// forever costs a fixed amount of memory.
///
/// `run` blocks its thread until the command ends: call it off the concurrency pool.
struct ShellCommand: Sendable {
    struct Result: Sendable {
        var termination: ProcessTermination
        var stdout: [UInt8]
        /// The end of standard error: at most ``ShellCommand/stderrKept`` bytes.
        var stderr: [UInt8]
    }

    enum Failure: Error, Equatable {
        /// The pipes or the process could not be made.
        case notStarted(SystemError)
        /// The time limit passed; the group was killed.
        case timedOut
        /// Standard output passed its limit; the group was killed.
        case outputTooLarge
    }

    let command: String
    /// The command's whole environment (nothing is inherited); names holding `=` are left out.
    let environment: [String: String]
    /// Written to the command's standard input, which is then closed; a command that exits
    /// without reading it all is no error. Empty: standard input is `/dev/null`.
    var input: [UInt8] = []
    /// Standard output goes where standard error goes (its end kept, never a failure)
    /// instead of being collected: for a command whose output is only worth logging.
    var outputJoinsErrors = false

    init(command: String, environment: [String: String], input: [UInt8] = [], outputJoinsErrors: Bool = false) {
        self.command = command
        self.environment = environment
        self.input = input
        self.outputJoinsErrors = outputJoinsErrors
    }

    /// How long to keep reading after the shell exited while something it started still
    /// holds the output pipes open.
    static let lingering: Duration = .milliseconds(500)

    /// The most of a command's error output held while it runs (its end).
    static let stderrKept = 64 * 1024

    /// Runs the command to its end, or until `timeout` passes or its standard output grows
    /// past `outputLimit` bytes (either kills its process group and throws).
    func run(timeout: Duration, outputLimit: Int) throws(Failure) -> Result {
        // Close-on-exec from birth: set afterwards, a process another thread spawns in between
        // would inherit the write ends and hold the pipes open long after the command ended.
        var pipes: [[Int32]] = []
        func closeAll() { for fd in pipes.joined() { close(fd) } }
        for _ in 0..<(input.isEmpty ? 2 : 3) {
            var ends: [Int32] = [-1, -1]
            guard ingest_pipe_cloexec(&ends) == 0 else {
                let error = SystemError.last("pipe")
                closeAll()
                throw .notStarted(error)
            }
            pipes.append(ends)
        }
        let (output, errors, feed) = (pipes[0], pipes[1], input.isEmpty ? nil : pipes[2])
        for fd in [output[0], errors[0], feed?[1]].compactMap(\.self) { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let feed {
            posix_spawn_file_actions_adddup2(&actions, feed[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, outputJoinsErrors ? errors[1] : output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        // The runtime ignores SIGPIPE, and a run that stops cleanly ignores SIGTERM and
        // SIGINT (``ShutdownSignals``); the command must not inherit that.
        for signal in [SIGPIPE, SIGTERM, SIGINT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let arguments = ["/bin/sh", "-c", command].map { (text: String) in strdup(text) }
        let variables = environment.filter { !$0.key.contains("=") }.map { strdup("\($0.key)=\($0.value)") }
        defer { for pointer in arguments + variables { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, arguments + [nil], variables + [nil])
        for fd in [output[1], errors[1], feed?[0]].compactMap(\.self) { close(fd) }
        guard spawned == 0 else {
            for fd in [output[0], errors[0], feed?[1]].compactMap(\.self) { close(fd) }
            throw .notStarted(SystemError(call: "posix_spawn", errno: Errno(rawValue: spawned), path: "/bin/sh"))
        }
        if outputJoinsErrors { close(output[0]) }
        return try collect(
            pid: pid, stdout: outputJoinsErrors ? nil : output[0], stderr: errors[0], feed: feed?[1], timeout: timeout,
            outputLimit: outputLimit)
    }

    /// Feeds ``input`` to the command, reads its pipes until they close (or ``lingering``
    /// after the shell exited), and reaps the shell; on the deadline or too much output,
    /// kills the group first.
    private func collect(
        pid: pid_t, stdout: Int32?, stderr: Int32, feed: Int32?, timeout: Duration, outputLimit: Int
    ) throws(Failure) -> Result {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var open = Dictionary(uniqueKeysWithValues: [stdout, stderr].compactMap(\.self).map { ($0, [UInt8]()) })
        var collected: [Int32: [UInt8]] = [:]
        var status: Int32?
        var exitedAt: ContinuousClock.Instant?
        var feeding = feed
        var unfed = input[...]

        func stopFeeding() {
            if let fd = feeding { close(fd) }
            feeding = nil
        }

        func stop() {
            kill(-pid, SIGKILL)  // the group: the shell and whatever it started
            if status == nil {
                var ignored: Int32 = 0
                _ = retryingOnInterrupt { waitpid(pid, &ignored, 0) }
            }
            for fd in open.keys { close(fd) }
            stopFeeding()
        }

        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var polled = open.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if let feeding { polled.append(pollfd(fd: feeding, events: Int16(POLLOUT), revents: 0)) }
            _ = poll(&polled, nfds_t(polled.count), 20)
            for entry in polled where entry.revents != 0 && entry.fd == feeding {
                // The command's end closed (POLLERR), or room to write: whatever is left goes
                // now, and a reader gone early ends the feeding, no error.
                if Self.feed(entry.fd, &unfed) { stopFeeding() }
            }
            for entry in polled where entry.revents != 0 && entry.fd != feed {
                reading: while true {
                    let result = retryingOnInterrupt { buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) } }
                    if case .success(let count) = result, count > 0 {
                        open[entry.fd, default: []].append(contentsOf: buffer[..<count])
                        if entry.fd == stdout, (open[entry.fd]?.count ?? 0) > outputLimit {
                            stop()
                            throw .outputTooLarge
                        }
                        if entry.fd == stderr, let excess = open[entry.fd].map({ $0.count - Self.stderrKept }), excess > 0 {
                            open[entry.fd]?.removeFirst(excess)
                        }
                    } else if case .failure(.wouldBlock) = result {
                        break reading
                    } else {  // end of file, or an error that ends the stream all the same
                        collected[entry.fd] = open.removeValue(forKey: entry.fd)
                        close(entry.fd)
                        break reading
                    }
                }
            }
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    status = raw
                    exitedAt = clock.now
                }
            }
            if let status {
                if open.isEmpty || exitedAt.map({ clock.now - $0 > Self.lingering }) == true {
                    for (fd, bytes) in open {
                        collected[fd] = bytes
                        close(fd)
                    }
                    stopFeeding()
                    return Result(
                        termination: ProcessTermination(waitStatus: status),
                        stdout: stdout.flatMap { collected[$0] } ?? [], stderr: collected[stderr] ?? [])
                }
            }
            if clock.now >= deadline {
                stop()
                throw .timedOut
            }
        }
    }

    /// Writes what it can of `bytes` to the non-blocking pipe `fd` and drops it from
    /// `bytes`. True when the feeding is over: all written, or the reader gone (`EPIPE`) or
    /// another error. SIGPIPE is blocked on this thread for the write and one it raised is
    /// taken back, so a command that exits without reading cannot kill ingest.
    private static func feed(_ fd: Int32, _ bytes: inout ArraySlice<UInt8>) -> Bool {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        while !bytes.isEmpty {
            let result = retryingOnInterrupt { bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
            if case .success(let written) = result, written > 0 {
                bytes.removeFirst(written)
            } else if case .failure(.wouldBlock) = result {
                return false
            } else {
                if case .failure(.brokenPipe) = result {
                    var none = timespec()
                    _ = sigtimedwait(&pipeSignal, nil, &none)
                }
                return true
            }
        }
        return true
    }
}
