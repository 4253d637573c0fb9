/// One cap on the bytes per second that all the request bodies of a transport send
/// together (`[upload] max_rate`).
///
/// libcurl's own cap (`CURLOPT_MAX_SEND_SPEED_LARGE`) holds each transfer alone, not their
/// sum. Here every transfer about to send asks for a turn: up to ``turn`` bytes taken from
/// one ``TokenBucket``. When the bucket is short, or other transfers already wait, it is
/// queued and its transfer paused (the transport's thread never waits); ``serve(at:)``
/// hands out turns in the order they were asked for as the bucket refills. So each
/// transfer moves at its share of the cap and none is left behind the others long enough
/// to look stalled.
///
/// The bucket holds a quarter of a second's worth: over any stretch of time the bodies
/// send at most the rate times that time plus a quarter second's worth (2.5 % over a 10 s
/// window).
///
/// Used by the transport's thread only.
final class SendRateLimiter<Waiter: AnyObject> {
    let rate: ByteRate
    /// The most one turn gives: small next to the bucket, so that several transfers share
    /// each quarter second, and large enough that a turn costs little next to its bytes.
    let turn: Int
    private var bucket: TokenBucket
    /// Transfers waiting for a turn, first come first served, with the bytes each asked for.
    private var waiting: [(waiter: Waiter, bytes: Int)] = []

    init(rate: ByteRate, now: ContinuousClock.Instant) {
        self.rate = rate
        let capacity = max(1, rate.bytesPerSecond / 4)
        bucket = TokenBucket(rate: max(1, rate.bytesPerSecond), capacity: capacity, now: now)
        turn = Int(min(capacity, 64 << 10))
    }

    /// A turn for `waiter`, which wants to send `wanted` bytes (at least 1): the bytes it
    /// may send now, at most ``turn``. 0 when it must wait: it is queued, and a later
    /// ``serve(at:)`` gives it its turn.
    func claim(_ wanted: Int, for waiter: Waiter, at now: ContinuousClock.Instant) -> Int {
        let bytes = max(1, min(wanted, turn))
        if waiting.isEmpty, bucket.take(Int64(bytes), at: now) { return bytes }
        if !waiting.contains(where: { $0.waiter === waiter }) { waiting.append((waiter, bytes)) }
        return 0
    }

    /// The turns the bucket holds at `now`, to the waiters in the order they asked.
    func serve(at now: ContinuousClock.Instant) -> [(waiter: Waiter, bytes: Int)] {
        var served: [(waiter: Waiter, bytes: Int)] = []
        while let first = waiting.first, bucket.take(Int64(first.bytes), at: now) {
            served.append(waiting.removeFirst())
        }
        return served
    }

    /// How long from `now` until the first waiter's turn; nil when no one waits.
    func nextTurn(at now: ContinuousClock.Instant) -> Duration? {
        waiting.first.map { bucket.delay(until: Int64($0.bytes), at: now) }
    }

    /// A transfer ended: the bytes of its turn it did not send go back, and it waits no more.
    func release(_ waiter: Waiter, unsent: Int) {
        waiting.removeAll { $0.waiter === waiter }
        if unsent > 0 { bucket.giveBack(Int64(unsent)) }
    }
}
