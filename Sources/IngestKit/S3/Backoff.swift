/// How long to wait before retrying a failed request: capped exponential backoff with
/// full jitter.
///
/// For retry number `n` (1 = the first retry) the wait is drawn uniformly from
///
///     [0, min(cap, base · 2^(n-1)))
///
/// The ceiling doubles with every retry so that a struggling server gets more room, and
/// stops at `cap` so that a long outage does not turn into waits of hours.
///
/// Why *full* jitter (a random point in the whole range) rather than a fixed or half-random
/// wait: when a server hiccups, every client that was talking to it fails at the same
/// moment. With fixed waits they all come back at the same moment again, in synchronised
/// waves that keep the server overloaded. Drawing from the whole range spreads the retries
/// evenly over the window, which AWS measured to finish the total work soonest with the
/// fewest calls ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015); the AWS
/// SDKs' standard retry mode uses the same formula.
public enum Backoff {
    /// The wait before retry number `attempt` (1 = the first retry).
    ///
    /// - Parameters:
    ///   - attempt: which retry this is; values below 1 count as 1.
    ///   - base: the ceiling of the first retry's wait; negative counts as zero.
    ///   - cap: the largest ceiling, whatever the attempt; negative counts as zero.
    ///   - random: a uniform random number in [0, 1) that places the wait inside the range;
    ///     out-of-range values are clamped and NaN counts as 0, so the result is always
    ///     within `0...upperBound(attempt:base:cap:)`.
    /// - Returns: `upperBound(attempt:base:cap:) · random`, never more than the bound.
    public static func delay(attempt: Int, base: Duration, cap: Duration, random: Double) -> Duration {
        let bound = upperBound(attempt: attempt, base: base, cap: cap)
        let fraction = random.isNaN ? 0 : min(max(random, 0), 1)
        let boundAttoseconds = Double(bound.attoseconds)
        let scaled = boundAttoseconds * fraction
        // Rounding to Double can land on or above the bound; the bound itself is then the
        // answer, and it keeps the conversion back to Int128 in range.
        if scaled >= boundAttoseconds { return bound }
        return Duration(attoseconds: max(0, Int128(scaled)))
    }

    /// ``delay(attempt:base:cap:random:)`` with the random number drawn from `generator`.
    public static func delay(
        attempt: Int, base: Duration, cap: Duration, using generator: inout some RandomNumberGenerator
    ) -> Duration {
        delay(attempt: attempt, base: base, cap: cap, random: Double.random(in: 0..<1, using: &generator))
    }

    /// The ceiling of the wait before retry number `attempt`: `min(cap, base · 2^(attempt-1))`.
    ///
    /// Computed by doubling while below `cap`, so no attempt number, however large,
    /// overflows: the doubling stops at the cap after at most ~128 steps.
    public static func upperBound(attempt: Int, base: Duration, cap: Duration) -> Duration {
        let cap = max(cap, .zero)
        var bound = min(max(base, .zero), cap)
        var doublings = max(attempt, 1) - 1
        while doublings > 0, bound > .zero, bound < cap {
            // bound ≤ cap/2 (rounded down) guarantees 2·bound ≤ cap, so the doubling cannot
            // overflow; above that, doubling would pass the cap anyway.
            bound = bound <= cap / 2 ? bound * 2 : cap
            doublings -= 1
        }
        return bound
    }
}
