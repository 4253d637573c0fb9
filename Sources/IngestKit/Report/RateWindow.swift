/// The rate of a growing count (bytes copied, bytes sent) over the last stretch of time, from
/// a fixed ring of samples: the same small memory for a job of a minute or of a day.
///
/// A rate since the start of the job would hide a link that slowed down an hour in; a rate
/// between the last two samples would jump with every part acknowledged (a 16 MiB part on a
/// 1 MiB/s link lands once every 16 s). The window, 30 s by default, is long enough to hold
/// several parts of a slow link and short enough to follow a change.
struct RateWindow: Sendable {
    private struct Sample {
        var time: ContinuousClock.Instant
        var count: Int64
    }

    /// How far back the rate looks.
    let span: Duration
    /// The least time between two samples kept: `span` over the ring's size.
    private let spacing: Duration
    /// The ring: allocated once, at its full size.
    private var samples: [Sample?]
    /// Where the next sample goes.
    private var next = 0

    init(span: Duration = .seconds(30), slots: Int = 30) {
        precondition(slots >= 2 && span > .zero)
        self.span = span
        spacing = span / slots
        samples = Array(repeating: nil, count: slots)
    }

    /// Notes the count at `time`; a sample sooner than the ring's spacing after the last one
    /// kept is passed over, so readers may call this as often as they like.
    mutating func add(_ count: Int64, at time: ContinuousClock.Instant) {
        let last = samples[(next + samples.count - 1) % samples.count]
        if let last, time - last.time < spacing { return }
        samples[next] = Sample(time: time, count: count)
        next = (next + 1) % samples.count
    }

    /// Units per second from the oldest sample kept to `count` at `time`; nil until at least
    /// a second has been watched (sooner, one event makes a wild rate).
    func rate(_ count: Int64, at time: ContinuousClock.Instant) -> Double? {
        // The oldest is where the next sample goes, once the ring is full; before, the first.
        guard let oldest = samples[next] ?? samples[0] else { return nil }
        let seconds = (time - oldest.time).inSeconds
        guard seconds >= 1 else { return nil }
        return Double(max(count - oldest.count, 0)) / seconds
    }
}
