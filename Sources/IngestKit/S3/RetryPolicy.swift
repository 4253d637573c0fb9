import Foundation

/// One failed attempt at a request: no answer, or an answer that is an error.
public enum AttemptFailure: Sendable, Equatable {
    /// No answer came: how the transport failed (see ``TransportError``).
    case transport(TransportError.Kind)
    /// An error response, as ``S3Error/parse(status:body:)`` read it, with the response's
    /// `Date` header (for correcting the clock on `RequestTimeTooSkewed`).
    case response(S3Error, dateHeader: String?)

    /// The failure a response stands for, or nil when it is a success (a 2xx whose body is
    /// not an `<Error>` document).
    public static func response(status: Int, body: Data, dateHeader: String?) -> AttemptFailure? {
        S3Error.parse(status: status, body: body).map { .response($0, dateHeader: dateHeader) }
    }
}

/// What a failed attempt means, before counting attempts.
public enum FailureKind: Sendable, Equatable {
    /// Likely to succeed if sent again after a pause: 5xx, timeouts, resets.
    case transient
    /// The server asks us to send less: `SlowDown`, throttling codes, HTTP 429.
    case throttled
    /// Our clock is too far from the server's for the signature to be accepted.
    case clockSkew
    /// The session token has expired: fresh credentials are needed.
    case expiredCredentials
    /// The multipart upload no longer exists (`NoSuchUpload`): aborted or expired.
    case uploadGone
    /// The server received bytes that do not match the digest we sent (`BadDigest`).
    case corruptedBody
    /// Sending it again cannot help: the request, the credentials or the setup is wrong.
    case permanent
}

/// What to do after a failed attempt.
public enum RetryDecision: Sendable, Equatable {
    /// Send the same request again after waiting this long.
    case retry(after: Duration)
    /// Add `offset` to the local clock for signing (server − local), then send again now.
    case correctClockAndRetry(offset: Duration)
    /// Obtain fresh credentials (re-run `credential_process`, re-read the files), sign
    /// again and send again now.
    case refreshCredentialsAndRetry
    /// Read the part again from disk, compute its digest again, and send it again now.
    case rereadPartAndRetry
    /// The multipart upload is gone: start a new one. This request is not retried. (After a
    /// `CompleteMultipartUpload` whose first attempt got no answer, `NoSuchUpload` can mean
    /// that attempt succeeded: the uploader checks for the object before starting again.)
    case restartUpload
    /// Stop, and report the last error.
    case fail(FailReason)
}

/// Why a request is given up.
public enum FailReason: Sendable, Equatable {
    /// The failure is of a kind that sending again cannot fix.
    case notRetryable
    /// The one recovery allowed for this kind of failure (a clock correction, a credential
    /// refresh, a re-read of the part) was already made, and the same failure came back.
    case recoveryDidNotHelp
    /// Every attempt of the budget failed.
    case attemptsExhausted(attempts: Int)
}

/// What has happened so far to one request, kept by the caller across its attempts and
/// updated by ``RetryPolicy/decide(after:state:random:now:)``.
public struct RetryState: Sendable, Equatable {
    /// Attempts that failed so far.
    public internal(set) var failedAttempts = 0
    public internal(set) var clockCorrected = false
    public internal(set) var credentialsRefreshed = false
    public internal(set) var partReread = false

    public init() {}
}

/// How persistently one kind of request is retried: a fixed budget of attempts, with
/// capped exponential backoff and full jitter (``Backoff``) between them.
///
/// The rules, the same for every policy:
///
/// - Retried with backoff: HTTP 500, 502, 503, 504, 408 and 429; the codes `InternalError`,
///   `ServiceUnavailable`, `RequestTimeout`, `SlowDown` and the throttling codes; an
///   `<Error>` inside a 2xx response whose code is not one of the named ones (S3 sends it
///   when `CompleteMultipartUpload` fails after answering 200, and says to retry); and the
///   transport failures `connectionReset`, `timedOut`, `connectionRefused` and `other`.
///   A refused connection is retried because an S3-compatible server on the local network
///   refuses connections for the few seconds it takes to restart; a wrong port exhausts
///   the budget quickly and then says what to check. An unrecognised transport failure is
///   most likely the network too, and the budget bounds what retrying it costs.
/// - Failed at once: every other status (3xx, 4xx, 5xx: 501 `NotImplemented` too), every
///   other named code, and the transport failures that do not mend themselves within the
///   seconds a retry waits: `couldNotResolveHost` (a typo in the endpoint, or no network
///   at all), `tls` (an untrusted or mismatched certificate, a wrong clock) and `plainHTTP`
///   (an `https://` endpoint whose server speaks plain http). Retrying them would hide the
///   cause for a minute and then fail anyway; the file stays pending and the next run tries
///   again.
/// - `RequestTimeTooSkewed`: correct the clock from the response's `Date` header (or the
///   body's `<ServerTime>`) and retry at once, once per request; without either, fail.
/// - `ExpiredToken`: refresh the credentials and retry at once, once per request.
/// - `BadDigest` / `XAmzContentSHA256Mismatch`: the server got other bytes than those we
///   hashed, because they changed in flight or the staged file changed on disk. Resending
///   the same buffer would repeat the mismatch or, worse, upload whatever changed; so the
///   part is read again from disk, hashed again and resent, once per request. A second
///   mismatch means something keeps corrupting data (memory, disk, a middlebox) or the
///   staged file keeps changing: fail, and let a person look.
/// - `NoSuchUpload`: not retried; the uploader starts a new upload.
///
/// Every decision to send again spends one attempt of the budget; when a retryable failure
/// uses the last one, the request fails with that failure as its error.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first one included; at least 1.
    public let maxAttempts: Int
    /// The ceiling of the first retry's wait; it doubles for each further retry.
    public let base: Duration
    /// The largest ceiling of any wait.
    public let cap: Duration

    /// A policy. A `maxAttempts` below 1 counts as 1 and negative durations as zero, so
    /// a bad configuration value cannot make a policy that never sends or never stops.
    public init(maxAttempts: Int, base: Duration, cap: Duration) {
        self.maxAttempts = max(1, maxAttempts)
        self.base = max(.zero, base)
        self.cap = max(.zero, cap)
    }

    /// For small requests (create, complete, list, head, abort): 5 attempts, waits from
    /// 100 ms doubling up to 5 s. They are cheap to resend and a run waits on them, so the
    /// budget is short: at most 1.5 s of waiting in all (0.1 + 0.2 + 0.4 + 0.8 s ceilings),
    /// about 0.75 s on average.
    public static let control = RetryPolicy(maxAttempts: 5, base: .milliseconds(100), cap: .seconds(5))

    /// For part uploads: 8 attempts, waits from 500 ms doubling up to 20 s. A part is up to
    /// gigabytes already read, and a failed part holds up its whole file, so it rides out a
    /// longer outage: at most 51.5 s of waiting in all (0.5 + 1 + 2 + 4 + 8 + 16 + 20 s
    /// ceilings), about 26 s on average.
    public static let part = RetryPolicy(maxAttempts: 8, base: .milliseconds(500), cap: .seconds(20))
    /// One attempt: for a caller whose own loop decides how to retry (a tus chunk, resent
    /// from the server's offset).
    public static let once = RetryPolicy(maxAttempts: 1, base: .zero, cap: .zero)

    /// What a failure means, by the rules in the type's documentation. Named codes decide
    /// first; a response without a code, or with a code not named, is judged by its status.
    public static func classify(_ failure: AttemptFailure) -> FailureKind {
        switch failure {
        case let .transport(failure):
            switch failure {
            case .connectionReset, .connectionFailed, .timedOut, .other: return .transient
            case .hostNotFound, .tls, .plainHTTP, .bodyUnreadable, .optionRefused, .cut: return .permanent
            }
        case let .response(error, _):
            if let code = error.code, let kind = kind(of: code) { return kind }
            return kind(ofStatus: error.status)
        }
    }

    /// The kind a named code implies, or nil for a code that is not named.
    private static func kind(of code: S3ErrorCode) -> FailureKind? {
        if code.isThrottling { return .throttled }
        switch code {
        case .requestTimeTooSkewed: return .clockSkew
        // A server may forget a temporary key the moment it expires and answer
        // InvalidAccessKeyId for a request signed just before: worth one refresh (a static key
        // comes back the same, and the request then fails as before).
        case .expiredToken, .invalidAccessKeyId: return .expiredCredentials
        case .noSuchUpload: return .uploadGone
        case .badDigest, .xAmzContentSHA256Mismatch: return .corruptedBody
        case .requestTimeout, .internalError, .serviceUnavailable, .conditionalRequestConflict: return .transient
        case .unknown: return nil
        default: return .permanent
        }
    }

    private static func kind(ofStatus status: Int) -> FailureKind {
        switch status {
        case 200...299: .transient  // an <Error> sent after the 200: S3 says retry
        case 429: .throttled
        case 408, 500, 502, 503, 504: .transient
        default: .permanent
        }
    }

    /// Decides what to do after a failed attempt, and records it in `state`.
    ///
    /// - Parameters:
    ///   - failure: how the attempt failed.
    ///   - state: the request's history; start each request with a fresh ``RetryState``.
    ///   - random: uniform in [0, 1), places the backoff inside its range (see ``Backoff``).
    ///   - now: the local time the response arrived, for a clock correction.
    public func decide(
        after failure: AttemptFailure, state: inout RetryState, random: Double, now: Date
    ) -> RetryDecision {
        decide(afterFailureOf: Self.classify(failure), state: &state, random: random) {
            guard case let .response(error, dateHeader) = failure else { return nil }
            return dateHeader.flatMap({ ServerClock.offset(dateHeader: $0, local: now) })
                ?? error.serverTime.map({ ServerClock.offset(server: $0, local: now) })
        }
    }

    /// Decides what to do after a failed attempt whose kind the caller has already judged,
    /// and records it in `state`: the same budget, backoff and one-time recoveries as
    /// ``decide(after:state:random:now:)``, for a protocol whose error answers are not S3's
    /// (tus: the ``TusClient`` classifies its own statuses, and a transport failure with
    /// ``classify(_:)``).
    ///
    /// - Parameter serverClockOffset: for a ``FailureKind/clockSkew``, the server's time
    ///   minus ours, or nil when the failure does not say (the request then fails).
    public func decide(
        afterFailureOf kind: FailureKind, state: inout RetryState, random: Double,
        serverClockOffset: () -> Duration? = { nil }
    ) -> RetryDecision {
        state.failedAttempts += 1
        switch kind {
        case .permanent: return .fail(.notRetryable)
        case .uploadGone: return .restartUpload
        default: break
        }
        guard state.failedAttempts < maxAttempts else {
            return .fail(.attemptsExhausted(attempts: state.failedAttempts))
        }
        switch kind {
        case .transient, .throttled:
            let wait = Backoff.delay(attempt: state.failedAttempts, base: base, cap: cap, random: random)
            return .retry(after: wait)
        case .clockSkew:
            guard !state.clockCorrected else { return .fail(.recoveryDidNotHelp) }
            guard let offset = serverClockOffset() else { return .fail(.notRetryable) }
            state.clockCorrected = true
            return .correctClockAndRetry(offset: offset)
        case .expiredCredentials:
            guard !state.credentialsRefreshed else { return .fail(.recoveryDidNotHelp) }
            state.credentialsRefreshed = true
            return .refreshCredentialsAndRetry
        case .corruptedBody:
            guard !state.partReread else { return .fail(.recoveryDidNotHelp) }
            state.partReread = true
            return .rereadPartAndRetry
        case .permanent, .uploadGone:
            return .fail(.notRetryable)  // handled above; kept for exhaustiveness
        }
    }

    /// ``decide(after:state:random:now:)`` with the random number drawn from `generator`.
    public func decide(
        after failure: AttemptFailure, state: inout RetryState,
        using generator: inout some RandomNumberGenerator, now: Date
    ) -> RetryDecision {
        decide(after: failure, state: &state, random: Double.random(in: 0..<1, using: &generator), now: now)
    }
}
