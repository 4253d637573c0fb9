import CSystemShims
import Foundation
import Glibc

/// What a finished process left: its exit status and its output.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: Data
    public var stderr: String
    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }

    public init(status: Int32, stdout: Data, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

public struct CommandFailed: Error, CustomStringConvertible {
    public let command: String
    public let result: ProcessResult
    public init(command: String, result: ProcessResult) {
        self.command = command
        self.result = result
    }
    public var description: String { "\(command) exited \(result.status): \(result.stderr)" }
}

/// A started child process; output goes to temporary files, so neither pipe can fill up.
///
/// Spawned with posix_spawn(3) directly, not Foundation's `Process`: on Linux, Swift 6.3's
/// `Process.run()` reads past a buffer while it lists `/proc/self/fd` and crashes the test
/// process now and then (swift-corelibs-foundation PR 5472), which a suite that starts
/// thousands of processes meets.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let executable: String
    private let outputs = TemporaryDirectory()
    private var exitStatus: Int32?

    /// - Parameter terminal: a terminal's descriptor (``PseudoTerminal``) to be the child's
    ///   standard input, output and error, instead of `/dev/null` and two files.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, terminal: Int32? = nil) throws {
        self.executable = executable
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let terminal {
            for fd: Int32 in 0...2 { posix_spawn_file_actions_adddup2(&actions, terminal, fd) }
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, outputs.path + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, outputs.path + "/err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        // Nothing else of the test process leaks into the child (as Foundation's Process does).
        ingest_spawn_close_from(&actions, 3)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let env = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for pointer in argv { free(pointer) }
            for pointer in env ?? [] { free(pointer) }
        }
        var child: pid_t = 0
        let status =
            if var env { posix_spawn(&child, executable, &actions, nil, argv, &env) } else {
                posix_spawn(&child, executable, &actions, nil, argv, environ)
            }
        guard status == 0 else {
            throw CommandFailed(
                command: executable,
                result: ProcessResult(status: -1, stdout: Data(), stderr: "posix_spawn: \(String(cString: strerror(status)))"))
        }
        pid = child
    }

    /// Whether the process has not exited yet (it is reaped as soon as it has).
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// The exit status (or 128 + the signal that ended it), once it has exited.
    public var terminationStatus: Int32 { reap(blocking: false) ?? -1 }

    private func reap(blocking: Bool) -> Int32? {
        if let exitStatus { return exitStatus }
        var raw: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &raw, blocking ? 0 : WNOHANG) } while result == -1 && errno == EINTR
        guard result == pid else { return nil }
        let signal = raw & 0x7f
        exitStatus = signal == 0 ? (raw >> 8) & 0xff : signal
        return exitStatus
    }

    /// What the process has written to its standard output so far (it may still be running).
    public var standardOutputSoFar: String {
        String(decoding: FileManager.default.contents(atPath: outputs.path + "/out") ?? Data(), as: UTF8.self)
    }

    /// What the process has written to its standard error so far (it may still be running).
    public var standardErrorSoFar: String {
        String(decoding: FileManager.default.contents(atPath: outputs.path + "/err") ?? Data(), as: UTF8.self)
    }

    /// Waits for the exit, at most `timeout` seconds (then kills it and says so).
    public func wait(timeout: TimeInterval = 600) throws -> ProcessResult {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = reap(blocking: true)
                throw CommandFailed(command: "\(executable) (timed out after \(timeout) s)", result: collect())
            }
            usleep(10_000)
        }
        return collect()
    }

    /// Asks the process to stop (SIGTERM) and gives it `grace` seconds, after which
    /// ``wait(timeout:)`` kills it; nothing if it has already exited.
    public func terminate(grace: TimeInterval = 5) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        _ = try? wait(timeout: grace)
    }

    private func collect() -> ProcessResult {
        ProcessResult(
            status: terminationStatus,
            stdout: FileManager.default.contents(atPath: outputs.path + "/out") ?? Data(),
            stderr: String(decoding: FileManager.default.contents(atPath: outputs.path + "/err") ?? Data(), as: UTF8.self))
    }

    /// Bytes this process has read so far, from `/proc/PID/io` (`rchar`).
    public var bytesRead: Int64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("rchar:") {
            return Int64(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}

/// Runs a program to its end and returns what it did, whatever its exit status.
public func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval = 600) throws -> ProcessResult {
    try ChildProcess(executable, arguments, environment: environment).wait(timeout: timeout)
}

/// Runs a bash script (`set -euo pipefail`) and returns its standard output; throws on failure.
@discardableResult
public func sh(_ script: String, timeout: TimeInterval = 600) throws -> String {
    let result = try run("/bin/bash", ["-c", "set -euo pipefail\n" + script], timeout: timeout)
    guard result.status == 0 else { throw CommandFailed(command: script, result: result) }
    return result.stdoutText
}

/// Quotes a string for a shell command line.
public func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Whether `pid` is gone: no such process, or a zombie waiting for its new parent to reap it.
public func processIsGone(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")")
    else { return true }
    return stat[stat.index(close, offsetBy: 2)] == "Z"
}

/// Waits up to `timeout` for every one of `pids` to be gone (killed by the code under test,
/// not by the test); true when they all are.
public func processesGone(_ pids: [pid_t], within timeout: Duration = .seconds(5)) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !pids.allSatisfy(processIsGone), ContinuousClock.now < deadline { usleep(20_000) }
    return pids.allSatisfy(processIsGone)
}
