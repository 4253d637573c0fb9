import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// The one runner of other programs (a profile's `credential_process`, the hooks), with real shells.
@Suite struct ShellCommandTests {
    func run(
        _ command: String, environment: [String: String] = [:], timeout: Duration = .seconds(10), outputLimit: Int = 1 << 20
    ) throws(ShellCommand.Failure) -> ShellCommand.Result {
        try ShellCommand(command: command, environment: environment).run(timeout: timeout, outputLimit: outputLimit)
    }

    @Test func theExitStatusAndBothOutputsComeBack() throws {
        let result = try run("printf 'out'; printf 'err' >&2; exit 3")
        #expect(result.termination == .exited(3))
        #expect(String(decoding: result.stdout, as: UTF8.self) == "out")
        #expect(String(decoding: result.stderr, as: UTF8.self) == "err")
    }

    @Test func aCommandKilledBySignalSaysWhichSignal() throws {
        let result = try run("kill -9 $$")
        #expect(result.termination == .signalled(SIGKILL))
        #expect(result.termination.description == "was killed by signal 9")
    }

    @Test func theCommandSeesOnlyTheEnvironmentGivenAndReadsNothing() throws {
        let result = try run(#"printf '%s-%s-' "$ONLY" "${HOME:-unset}"; cat; printf end"#, environment: ["ONLY": "x"])
        #expect(result.termination == .exited(0))
        #expect(String(decoding: result.stdout, as: UTF8.self) == "x-unset-end", "standard input is /dev/null")
    }

    @Test func theInputIsTheCommandsStandardInput() throws {
        let result = try ShellCommand(command: "wc -c; cat", environment: [:], input: Array("{\"a\":1}\n".utf8))
            .run(timeout: .seconds(10), outputLimit: 1000)
        #expect(result.termination == .exited(0))
        #expect(String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespaces) == "8\n")
    }

    @Test func aCommandThatLeavesItsInputUnreadIsNoErrorAndCannotKillIngest() throws {
        // 1 MiB: far more than a pipe holds, so the writer meets a reader gone (EPIPE, SIGPIPE).
        for command in ["exit 3", "head -c 10 > /dev/null; exit 3"] {
            let result = try ShellCommand(command: command, environment: [:], input: [UInt8](repeating: 0x61, count: 1 << 20))
                .run(timeout: .seconds(10), outputLimit: 1000)
            #expect(result.termination == .exited(3), "\(command)")
        }
    }

    @Test func outputThatJoinsTheErrorsKeepsItsEndAndNeverOverflows() throws {
        let result = try ShellCommand(
            command: "head -c 300000 /dev/zero | tr '\\0' a; printf out; printf err >&2", environment: [:],
            outputJoinsErrors: true
        ).run(timeout: .seconds(10), outputLimit: 0)
        #expect(result.termination == .exited(0))
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.count == ShellCommand.stderrKept)
        #expect(String(decoding: result.stderr.suffix(6), as: UTF8.self) == "outerr")
    }

    @Test func standardErrorKeepsOnlyItsLast64KiB() throws {
        let result = try run(#"{ head -c 300000 /dev/zero | tr '\0' a; printf END; } >&2"#)
        #expect(result.termination == .exited(0))
        #expect(result.stderr.count == ShellCommand.stderrKept)
        #expect(String(decoding: result.stderr.suffix(4), as: UTF8.self) == "aEND")
    }

    @Test func standardOutputPastItsLimitFailsTheRun() {
        #expect(throws: ShellCommand.Failure.outputTooLarge) {
            try run("head -c 5000 /dev/zero; sleep 30", outputLimit: 1000)
        }
    }

    @Test func aCommandThatCannotStartSaysWhy() {
        #expect(throws: ShellCommand.Failure.notStarted(SystemError(call: "posix_spawn", errno: .argumentListTooLong, path: "/bin/sh"))) {
            // One argument longer than Linux takes (128 KiB): exec refuses it.
            try run(String(repeating: "x", count: 200_000))
        }
    }

    @Test func theTimeLimitKillsTheWholeProcessGroup() throws {
        let dir = TemporaryDirectory()
        let pids = dir.path + "/pids"
        let holders = try HolderPipe(in: dir)
        let started = ContinuousClock.now
        #expect(throws: ShellCommand.Failure.timedOut) {
            try run("\(holders.holdCommand); sleep 30 & echo $$ $! > \(pids); sleep 30", timeout: .milliseconds(500))
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        let written = try String(contentsOfFile: pids, encoding: .utf8)
        let both = written.split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
        #expect(both.count == 2)
        // The shell is reaped by the runner; its background child, now another's, goes when killed.
        #expect(holders.holdersGone(), "the shell and the sleeps it started are all killed")
    }

    @Test func aShellThatExitsWhileItsChildHoldsTheOutputReturnsSoonAfter() throws {
        let started = ContinuousClock.now
        let result = try run("sleep 30 & echo $!")
        #expect(ContinuousClock.now - started < .seconds(5), "no wait for the child past the lingering time")
        let child = try #require(pid_t(String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(result.termination == .exited(0))
        kill(child, SIGKILL)
    }
}
