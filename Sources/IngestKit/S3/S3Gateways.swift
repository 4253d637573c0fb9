// The gateways of one bucket, and which of them are down: every S3Client of a destination in a
// process shares one, so that a gateway found dead by one request is skipped by all the others.

import Logging
import Synchronization

/// The S3 gateways one bucket is reached through, in order, and which are down.
///
/// A request goes through the first gateway not marked down (``pick()``). A gateway that
/// refuses a connection, resets it or times out is marked down (``markDown(_:)``) for a
/// while: 1 s, doubling for each further failure up to 60 s, and back to 1 s after a
/// request through it succeeds (``markUp(_:)``). When its time is up it is tried again
/// with real requests: a probe of our own would only add traffic and a second verdict.
/// When every gateway is down, the one that comes back soonest is picked, and the caller's
/// retry backoff paces the attempts.
///
/// A change (down, back up) is logged at notice level once, and only when there is more
/// than one gateway: with one, the request's own errors say it all.
///
/// Thread-safe: the runner has many requests in flight, and all of a destination's go
/// through one instance.
public final class S3Gateways: Sendable {
    /// One gateway: its URL as configured, and parsed.
    public struct Gateway: Sendable, Equatable {
        public let url: String
        public let endpoint: S3Endpoint
    }

    /// How long a gateway is first marked down, and the most it is, however often it fails.
    public static let firstDownTime: Duration = .seconds(1)
    public static let longestDownTime: Duration = .seconds(60)

    private struct Health {
        /// Until when the gateway is skipped; nil when it is up.
        var downUntil: ContinuousClock.Instant?
        /// How long the next marking down lasts.
        var nextDownTime: Duration = S3Gateways.firstDownTime
    }

    private struct State {
        var gateways: [Gateway]
        var health: [Health]
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> ContinuousClock.Instant
    private let logger: Logger

    /// The gateways at `urls`, all up. Fails for a URL that is not a service URL
    /// (``S3Endpoint``). `now` is the clock the down times are measured on (a test's
    /// manual clock).
    public init(
        urls: [String], logger: Logger, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) throws(S3AddressError) {
        var gateways: [Gateway] = []
        for url in urls {
            let endpoint = try S3Endpoint(url)
            if !gateways.contains(where: { $0.endpoint == endpoint }) { gateways.append(Gateway(url: url, endpoint: endpoint)) }
        }
        if gateways.isEmpty { throw .invalidEndpoint("", problem: "no gateway given") }
        state = Mutex(State(gateways: gateways, health: gateways.map { _ in Health() }))
        self.now = now
        self.logger = logger
    }

    /// The gateways, in the order they are tried.
    public var all: [Gateway] { state.withLock { $0.gateways } }

    /// Adds the gateways of `urls` not already here, after the others (a journalled
    /// destination's store made after the configured one's). Fails for a URL that does not
    /// parse, adding none.
    public func add(urls: [String]) throws(S3AddressError) {
        var parsed: [Gateway] = []
        for url in urls { parsed.append(Gateway(url: url, endpoint: try S3Endpoint(url))) }
        state.withLock { state in
            for gateway in parsed where !state.gateways.contains(where: { $0.endpoint == gateway.endpoint }) {
                state.gateways.append(gateway)
                state.health.append(Health())
            }
        }
    }

    /// The gateway the next request goes through: the first not down, or, when all are
    /// down, the one whose down time ends first.
    public func pick() -> Gateway {
        let now = now()
        return state.withLock { state in
            if let index = state.health.firstIndex(where: { ($0.downUntil ?? now) <= now }) {
                return state.gateways[index]
            }
            let soonest = state.health.indices.min { state.health[$0].downUntil! < state.health[$1].downUntil! }!
            return state.gateways[soonest]
        }
    }

    /// Whether `gateway` is marked down now.
    public func isDown(_ gateway: Gateway) -> Bool {
        let now = now()
        return state.withLock { state in
            guard let index = state.gateways.firstIndex(of: gateway) else { return false }
            return (state.health[index].downUntil ?? now) > now
        }
    }

    /// Marks `gateway` down after a connection refused, reset or timed out (`reason`), unless
    /// it is down already (the other requests in flight through it fail at once too: one
    /// failure, one marking). Returns whether another gateway is up now, to go through at
    /// once instead of waiting.
    @discardableResult
    public func markDown(_ gateway: Gateway, reason: String) -> Bool {
        let now = now()
        let (marked, downTime, others, next) = state.withLock { state -> (Bool, Duration, Bool, String?) in
            guard let index = state.gateways.firstIndex(of: gateway) else { return (false, .zero, false, nil) }
            var marked = false
            var downTime = Duration.zero
            if (state.health[index].downUntil ?? now) <= now {
                downTime = state.health[index].nextDownTime
                marked = state.health[index].downUntil == nil
                state.health[index].downUntil = now + downTime
                state.health[index].nextDownTime = min(downTime * 2, Self.longestDownTime)
            }
            let up = state.health.indices.first { $0 != index && (state.health[$0].downUntil ?? now) <= now }
            return (marked, downTime, up != nil, up.map { state.gateways[$0].url })
        }
        if marked, state.withLock({ $0.gateways.count }) > 1 {
            logger.notice(
                "S3 gateway marked down",
                metadata: [
                    "gateway": "\(gateway.url)", "reason": "\(reason)", "for": "\(downTime)",
                    "next": "\(next ?? "none up: waiting for the first back")",
                ])
        } else if downTime > .zero {
            logger.debug("S3 gateway still down", metadata: ["gateway": "\(gateway.url)", "for": "\(downTime)"])
        }
        return others
    }

    /// Marks `gateway` up after a request through it got an answer: its next down time is
    /// the first again.
    public func markUp(_ gateway: Gateway) {
        let wasDown = state.withLock { state -> Bool in
            guard let index = state.gateways.firstIndex(of: gateway) else { return false }
            let health = state.health[index]
            state.health[index] = Health()
            return health.downUntil != nil
        }
        if wasDown, state.withLock({ $0.gateways.count }) > 1 {
            logger.notice("S3 gateway back up", metadata: ["gateway": "\(gateway.url)"])
        }
    }
}
