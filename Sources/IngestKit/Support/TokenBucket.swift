/// Tokens (bytes, here) that flow in at a steady rate into a bucket of fixed capacity: what
/// is taken from it over any stretch of time is at most the rate times that time, plus the
/// capacity. The capacity is the burst allowed after the bucket sat unused; it starts full.
///
/// Time is given to every call rather than read from a clock, so that the bucket can be
/// driven by any clock and tested without waiting.
public struct TokenBucket: Sendable {
    /// Tokens added per second.
    public let rate: Int64
    public let capacity: Int64
    /// Held at `updated`; fractional, so that no part of the flow is lost to rounding.
    private var tokens: Double
    private var updated: ContinuousClock.Instant

    /// A full bucket: `rate` and `capacity` are at least 1.
    public init(rate: Int64, capacity: Int64, now: ContinuousClock.Instant) {
        precondition(rate > 0 && capacity > 0, "a token bucket needs a positive rate and capacity")
        self.rate = rate
        self.capacity = capacity
        tokens = Double(capacity)
        updated = now
    }

    /// Whole tokens in the bucket at `now`.
    public func available(at now: ContinuousClock.Instant) -> Int64 { Int64(level(at: now)) }

    /// Takes `count` tokens if the bucket holds them at `now`, else nothing; false then.
    public mutating func take(_ count: Int64, at now: ContinuousClock.Instant) -> Bool {
        let level = level(at: now)
        updated = max(updated, now)
        tokens = level
        guard Double(count) <= level else { return false }
        tokens -= Double(count)
        return true
    }

    /// Puts back tokens taken and not spent, up to the capacity.
    public mutating func giveBack(_ count: Int64) {
        tokens = min(Double(capacity), tokens + Double(count))
    }

    /// How long from `now` until the bucket holds `count` tokens (zero when it does);
    /// `count` is at most the capacity.
    public func delay(until count: Int64, at now: ContinuousClock.Instant) -> Duration {
        let missing = Double(count) - level(at: now)
        guard missing > 0 else { return .zero }
        return .nanoseconds(Int64((missing / Double(rate) * 1e9).rounded(.up)))
    }

    /// The tokens at `now`: what was held plus the flow since, up to the capacity. A `now`
    /// before the last update adds nothing.
    private func level(at now: ContinuousClock.Instant) -> Double {
        let elapsed = now > updated ? (now - updated).inSeconds : 0
        return min(Double(capacity), tokens + elapsed * Double(rate))
    }
}
