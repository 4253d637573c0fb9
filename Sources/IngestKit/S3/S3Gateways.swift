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
        /// Per gateway: nil until its bucket identity is checked, then nil-or-refusal
        /// (``Identity``).
        var identity: [Identity?]
        /// The bucket's identity (``markerKey``'s bytes), once one gateway has shown it or
        /// the journal recorded it.
        var bucketID: [UInt8]?
        /// The checks in progress, by gateway: one per gateway, awaited by every request.
        var checks: [Int: Task<Void, Never>] = [:]
    }

    /// Whether a gateway shows the bucket the others show.
    enum Identity: Equatable {
        case same
        /// Another bucket (another cluster): never used again by this process.
        case foreign(String)
    }

    /// The marker at the bucket's root whose bytes identify the bucket across its gateways:
    /// written once with a random UUID under `If-None-Match: *`, read through every gateway.
    /// Never a card's file: it is outside every card's folder, and `ingest ls` hides it.
    public static let markerKey = ".ingest/bucket-id"

    private let state: Mutex<State>
    private let now: @Sendable () -> ContinuousClock.Instant
    private let logger: Logger
    let identified: @Sendable ([UInt8]) -> Void

    /// The gateways at `urls`, all up. Fails for a URL that is not a service URL
    /// (``S3Endpoint``). `now` is the clock the down times are measured on (a test's
    /// manual clock).
    /// - Parameter identified: told the bucket's identity when a gateway first shows it
    ///   (the journal records it under the destination).
    public init(
        urls: [String], logger: Logger, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        identified: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) throws(S3AddressError) {
        var gateways: [Gateway] = []
        for url in urls {
            let endpoint = try S3Endpoint(url)
            if !gateways.contains(where: { $0.endpoint == endpoint }) { gateways.append(Gateway(url: url, endpoint: endpoint)) }
        }
        if gateways.isEmpty { throw .invalidEndpoint("", problem: "no gateway given") }
        state = Mutex(
            State(gateways: gateways, health: gateways.map { _ in Health() }, identity: gateways.map { _ in nil }))
        self.now = now
        self.logger = logger
        self.identified = identified
    }

    /// The gateways, in the order they are tried.
    public var all: [Gateway] { state.withLock { $0.gateways } }

    /// How many gateways there are.
    public var count: Int { state.withLock { $0.gateways.count } }

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
                state.identity.append(nil)
            }
        }
    }

    /// The gateway the next request goes through: the first not down, or, when all are
    /// down, the one whose down time ends first; never one that shows another bucket (nil
    /// when all do).
    public func pick() -> Gateway? {
        let now = now()
        return state.withLock { state in
            let usable = state.gateways.indices.filter { state.identity[$0] == nil || state.identity[$0] == .same }
            if let index = usable.first(where: { (state.health[$0].downUntil ?? now) <= now }) {
                return state.gateways[index]
            }
            guard let soonest = usable.min(by: { state.health[$0].downUntil! < state.health[$1].downUntil! }) else {
                return nil
            }
            return state.gateways[soonest]
        }
    }

    /// Why no gateway may be used: each shows another bucket.
    public var refusals: String {
        state.withLock { state in
            state.identity.compactMap { identity -> String? in
                if case .foreign(let reason) = identity { return reason }
                return nil
            }.joined(separator: "; ")
        }
    }

    /// The bucket's identity as known here (shown by a gateway, or recorded by the journal).
    public var bucketID: [UInt8]? { state.withLock { $0.bucketID } }

    /// Sets the identity the journal recorded for the bucket, before any gateway is checked:
    /// a gateway of another cluster is then refused even when it answers first.
    public func expect(bucketID: [UInt8]) {
        state.withLock { state in if state.bucketID == nil { state.bucketID = bucketID } }
    }

    /// Whether `gateway` must show the bucket's identity before it carries a request: until
    /// it has, when there is more than one gateway or the bucket's identity is known.
    func needsCheck(_ gateway: Gateway) -> Bool {
        state.withLock { state in
            guard state.gateways.count > 1 || state.bucketID != nil,
                let index = state.gateways.firstIndex(of: gateway)
            else { return false }
            return state.identity[index] == nil
        }
    }

    /// Runs `check` for `gateway` once, however many requests ask at once; they all wait for it.
    func checkOnce(_ gateway: Gateway, _ check: @escaping @Sendable () async -> Void) async {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard let index = state.gateways.firstIndex(of: gateway), state.identity[index] == nil else { return nil }
            if let running = state.checks[index] { return running }
            let task = Task { await check() }
            state.checks[index] = task
            return task
        }
        await task?.value
        state.withLock { state in
            if let index = state.gateways.firstIndex(of: gateway), state.checks[index] == task { state.checks[index] = nil }
        }
    }

    /// Takes the decision of ``GatewayMembership`` over the gateways at `urls` (in its
    /// order): the bucket's identity is its id, a gateway that belongs is used, a foreign one
    /// never, one unchecked is checked by its first request. Gateways not among `urls` keep
    /// their state.
    public func apply(_ membership: GatewayMembership, to urls: [String]) {
        let refusals = state.withLock { state -> [(String, String)] in
            if let id = membership.id { state.bucketID = id }
            var refusals: [(String, String)] = []
            for (url, verdict) in zip(urls, membership.verdicts) {
                guard let endpoint = try? S3Endpoint(url),
                    let index = state.gateways.firstIndex(where: { $0.endpoint == endpoint })
                else { continue }
                switch verdict {
                case .belongs:
                    state.identity[index] = .same
                case .foreign(let sight):
                    let reason = Self.refusal(url, shows: sight, expected: state.bucketID)
                    state.identity[index] = .foreign(reason)
                    refusals.append((url, reason))
                case .unchecked:
                    state.identity[index] = nil
                }
            }
            return refusals
        }
        // The caller tells the person (a run's foreign_gateway line, a check's gateway line).
        for (url, reason) in refusals {
            logger.info("S3 gateway refused", metadata: ["gateway": "\(url)", "reason": "\(reason)"])
        }
    }

    /// Why `url` is refused: it shows `sight` where the bucket's id is `expected`.
    static func refusal(_ url: String, shows sight: MarkerSight, expected: [UInt8]?) -> String {
        let id = expected.map { String(decoding: $0, as: UTF8.self) } ?? "none"
        return "the gateway \(url) shows another bucket (another cluster?): \(sight.description), where the "
            + "destination's bucket id is \(id). It is not used. Remove it from [s3] endpoint (--endpoint, "
            + "INGEST_ENDPOINT), or point it at the cluster whose \(markerKey) is \(id)"
    }

    /// What `gateway` showed at ``markerKey`` when first asked by a request: its bytes, or
    /// nil (404). Where the bucket's identity is known, a gateway showing another, or none,
    /// is refused for good; where it is not, the first bytes shown are the bucket's
    /// identity, and a gateway showing none is used (nothing tells it apart). Returns the
    /// bucket's identity when this made it known.
    @discardableResult
    func settle(_ gateway: Gateway, shows bytes: [UInt8]?) -> [UInt8]? {
        let (learned, refusal) = state.withLock { state -> ([UInt8]?, String?) in
            guard let index = state.gateways.firstIndex(of: gateway) else { return (nil, nil) }
            switch (bytes, state.bucketID) {
            case (let shown?, nil):
                state.bucketID = shown
                state.identity[index] = .same
                return (shown, nil)
            case (nil, nil):
                state.identity[index] = .same
                return (nil, nil)
            case (let shown?, let known?) where shown == known:
                state.identity[index] = .same
                return (nil, nil)
            case (let shown, let known):
                let reason = Self.refusal(gateway.url, shows: shown.map(MarkerSight.marker) ?? .noMarker, expected: known)
                state.identity[index] = .foreign(reason)
                return (nil, reason)
            }
        }
        if let refusal { logger.warning("S3 gateway refused", metadata: ["gateway": "\(gateway.url)", "reason": "\(refusal)"]) }
        return learned
    }

    /// Whether a gateway other than `gateway` is up now and not refused.
    public func isAnotherUp(than gateway: Gateway) -> Bool {
        let now = now()
        return state.withLock { state in
            state.gateways.indices.contains { index in
                state.gateways[index] != gateway && (state.health[index].downUntil ?? now) <= now
                    && (state.identity[index] == nil || state.identity[index] == .same)
            }
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
            let up = state.health.indices.first {
                $0 != index && (state.health[$0].downUntil ?? now) <= now
                    && (state.identity[$0] == nil || state.identity[$0] == .same)
            }
            return (marked, downTime, up != nil, up.map { state.gateways[$0].url })
        }
        if marked, count > 1 {
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
        if wasDown, count > 1 {
            logger.notice("S3 gateway back up", metadata: ["gateway": "\(gateway.url)"])
        }
    }
}
