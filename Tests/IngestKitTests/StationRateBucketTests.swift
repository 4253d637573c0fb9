import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// A clock the test moves by hand, read by every bucket of a test as the processes of a
/// station read `CLOCK_MONOTONIC`: no test sleeps.
private final class HandClock: @unchecked Sendable {
    var nanoseconds: Int64 = 1_000_000_000
    func advance(_ duration: Duration) { nanoseconds += duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000 }
}

/// A transfer, as the limiter sees it.
private final class Sender {}

@Suite struct StationRateBucketTests {
    let directory = TemporaryDirectory()
    private let clock = HandClock()

    private func bucket(_ rate: Int64) throws -> StationRateBucket {
        try StationRateBucket(path: directory.path + "/upload-rate", rate: ByteRate(bytesPerSecond: rate), clock: { [clock] in clock.nanoseconds })
    }

    /// Two processes' limiters, each asking for 1 MiB/s, send 1 MiB/s together: over ten
    /// seconds the rate's 10 MiB and one full bucket, not twice that.
    @Test func twoLimitersOnOneFileSendTheRateTogether() throws {
        let rate: Int64 = 1 << 20
        let limiters = [try bucket(rate), try bucket(rate)].map {
            SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: rate), bucket: $0)
        }
        let senders = [Sender(), Sender()]
        var sent = [0, 0]
        var waiting = [false, false]
        let start = ContinuousClock.now
        var now = start
        while now < start + .seconds(10) {
            for index in 0..<2 {
                if !waiting[index] {
                    let bytes = limiters[index].claim(1 << 20, for: senders[index], at: now)
                    sent[index] += bytes
                    waiting[index] = bytes == 0
                }
                for (_, bytes) in limiters[index].serve(at: now) {
                    sent[index] += bytes
                    waiting[index] = false
                }
            }
            let step = [limiters[0].nextTurn(at: now), limiters[1].nextTurn(at: now)].compactMap { $0 }.min() ?? .milliseconds(1)
            let moved = max(step, .microseconds(1))
            now += moved
            clock.advance(moved)
        }
        let total = sent.reduce(0, +)
        let mostInTenSeconds = (10 << 20) + (256 << 10)
        #expect(total <= mostInTenSeconds + (64 << 10), "\(sent)")
        #expect(total >= mostInTenSeconds - (128 << 10), "\(sent)")
        #expect(abs(sent[0] - sent[1]) <= total / 4, "each process gets a fair share: \(sent)")
    }

    /// The station's rate is the smallest asked by a process alive; when that process is
    /// gone the others go back to theirs.
    @Test func theSmallestRateOfTheProcessesAliveHolds() throws {
        let fast = try bucket(4 << 20)
        #expect(fast.rate.bytesPerSecond == 4 << 20)
        var slow: StationRateBucket? = try bucket(1 << 20)
        #expect(fast.rate.bytesPerSecond == 1 << 20)
        #expect(slow?.rate.bytesPerSecond == 1 << 20)
        slow = nil
        clock.advance(.seconds(2))
        _ = fast.reserve(1, at: .now)
        #expect(fast.rate.bytesPerSecond == 4 << 20)
    }

    /// Turns are reserved in the order they are asked, whichever process asks; turns not
    /// sent go back to the station's bucket, for any process.
    @Test func turnsAreReservedInOrderAcrossProcessesAndTokensGivenBackServeAnother() throws {
        let first = try bucket(1 << 20)
        let second = try bucket(1 << 20)
        #expect(first.reserve(256 << 10, at: .now) == .zero, "a full bucket: a quarter second of 1 MiB/s")
        #expect(second.reserve(64 << 10, at: .now) == .nanoseconds(62_500_000), "64 KiB at 1 MiB/s")
        #expect(first.reserve(64 << 10, at: .now) == .nanoseconds(125_000_000), "behind the second's turn")
        first.giveBack(128 << 10)
        #expect(second.reserve(64 << 10, at: .now) == .nanoseconds(62_500_000))
        clock.advance(.milliseconds(62))
        #expect(first.reserve(1, at: .now) > .zero)
        clock.advance(.milliseconds(1))
        #expect(first.reserve(1, at: .now) == .zero)
    }

    /// A process killed while it holds the file's lock leaves nothing locked: the kernel drops
    /// a `flock` with its holder.
    @Test func aHolderKilledLeavesTheBucketFree() throws {
        let path = directory.path + "/upload-rate"
        let first = try bucket(1 << 20)
        let fifo = directory.path + "/held"
        #expect(mkfifo(fifo, 0o600) == 0)
        let signal = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        defer { close(signal) }
        let holder = try ChildProcess(
            "/bin/sh", ["-c", "exec 9<>\(shellQuoted(path)); flock 9; echo held > \(shellQuoted(fifo)); exec sleep 600"])
        var entry = pollfd(fd: signal, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 10_000) == 1, "the child took the lock")
        let probe = open(path, O_RDWR | O_CLOEXEC)
        defer { close(probe) }
        #expect(flock(probe, LOCK_EX | LOCK_NB) != 0, "the child holds the lock")
        kill(holder.pid, SIGKILL)
        _ = try holder.wait(timeout: 10)
        #expect(flock(probe, LOCK_EX | LOCK_NB) == 0, "the kernel dropped the dead holder's lock")
        flock(probe, LOCK_UN)
        #expect(first.reserve(1024, at: .now) == .zero)
    }

    /// A file that cannot be made (no such directory) fails the bucket, for the caller to
    /// fall back to the process's own.
    @Test func aFileThatCannotBeOpenedFailsWithItsPath() {
        #expect(throws: SystemError.self) {
            try StationRateBucket(path: directory.path + "/missing/upload-rate", rate: ByteRate(bytesPerSecond: 1 << 20))
        }
    }

    @Test func theFileIsInTheRuntimeDirectoryUnlessGiven() {
        #expect(StationRateFile.path(environment: [:]) == "/run/ingest/upload-rate")
        #expect(StationRateFile.path(environment: ["RUNTIME_DIRECTORY": "/run/ingest:/run/other"]) == "/run/ingest/upload-rate")
        #expect(StationRateFile.path(environment: ["RUNTIME_DIRECTORY": "/run/x", "INGEST_RATE_FILE": "/tmp/r"]) == "/tmp/r")
    }
}
