/// One cap on the bytes per second that all the request bodies of a transport send
/// together (`[upload] max_rate`), or of every ingest process of the station together.
///
/// libcurl's own cap (`CURLOPT_MAX_SEND_SPEED_LARGE`) holds each transfer alone, not their
/// sum. Here every transfer about to send asks for a turn: up to ``turn`` bytes of a token
/// bucket. When the bucket is short, or other transfers already wait, it is queued and its
/// transfer paused (the transport's thread never waits); ``serve(at:)`` hands out turns in
/// the order they were asked for as the bucket refills. So each transfer moves at its
/// share of the cap and none is left behind the others long enough to look stalled.
///
/// The bucket holds a quarter of a second's worth: over any stretch of time the bodies
/// send at most the rate times that time plus a quarter second's worth (2.5 % over a 10 s
/// window).
///
/// The bucket is the process's own, or the station's (``StationRateBucket``), shared with
/// every ingest process on the machine. The first waiter's turn is *reserved*: its bytes
/// are taken from the bucket at once, into debt if need be, and the bucket says when the
/// debt is paid; the turn is served then, and the next waiter's reserved. A process holds
/// one reservation at a time, so the processes of a station that wait take turns in the
/// order they reserved, each an equal share, and the station's bucket is locked once a turn
/// (a few hundred times a second at the rates ingest caps), not at every pass of the loop.
///
/// Used by the transport's thread only.
final class SendRateLimiter<Waiter: AnyObject> {
    let rate: ByteRate
    /// The most one turn gives: small next to the bucket, so that several transfers share
    /// each quarter second, and large enough that a turn costs little next to its bytes.
    let turn: Int
    private let bucket: any SendTokens
    /// Transfers waiting for a turn, first come first served, with the bytes each asked for.
    private var waiting: [(waiter: Waiter, bytes: Int)] = []
    /// The turn taken from the bucket ahead of its tokens, and when they are there.
    private var reserved: (waiter: Waiter, bytes: Int, due: ContinuousClock.Instant)?

    /// A limiter with a bucket of its own, full at `now`.
    convenience init(rate: ByteRate, now: ContinuousClock.Instant) {
        self.init(rate: rate, bucket: LocalSendTokens(rate: rate, now: now))
    }

    /// A limiter taking its turns from `bucket` (the station's), sized by this process's `rate`.
    init(rate: ByteRate, bucket: any SendTokens) {
        self.rate = rate
        self.bucket = bucket
        turn = Int(min(Self.capacity(of: rate), 64 << 10))
    }

    /// A quarter second's worth of `rate`: the bucket's capacity.
    static func capacity(of rate: ByteRate) -> Int64 { max(1, rate.bytesPerSecond / 4) }

    /// A turn for `waiter`, which wants to send `wanted` bytes (at least 1): the bytes it
    /// may send now, at most ``turn``. 0 when it must wait: it is queued, and a later
    /// ``serve(at:)`` gives it its turn.
    func claim(_ wanted: Int, for waiter: Waiter, at now: ContinuousClock.Instant) -> Int {
        let bytes = max(1, min(wanted, turn))
        if waiting.isEmpty, reserved == nil {
            let wait = bucket.reserve(bytes, at: now)
            if wait == .zero { return bytes }
            reserved = (waiter, bytes, now + wait)
            return 0
        }
        if reserved?.waiter !== waiter, !waiting.contains(where: { $0.waiter === waiter }) { waiting.append((waiter, bytes)) }
        return 0
    }

    /// The turns due at `now`, to the waiters in the order they asked.
    func serve(at now: ContinuousClock.Instant) -> [(waiter: Waiter, bytes: Int)] {
        var served: [(waiter: Waiter, bytes: Int)] = []
        if let turn = reserved {
            guard turn.due <= now else { return served }
            served.append((turn.waiter, turn.bytes))
            reserved = nil
        }
        while !waiting.isEmpty {
            let next = waiting.removeFirst()
            let wait = bucket.reserve(next.bytes, at: now)
            guard wait == .zero else {
                reserved = (next.waiter, next.bytes, now + wait)
                break
            }
            served.append(next)
        }
        return served
    }

    /// How long from `now` until the first waiter's turn; nil when no one waits.
    func nextTurn(at now: ContinuousClock.Instant) -> Duration? {
        if let turn = reserved { return max(.zero, turn.due - now) }
        return waiting.isEmpty ? nil : .zero
    }

    /// A transfer ended: the bytes of its turn it did not send go back, and it waits no more.
    func release(_ waiter: Waiter, unsent: Int) {
        waiting.removeAll { $0.waiter === waiter }
        if let turn = reserved, turn.waiter === waiter {
            bucket.giveBack(turn.bytes)
            reserved = nil
        }
        if unsent > 0 { bucket.giveBack(unsent) }
    }
}

/// Where a ``SendRateLimiter`` takes its turns: a bucket of the process's own, or the
/// station's (``StationRateBucket``).
protocol SendTokens: AnyObject {
    /// Takes `bytes` tokens at `now`, into debt if the bucket is short: how long until the
    /// debt is paid and the turn may be sent (zero: now).
    func reserve(_ bytes: Int, at now: ContinuousClock.Instant) -> Duration
    /// Puts back `count` tokens taken and not spent.
    func giveBack(_ count: Int)
}

/// The arithmetic of a token bucket whose tokens may be owed: turns reserved ahead of the
/// flow are paid by it in the order they were reserved. Times are nanoseconds of one clock.
struct TokenLedger: Equatable {
    /// Tokens added per second, at least 1.
    var rate: Int64
    var capacity: Int64
    /// Held at `updated`, below zero while reserved turns are owed; fractional, so that no
    /// part of the flow is lost to rounding.
    var tokens: Double
    var updated: Int64

    /// Adds what flowed in since `updated`, up to the capacity. A `now` before it adds nothing.
    mutating func refill(at now: Int64) {
        guard now > updated else { return }
        tokens = min(Double(capacity), tokens + Double(now - updated) / 1e9 * Double(rate))
        updated = now
    }

    /// Takes `bytes` at `now`: the nanoseconds until the bucket has paid them (0: now).
    mutating func reserve(_ bytes: Int, at now: Int64) -> Int64 {
        refill(at: now)
        tokens -= Double(bytes)
        return tokens >= 0 ? 0 : Int64((-tokens / Double(rate) * 1e9).rounded(.up))
    }

    /// Puts back tokens taken and not spent, up to the capacity.
    mutating func giveBack(_ count: Int) {
        tokens = min(Double(capacity), tokens + Double(count))
    }

    /// A new rate, and its capacity, from now on; tokens above the new capacity are dropped.
    mutating func change(rate newRate: Int64, at now: Int64) {
        refill(at: now)
        rate = max(1, newRate)
        capacity = SendRateLimiter<AnyObject>.capacity(of: ByteRate(bytesPerSecond: rate))
        tokens = min(Double(capacity), tokens)
    }
}

/// The process's own bucket: the cap when the station's is not shared.
final class LocalSendTokens: SendTokens {
    private let origin: ContinuousClock.Instant
    private var ledger: TokenLedger

    /// A full bucket of `rate` at `now`.
    init(rate: ByteRate, now: ContinuousClock.Instant) {
        origin = now
        let capacity = SendRateLimiter<AnyObject>.capacity(of: rate)
        ledger = TokenLedger(rate: max(1, rate.bytesPerSecond), capacity: capacity, tokens: Double(capacity), updated: 0)
    }

    func reserve(_ bytes: Int, at now: ContinuousClock.Instant) -> Duration {
        .nanoseconds(ledger.reserve(bytes, at: Self.nanoseconds(now - origin)))
    }

    func giveBack(_ count: Int) { ledger.giveBack(count) }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}
