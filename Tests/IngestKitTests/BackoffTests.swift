import Testing

@testable import IngestKit

/// A deterministic generator (the SplitMix64 algorithm), so statistical tests give the same draws every run.
struct BackoffTestGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct BackoffTests {
    static let base = Duration.milliseconds(100)
    static let cap = Duration.seconds(5)
    /// The largest Double below 1: the top of `random`'s range.
    static let almostOne = 1.0.nextDown

    /// min(cap, base · 2^(attempt-1)) for base 100 ms and cap 5 s, worked out by hand.
    @Test(arguments: [
        (1, Duration.milliseconds(100)),
        (2, .milliseconds(200)),
        (3, .milliseconds(400)),
        (4, .milliseconds(800)),
        (5, .milliseconds(1_600)),
        (6, .milliseconds(3_200)),
        (7, .seconds(5)),
        (8, .seconds(5)),
        (30, .seconds(5)),
    ])
    func theCeilingDoublesEachRetryUntilTheCap(attempt: Int, ceiling: Duration) {
        #expect(Backoff.upperBound(attempt: attempt, base: Self.base, cap: Self.cap) == ceiling)
    }

    @Test func everyDelayLiesBetweenZeroAndTheCeiling() {
        let randoms = [0, 1e-12, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999_999, Self.almostOne]
        for attempt in 1...80 {
            // The oracle, computed apart from the code under test: in seconds, as Doubles.
            let ceiling = min(5.0, 0.1 * Double(sign: .plus, exponent: attempt - 1, significand: 1))
            for random in randoms {
                let delay = Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, random: random)
                #expect(delay >= .zero, "attempt \(attempt), random \(random)")
                #expect(seconds(delay) <= ceiling * (1 + 1e-12), "attempt \(attempt), random \(random)")
            }
        }
    }

    @Test func theDelayIsTheCeilingScaledByTheRandomNumber() {
        #expect(Backoff.delay(attempt: 1, base: Self.base, cap: Self.cap, random: 0.5) == .milliseconds(50))
        #expect(Backoff.delay(attempt: 3, base: Self.base, cap: Self.cap, random: 0.25) == .milliseconds(100))
        #expect(Backoff.delay(attempt: 9, base: Self.base, cap: Self.cap, random: 0.5) == .milliseconds(2_500))
    }

    @Test(arguments: [1, 2, 7, 100, Int.max])
    func randomZeroWaitsNotAtAll(attempt: Int) {
        #expect(Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, random: 0) == .zero)
    }

    @Test(arguments: [1, 4, 7, 1_000])
    func randomNearOneWaitsNearlyTheWholeCeiling(attempt: Int) {
        let ceiling = Backoff.upperBound(attempt: attempt, base: Self.base, cap: Self.cap)
        let delay = Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, random: Self.almostOne)
        #expect(delay <= ceiling)
        #expect(ceiling - delay < .nanoseconds(1))
    }

    @Test(arguments: [64, 65, 127, 128, 129, 1_000_000, Int.max])
    func hugeAttemptNumbersStopAtTheCapWithoutOverflow(attempt: Int) {
        #expect(Backoff.upperBound(attempt: attempt, base: Self.base, cap: Self.cap) == Self.cap)
        let delay = Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, random: Self.almostOne)
        #expect(delay <= Self.cap && delay > .seconds(4.999))
    }

    /// The largest caps Duration can hold: doubling must stop before it overflows Int128.
    @Test func aCapNearTheLargestDurationDoesNotOverflow() {
        let cap = Duration.seconds(Int64.max)
        #expect(Backoff.upperBound(attempt: Int.max, base: .seconds(1), cap: cap) == cap)
        #expect(Backoff.upperBound(attempt: 200, base: .seconds(Int64.max / 2 + 1), cap: cap) == cap)
        let delay = Backoff.delay(attempt: Int.max, base: .seconds(1), cap: cap, random: Self.almostOne)
        #expect(delay <= cap && delay > .seconds(Int64.max / 2))
    }

    @Test func theCeilingNeverShrinksFromOneAttemptToTheNext() {
        for (base, cap) in [(Self.base, Self.cap), (.milliseconds(500), .seconds(20)), (.nanoseconds(3), .seconds(7))] {
            var previous = Duration.zero
            for attempt in 1...300 {
                let ceiling = Backoff.upperBound(attempt: attempt, base: base, cap: cap)
                #expect(ceiling >= previous, "attempt \(attempt) base \(base) cap \(cap)")
                previous = ceiling
            }
            #expect(previous == cap)
        }
    }

    @Test func aBaseAboveTheCapIsHeldToTheCap() {
        #expect(Backoff.upperBound(attempt: 1, base: .seconds(30), cap: Self.cap) == Self.cap)
    }

    @Test(arguments: [0, -1, Int.min])
    func attemptsBelowOneCountAsTheFirstRetry(attempt: Int) {
        #expect(Backoff.upperBound(attempt: attempt, base: Self.base, cap: Self.cap) == Self.base)
    }

    @Test(arguments: [
        (1.0, Duration.milliseconds(200)), (7.5, .milliseconds(200)), (.infinity, .milliseconds(200)),
        (-0.5, .zero), (.nan, .zero),
    ])
    func randomNumbersOutsideTheUnitRangeAreClamped(random: Double, delay: Duration) {
        #expect(Backoff.delay(attempt: 2, base: Self.base, cap: Self.cap, random: random) == delay)
    }

    @Test func negativeDurationsCountAsZero() {
        #expect(Backoff.delay(attempt: 3, base: .seconds(-1), cap: Self.cap, random: 0.5) == .zero)
        #expect(Backoff.delay(attempt: 3, base: Self.base, cap: .seconds(-1), random: 0.5) == .zero)
    }

    /// Full jitter: draws cover the whole range, down near zero too (equal jitter would
    /// never go below half the ceiling), and average half the ceiling.
    @Test func drawsFromAGeneratorSpreadOverTheWholeRange() {
        var generator = BackoffTestGenerator(state: 42)
        let ceiling = seconds(Backoff.upperBound(attempt: 4, base: Self.base, cap: Self.cap))
        let draws = (0..<10_000).map { _ in
            seconds(Backoff.delay(attempt: 4, base: Self.base, cap: Self.cap, using: &generator))
        }
        #expect(draws.allSatisfy { $0 >= 0 && $0 <= ceiling })
        #expect(draws.min()! < 0.02 * ceiling)
        #expect(draws.max()! > 0.98 * ceiling)
        let mean = draws.reduce(0, +) / Double(draws.count)
        #expect(abs(mean - ceiling / 2) < 0.02 * ceiling)
    }

    @Test func theSameSeedGivesTheSameDelays() {
        var first = BackoffTestGenerator(state: 7)
        var second = BackoffTestGenerator(state: 7)
        for attempt in 1...10 {
            #expect(
                Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, using: &first)
                    == Backoff.delay(attempt: attempt, base: Self.base, cap: Self.cap, using: &second))
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}
