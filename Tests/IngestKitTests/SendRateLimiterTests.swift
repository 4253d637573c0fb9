import Testing

@testable import IngestKit

/// A transfer, as the limiter sees it: who waits, and what it was given.
private final class Sender {
    let name: String
    var sent = 0
    init(_ name: String) { self.name = name }
}

/// Time is moved by hand: no test sleeps.
@Suite struct SendRateLimiterTests {
    let start = ContinuousClock.now

    @Test func aTurnIsAtMost64KiBAndAQuarterSecondsWorthIsTheBurst() {
        let fast = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 8 << 20), now: start)
        #expect(fast.turn == 64 << 10)
        let slow = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 64 << 10), now: start)
        #expect(slow.turn == 16 << 10)
        let sender = Sender("a")
        var burst = 0
        while case let bytes = fast.claim(1 << 20, for: sender, at: start), bytes > 0 { burst += bytes }
        #expect(burst == 2 << 20, "a quarter second of 8 MiB/s")
    }

    @Test func aTransferAskingForLessThanATurnIsGivenWhatItAsked() {
        let limiter = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 1 << 20), now: start)
        #expect(limiter.claim(100, for: Sender("a"), at: start) == 100)
    }

    @Test func whenTheBucketIsShortTheTransferWaitsAndIsServedWhenItsTurnFlowsIn() {
        let limiter = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 1 << 20), now: start)
        let sender = Sender("a")
        while limiter.claim(1 << 20, for: sender, at: start) > 0 {}
        #expect(limiter.serve(at: start).isEmpty)
        let delay = try! #require(limiter.nextTurn(at: start))
        #expect(delay == .nanoseconds(62_500_000), "64 KiB at 1 MiB/s")
        #expect(limiter.serve(at: start + delay / 2).isEmpty)
        let served = limiter.serve(at: start + delay)
        #expect(served.map(\.waiter.name) == ["a"])
        #expect(served.map(\.bytes) == [64 << 10])
        #expect(limiter.nextTurn(at: start + delay) == nil, "no one waits")
    }

    /// Turns go in the order they were asked for: a transfer that has just sent does not
    /// jump the queue, so each one of many moves at its share and none looks stalled.
    @Test func transfersWaitingTakeTurnsInTheOrderTheyAskedAndShareTheRateEvenly() {
        let limiter = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 1 << 20), now: start)
        let senders = (0..<5).map { Sender("\($0)") }
        var waiting: Set<String> = []
        var order: [String] = []
        var now = start
        while now < start + .seconds(10) {
            // Each one that is not waiting has sent its last turn, and asks for the next.
            for sender in senders where !waiting.contains(sender.name) {
                let bytes = limiter.claim(1 << 20, for: sender, at: now)
                if bytes > 0 { order.append(sender.name) } else { waiting.insert(sender.name) }
                sender.sent += bytes
            }
            for (sender, bytes) in limiter.serve(at: now) {
                sender.sent += bytes
                order.append(sender.name)
                waiting.remove(sender.name)
            }
            now += limiter.nextTurn(at: now) ?? .milliseconds(1)
        }
        #expect(Array(order.prefix(12)) == ["0", "1", "2", "3", "4", "0", "1", "2", "3", "4", "0", "1"])
        let shares = senders.map(\.sent)
        #expect(shares.max()! - shares.min()! <= 64 << 10, "\(shares)")
        let total = shares.reduce(0, +)
        let mostInTenSeconds = (10 << 20) + (256 << 10)  // the rate's, and a full bucket
        #expect(total <= mostInTenSeconds)
        #expect(total >= mostInTenSeconds - (64 << 10))
    }

    @Test func aTransferThatEndsWaitingLeavesTheQueueAndItsUnsentBytesGoBack() {
        let limiter = SendRateLimiter<Sender>(rate: ByteRate(bytesPerSecond: 1 << 20), now: start)
        let first = Sender("first")
        let second = Sender("second")
        while limiter.claim(1 << 20, for: first, at: start) > 0 {}
        #expect(limiter.claim(1 << 20, for: second, at: start) == 0)
        limiter.release(first, unsent: 0)
        let later = start + .seconds(1)
        #expect(limiter.serve(at: later).map(\.waiter.name) == ["second"])
        // Its turn given and never sent: back in the bucket for the others.
        limiter.release(second, unsent: 64 << 10)
        #expect(limiter.claim(1 << 20, for: first, at: later) == 64 << 10)
        #expect(limiter.claim(1 << 20, for: first, at: later) == 64 << 10)
        #expect(limiter.claim(1 << 20, for: first, at: later) == 64 << 10)
        #expect(limiter.claim(1 << 20, for: first, at: later) == 64 << 10)
        #expect(limiter.claim(1 << 20, for: first, at: later) == 0, "a quarter second of 1 MiB/s, no more")
    }
}
