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
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    private let outputs = TemporaryDirectory()

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        _ = FileManager.default.createFile(atPath: outputs.path + "/out", contents: nil)
        _ = FileManager.default.createFile(atPath: outputs.path + "/err", contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: outputs.path + "/out")
        process.standardError = FileHandle(forWritingAtPath: outputs.path + "/err")
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

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
        while process.isRunning {
            if Date() > deadline {
                kill(pid, SIGKILL)
                process.waitUntilExit()
                throw CommandFailed(command: "\(process.executableURL!.path) (timed out after \(timeout) s)", result: collect())
            }
            usleep(10_000)
        }
        return collect()
    }

    private func collect() -> ProcessResult {
        ProcessResult(
            status: process.terminationStatus,
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
