// The S3 client, and its request loop: every operation is signed, sent and retried here. The
// operations are in S3Client+Operations.swift and S3Client+Listings.swift, what they return in
// S3ClientValues.swift, how they fail in S3ClientError.swift.

import Foundation
import Logging
import Synchronization

/// The S3 operations the uploader needs, signed with SigV4 and sent over libcurl, each with
/// its retry policy: control requests retry briefly, parts patiently.
///
/// Credentials are asked for on every attempt (so refreshed ones are used at once), an
/// expired token refreshes them, and a skewed clock is corrected from the server's `Date`.
///
/// Each attempt goes through the first of the destination's gateways not marked down
/// (``S3Gateways``), and is signed for that gateway's host. A connection refused, reset or
/// timed out marks the gateway down, and the request is sent again at once through the next
/// one that is up, spending none of its retry budget; only when every gateway is down does
/// the retry policy's backoff apply.
public final class S3Client: Sendable {
    public let destination: S3Destination
    /// The destination's gateways, shared by every client of the destination in the process.
    public let gateways: S3Gateways
    let credentials: CredentialsProvider
    let transport: CurlTransport
    let signer: SigV4Signer
    let logger: Logger
    /// Server time minus local time, learned from `RequestTimeTooSkewed`.
    private let clockOffset = Mutex<Duration>(.zero)

    /// Fails for an endpoint that is not a service URL (``S3Endpoint``).
    public init(
        destination: S3Destination, credentials: CredentialsProvider, transport: CurlTransport, logger: Logger
    ) throws(S3AddressError) {
        self.destination = destination
        gateways = try S3Gateways(urls: destination.gatewayURLs, logger: logger)
        self.credentials = credentials
        self.transport = transport
        self.signer = SigV4Signer(region: destination.region)
        self.logger = logger
    }

    /// A client whose requests go through `gateways`, the destination's shared state of its
    /// gateways (``StoreFactory/network(credentials:tusHeaders:transport:logger:)`` keeps one
    /// per destination).
    public init(
        destination: S3Destination, gateways: S3Gateways, credentials: CredentialsProvider, transport: CurlTransport,
        logger: Logger
    ) {
        self.destination = destination
        self.gateways = gateways
        self.credentials = credentials
        self.transport = transport
        self.signer = SigV4Signer(region: destination.region)
        self.logger = logger
    }

    /// Whether a transport failure says the gateway itself is unreachable (refused, reset,
    /// timed out): what sends the request through another gateway.
    static func isGatewayFailure(_ kind: TransportError.Kind) -> Bool {
        switch kind {
        case .connectionFailed, .connectionReset, .timedOut: true
        default: false
        }
    }

    /// Signs and sends one request, retrying as `policy` decides; returns a 2xx answer (or
    /// a 404 to a HEAD when `notFoundIsAnswer`). With `answerIsContent` a 2xx body is an
    /// object's bytes, taken as they are (not read as a possible `<Error>` document).
    func perform(
        _ method: String, key: String, query: [S3QueryItem] = [], headers: [SigV4Header] = [],
        body: HTTPBody = .empty, payloadHash: PayloadHash = .emptyBody, policy: RetryPolicy = .control,
        notFoundIsAnswer: Bool = false, isPayload: Bool = false, expectContinue: Bool = false,
        answerIsContent: Bool = false, through pinned: S3Gateways.Gateway? = nil
    ) async throws(S3ClientError) -> HTTPResponse {
        var state = RetryState()
        // Sends through another gateway spend no attempt; bounded so that gateways failing
        // in turn cannot keep a request going forever.
        var failovers = 0
        let failoverLimit = gateways.count * policy.maxAttempts
        while true {
            let gateway: S3Gateways.Gateway
            if let pinned {
                gateway = pinned
            } else {
                guard let picked = gateways.pick() else { throw .foreignBucket(gateways.refusals) }
                if gateways.needsCheck(picked) {
                    do { try await checkBucketIdentity(of: picked) } catch {
                        // The check marked an unreachable gateway down: go on through the
                        // next at once if one is up, else wait as for any failed attempt, so
                        // that a dead destination is not asked in a tight loop.
                        guard case .transport(let problem, _) = error, Self.isGatewayFailure(problem.kind) else { throw error }
                        if gateways.isAnotherUp(than: picked), failovers < failoverLimit {
                            failovers += 1
                            continue
                        }
                        let decision = policy.decide(
                            after: .transport(problem.kind), state: &state, random: Double.random(in: 0..<1), now: Date())
                        guard case .retry(let delay) = decision else { throw .transport(problem, attempts: state.failedAttempts) }
                        await transport.pause(for: delay)
                    }
                    continue  // picked again: it may be refused, or down
                }
                gateway = picked
            }
            let location: S3Location
            do {
                location = try S3Location(
                    endpoint: gateway.endpoint, bucket: destination.bucket, key: key, style: destination.addressing)
            } catch { throw .request("\(error)") }
            let resolved: ResolvedCredentials
            do { resolved = try await credentials.credentials() } catch { throw .credentials(error) }
            let now = Date().addingTimeInterval(clockOffset.withLock { $0 }.inSeconds)
            let signature: SigV4Signature
            do {
                signature = try signer.sign(
                    SigV4Request(method: method, location: location, query: query, headers: headers, payloadHash: payloadHash),
                    credentials: resolved.credentials, at: now)
            } catch { throw .request("\(error)") }
            let request = HTTPRequest(
                method: method, url: location.url(query: query),
                headers: (headers + signature.headers).map { ($0.name, $0.value) }, body: body, isPayload: isPayload,
                expectContinue: expectContinue)

            let failure: AttemptFailure
            var lastTransportError: TransportError?
            do {
                let response = try await transport.send(request)
                gateways.markUp(gateway)
                if notFoundIsAnswer, response.status == 404 { return response }
                // An object's own bytes are never probed for an `<Error>`: they may be anything.
                if answerIsContent, (200..<300).contains(response.status) { return response }
                let parsedError = S3Error.parse(status: response.status, body: Data(response.body))
                if (200..<300).contains(response.status), parsedError == nil { return response }
                failure = .response(
                    parsedError ?? S3Error(status: response.status, code: nil), dateHeader: response[header: "date"])
            } catch {
                if case .bodyUnreadable = error.kind { throw .transport(error, attempts: state.failedAttempts + 1) }
                lastTransportError = error
                failure = .transport(error.kind)
                if pinned == nil, Self.isGatewayFailure(error.kind),
                    gateways.markDown(gateway, reason: error.message.isEmpty ? "\(error.kind)" : error.message),
                    failovers < failoverLimit
                {
                    failovers += 1
                    continue
                }
            }

            // Ceph RGW 16 answers a request about an upload it completed with NoSuchKey, not
            // NoSuchUpload: either way the upload is gone, and the caller looks for its object.
            if case .response(let error, _) = failure, error.code == .noSuchKey, query.contains(where: { $0.name == "uploadId" }) {
                throw .uploadGone(error)
            }
            let decision = policy.decide(after: failure, state: &state, random: Double.random(in: 0..<1), now: Date())
            logger.debug(
                "S3 request failed", metadata: ["method": "\(method)", "key": "\(key)", "decision": "\(decision)"])
            switch decision {
            case .retry(let delay):
                await transport.pause(for: delay)  // cut short by a stop: the next attempt is cut too
            case .correctClockAndRetry(let offset):
                clockOffset.withLock { $0 = offset }
                logger.notice("corrected the clock from the server's time", metadata: ["offset": "\(offset)"])
            case .refreshCredentialsAndRetry:
                do { _ = try await credentials.refresh(rejected: resolved) } catch { throw .credentials(error) }
            case .rereadPartAndRetry:
                break  // the body is read from disk again on the next attempt
            case .restartUpload:
                guard case .response(let error, _) = failure else { throw .unexpectedAnswer(status: 0, detail: "\(failure)") }
                throw .uploadGone(error)
            case .fail:
                switch failure {
                case .response(let error, _): throw .server(error, attempts: state.failedAttempts)
                case .transport:
                    throw .transport(
                        lastTransportError ?? TransportError(kind: .other, code: 0, message: "\(failure)"),
                        attempts: state.failedAttempts)
                }
            }
        }
    }

    /// Checks that `gateway` shows the bucket's identity before it carries a request (with
    /// more than one gateway, or the identity known), once per gateway and process: it reads
    /// ``S3Gateways/markerKey`` through it (``S3Gateways/settle(_:shows:)``). It never writes
    /// the marker: only ``writeMarker(through:)`` does, for a destination identified as having
    /// none (``GatewayMembership/needsMarker``). One attempt: a gateway that does not answer
    /// is marked down, and its error thrown (the request goes on through the next gateway).
    /// An answer that is an error fails the request that asked; the requests that waited for
    /// the check run it again.
    private func checkBucketIdentity(of gateway: S3Gateways.Gateway) async throws(S3ClientError) {
        let failure = Mutex<S3ClientError?>(nil)
        await gateways.checkOnce(gateway) { [self] in
            do throws(S3ClientError) {
                let shown = try await readMarker(through: gateway)
                if let learned = gateways.settle(gateway, shows: shown) { gateways.identified(learned) }
            } catch {
                if case .transport(let problem, _) = error, Self.isGatewayFailure(problem.kind) {
                    gateways.markDown(gateway, reason: problem.message.isEmpty ? "\(problem.kind)" : problem.message)
                }
                failure.withLock { $0 = error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// The bytes of ``S3Gateways/markerKey`` through `gateway`; nil when it answers 404.
    private func readMarker(through gateway: S3Gateways.Gateway) async throws(S3ClientError) -> [UInt8]? {
        let response = try await perform(
            "GET", key: S3Gateways.markerKey, policy: .once, notFoundIsAnswer: true, through: gateway)
        return response.status == 404 ? nil : response.body
    }

    /// What `gateway` alone shows of the bucket (``MarkerSight``): one `GetObject` of
    /// ``S3Gateways/markerKey``, one attempt, no failover. A 404 is no marker, or no bucket
    /// when its code says `NoSuchBucket`; a failure is no answer.
    public func sight(through gateway: S3Gateways.Gateway) async -> MarkerSight {
        do {
            let response = try await perform(
                "GET", key: S3Gateways.markerKey, policy: .once, notFoundIsAnswer: true, through: gateway)
            guard response.status == 404 else { return .marker(response.body) }
            let error = S3Error.parse(status: response.status, body: Data(response.body))
            return error?.code == .noSuchBucket ? .noBucket : .noMarker
        } catch {
            return .noAnswer("\(error)")
        }
    }

    /// What each of `urls` (gateways of this destination's bucket) shows, in order, each
    /// asked alone: the facts ``GatewayMembership`` decides on.
    public func sights(of urls: [String]) async throws(S3AddressError) -> [MarkerSight] {
        var sights: [MarkerSight] = []
        for url in urls {
            let gateway = S3Gateways.Gateway(url: url, endpoint: try S3Endpoint(url))
            sights.append(await sight(through: gateway))
        }
        return sights
    }

    /// Writes a new bucket id (a random UUID) at ``S3Gateways/markerKey`` through the gateway
    /// at `url` under `If-None-Match: *`, and returns the id the bucket has then: ours, or,
    /// after a `412` (another station won), the one read back.
    public func writeMarker(through url: String) async throws(S3ClientError) -> [UInt8] {
        let gateway: S3Gateways.Gateway
        do { gateway = S3Gateways.Gateway(url: url, endpoint: try S3Endpoint(url)) } catch { throw .request("\(error)") }
        let id = Array(UUID().uuidString.lowercased().utf8)
        do {
            _ = try await perform(
                "PUT", key: S3Gateways.markerKey, headers: [SigV4Header("If-None-Match", "*")], body: .bytes(id),
                payloadHash: PayloadHash(sha256Of: id), policy: .control, through: gateway)
            return id
        } catch where error.isPreconditionFailed {
            guard let won = try await readMarker(through: gateway) else {
                throw .unexpectedAnswer(status: 412, detail: "\(S3Gateways.markerKey) refused as present, then not found")
            }
            return won
        }
    }

    /// What `gateway` alone shows, for `ingest check`: whether the bucket exists there
    /// (`HeadBucket`), and its identity marker (nil when absent or the bucket is not there).
    /// One attempt each, without failover.
    public func probe(_ gateway: S3Gateways.Gateway) async throws(S3ClientError) -> (exists: Bool, bucketID: [UInt8]?) {
        let head = try await perform("HEAD", key: "", policy: .once, notFoundIsAnswer: true, through: gateway)
        guard head.status != 404 else { return (false, nil) }
        return (true, try await readMarker(through: gateway))
    }
}
