import Foundation
import Testing

@testable import IngestKit

/// A failed response with this status and, when given, an `<Error>` body with this code,
/// read the way the client reads responses.
private func response(_ status: Int, _ code: String? = nil, date: String? = nil, extra: String = "")
    -> AttemptFailure
{
    let body = code.map { "<Error><Code>\($0)</Code><Message>m</Message>\(extra)</Error>" } ?? ""
    guard let failure = AttemptFailure.response(status: status, body: Data(body.utf8), dateHeader: date) else {
        Issue.record("HTTP \(status) \(code ?? "") was read as a success")
        return .transport(.other)
    }
    return failure
}

@Suite struct RetryPolicyTests {
    static let rfcDate = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let rfcDateSeconds: TimeInterval = 784_111_777
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    private func firstDecision(_ failure: AttemptFailure, policy: RetryPolicy = .control, now: Date = now)
        -> RetryDecision
    {
        var state = RetryState()
        return policy.decide(after: failure, state: &state, random: 0.5, now: now)
    }

    /// The next decision for a request with history `state`.
    private func decide(
        _ failure: AttemptFailure, _ state: inout RetryState, policy: RetryPolicy = .control, random: Double = 0.5
    ) -> RetryDecision {
        policy.decide(after: failure, state: &state, random: random, now: Self.now)
    }

    // MARK: classification: the table of rules

    @Test(arguments: [
        // Transport failures: resets, timeouts and refusals mend; DNS and TLS do not within seconds.
        (AttemptFailure.transport(.connectionReset), FailureKind.transient),
        (.transport(.timedOut), .transient),
        (.transport(.connectionFailed), .transient),
        (.transport(.other), .transient),
        (.transport(.hostNotFound), .permanent),
        (.transport(.tls), .permanent),
        (.transport(.plainHTTP(server: "127.0.0.1:8333")), .permanent),
        // Statuses without a code.
        (response(500), .transient),
        (response(502), .transient),
        (response(503), .transient),
        (response(504), .transient),
        (response(408), .transient),
        (response(429), .throttled),
        (response(501), .permanent),
        (response(505), .permanent),
        (response(400), .permanent),
        (response(401), .permanent),
        (response(403), .permanent),
        (response(404), .permanent),
        (response(405), .permanent),
        (response(409), .permanent),
        (response(412), .permanent),
        (response(416), .permanent),
        (response(301), .permanent),
        // Codes that are retried, with the statuses S3 sends them with.
        (response(503, "SlowDown"), .throttled),
        (response(400, "Throttling"), .throttled),
        (response(400, "ThrottlingException"), .throttled),
        (response(503, "RequestThrottled"), .throttled),
        (response(429, "TooManyRequestsException"), .throttled),
        (response(400, "RequestTimeout"), .transient),
        (response(500, "InternalError"), .transient),
        (response(503, "ServiceUnavailable"), .transient),
        // Codes with their own recovery.
        (response(404, "NoSuchUpload"), .uploadGone),
        (response(400, "ExpiredToken"), .expiredCredentials),
        (response(403, "InvalidAccessKeyId"), .expiredCredentials),
        (response(403, "RequestTimeTooSkewed"), .clockSkew),
        (response(400, "BadDigest"), .corruptedBody),
        (response(400, "XAmzContentSHA256Mismatch"), .corruptedBody),
        // Codes that fail fast.
        (response(403, "AccessDenied"), .permanent),
        (response(403, "SignatureDoesNotMatch"), .permanent),
        (response(404, "NoSuchBucket"), .permanent),
        (response(404, "NoSuchKey"), .permanent),
        (response(400, "InvalidPart"), .permanent),
        (response(400, "InvalidPartOrder"), .permanent),
        (response(400, "EntityTooSmall"), .permanent),
        (response(400, "InvalidDigest"), .permanent),
        (response(400, "InvalidRequest"), .permanent),
        (response(501, "NotImplemented"), .permanent),
        // An <Error> inside a 200 (CompleteMultipartUpload): by its code, else retried.
        (response(200, "InternalError"), .transient),
        (response(200, "SlowDown"), .throttled),
        (response(200, "NoSuchUpload"), .uploadGone),
        (response(200, "SomethingNew"), .transient),
        // A code not named is judged by the status.
        (response(503, "SomethingNew"), .transient),
        (response(400, "SomethingNew"), .permanent),
    ])
    func eachFailureIsClassifiedByTheRules(failure: AttemptFailure, kind: FailureKind) {
        #expect(RetryPolicy.classify(failure) == kind)
    }

    @Test func aTruncatedErrorAfterA200IsRetried() throws {
        let failure = try #require(
            AttemptFailure.response(status: 200, body: Data("  <Error><Co".utf8), dateHeader: nil))
        #expect(RetryPolicy.classify(failure) == .transient)
    }

    @Test func aSuccessfulResponseIsNoFailure() {
        let body = Data("<CompleteMultipartUploadResult><ETag>\"x-2\"</ETag></CompleteMultipartUploadResult>".utf8)
        #expect(AttemptFailure.response(status: 200, body: body, dateHeader: Self.rfcDate) == nil)
    }

    // MARK: decisions after a first failure

    @Test(arguments: [
        AttemptFailure.transport(.connectionReset), .transport(.timedOut), response(503, "SlowDown"), response(500),
        response(429), response(400, "RequestTimeout"),
    ])
    func retryableFailuresWaitTheBackoffOfTheFirstRetry(failure: AttemptFailure) {
        // random 0.5 of the first ceiling: 100 ms for .control, 500 ms for .part.
        #expect(firstDecision(failure, policy: .control) == .retry(after: .milliseconds(50)))
        #expect(firstDecision(failure, policy: .part) == .retry(after: .milliseconds(250)))
    }

    @Test(arguments: [
        AttemptFailure.transport(.hostNotFound), .transport(.tls), response(403, "AccessDenied"),
        response(404, "NoSuchBucket"), response(400, "InvalidPart"), response(404),
    ])
    func permanentFailuresFailAtOnce(failure: AttemptFailure) {
        #expect(firstDecision(failure) == .fail(.notRetryable))
    }

    @Test func noSuchUploadRestartsTheUploadInsteadOfRetrying() {
        #expect(firstDecision(response(404, "NoSuchUpload")) == .restartUpload)
    }

    @Test func anExpiredTokenRefreshesTheCredentialsOnce() {
        var state = RetryState()
        let expired = response(400, "ExpiredToken")
        #expect(decide(expired, &state, policy: .part) == .refreshCredentialsAndRetry)
        #expect(decide(expired, &state, policy: .part) == .fail(.recoveryDidNotHelp))
    }

    @Test func aBadDigestRereadsThePartOnceAndOnlyOnce() {
        var state = RetryState()
        let policy = RetryPolicy.part
        #expect(decide(response(400, "BadDigest"), &state, policy: policy) == .rereadPartAndRetry)
        // A reset in between does not renew the one re-read.
        #expect(decide(.transport(.connectionReset), &state, policy: policy, random: 0) == .retry(after: .zero))
        #expect(
            decide(response(400, "XAmzContentSHA256Mismatch"), &state, policy: policy)
                == .fail(.recoveryDidNotHelp))
    }

    // MARK: clock skew

    @Test func clockSkewIsCorrectedFromTheDateHeader() {
        let slow = Date(timeIntervalSince1970: Self.rfcDateSeconds - 1_200)  // our clock 20 minutes behind
        let decision = firstDecision(response(403, "RequestTimeTooSkewed", date: Self.rfcDate), now: slow)
        #expect(decision == .correctClockAndRetry(offset: .seconds(1_200)))
    }

    @Test func clockSkewFallsBackToTheBodysServerTime() {
        let failure = response(403, "RequestTimeTooSkewed", extra: "<ServerTime>2016-05-26T23:50:55Z</ServerTime>")
        let fast = Date(timeIntervalSince1970: 1_464_306_655 + 3_600)  // our clock an hour ahead
        #expect(firstDecision(failure, now: fast) == .correctClockAndRetry(offset: .seconds(-3_600)))
        let unreadable = response(
            403, "RequestTimeTooSkewed", date: "yesterday", extra: "<ServerTime>2016-05-26T23:50:55Z</ServerTime>")
        #expect(firstDecision(unreadable, now: fast) == .correctClockAndRetry(offset: .seconds(-3_600)))
    }

    @Test func clockSkewWithoutTheServersTimeFails() {
        #expect(firstDecision(response(403, "RequestTimeTooSkewed")) == .fail(.notRetryable))
    }

    @Test func aSecondClockSkewAfterACorrectionFails() {
        var state = RetryState()
        let skewed = response(403, "RequestTimeTooSkewed", date: Self.rfcDate)
        let offset = Duration.seconds(Self.rfcDateSeconds - Self.now.timeIntervalSince1970)
        #expect(decide(skewed, &state, policy: .control) == .correctClockAndRetry(offset: offset))
        #expect(decide(skewed, &state, policy: .control) == .fail(.recoveryDidNotHelp))
    }

    // MARK: the attempt budget

    @Test(arguments: [RetryPolicy.control, .part])
    func retryableFailuresFailWithTheLastErrorWhenTheBudgetIsSpent(policy: RetryPolicy) {
        var state = RetryState()
        var waits: [Duration] = []
        for attempt in 1..<policy.maxAttempts {
            let decision = policy.decide(after: response(503, "SlowDown"), state: &state, random: 0.999, now: Self.now)
            guard case let .retry(after: wait) = decision else {
                Issue.record("attempt \(attempt): \(decision)")
                return
            }
            #expect(wait <= Backoff.upperBound(attempt: attempt, base: policy.base, cap: policy.cap))
            waits.append(wait)
        }
        #expect(waits == waits.sorted())  // with the same random number, waits grow
        let last = decide(.transport(.timedOut), &state, policy: policy)
        #expect(last == .fail(.attemptsExhausted(attempts: policy.maxAttempts)))
        #expect(state.failedAttempts == policy.maxAttempts)
    }

    @Test func recoveriesSpendTheBudgetToo() {
        var state = RetryState()
        state.failedAttempts = RetryPolicy.control.maxAttempts - 1
        let decision = decide(response(400, "ExpiredToken"), &state, policy: .control)
        #expect(decision == .fail(.attemptsExhausted(attempts: 5)))
    }

    @Test func permanentFailuresAndNoSuchUploadAreReportedAsSuchWhateverTheBudget() {
        var state = RetryState()
        state.failedAttempts = 10
        #expect(decide(response(403), &state, policy: .control) == .fail(.notRetryable))
        #expect(decide(response(404, "NoSuchUpload"), &state, policy: .control) == .restartUpload)
    }

    @Test func aPolicyOfOneAttemptNeverRetries() {
        var state = RetryState()
        let once = RetryPolicy(maxAttempts: 1, base: .seconds(1), cap: .seconds(1))
        #expect(decide(response(500), &state, policy: once) == .fail(.attemptsExhausted(attempts: 1)))
    }

    @Test func impossiblePolicyValuesAreHeldToTheNearestSensibleOnes() {
        let policy = RetryPolicy(maxAttempts: -3, base: .seconds(-1), cap: .seconds(-2))
        #expect(policy.maxAttempts == 1)
        #expect(policy.base == .zero && policy.cap == .zero)
    }

    // MARK: the standard policies

    /// The values and the worst-case total wait their documentation states.
    @Test func theStandardPoliciesAreTheDocumentedOnes() {
        #expect(RetryPolicy.control == RetryPolicy(maxAttempts: 5, base: .milliseconds(100), cap: .seconds(5)))
        #expect(RetryPolicy.part == RetryPolicy(maxAttempts: 8, base: .milliseconds(500), cap: .seconds(20)))
        func worstTotal(_ policy: RetryPolicy) -> Duration {
            (1..<policy.maxAttempts).reduce(.zero) {
                $0 + Backoff.upperBound(attempt: $1, base: policy.base, cap: policy.cap)
            }
        }
        #expect(worstTotal(.control) == .milliseconds(1_500))
        #expect(worstTotal(.part) == .milliseconds(51_500))
    }

    @Test func drawingFromAGeneratorStaysWithinTheCeiling() {
        var generator = BackoffTestGenerator(state: 3)
        for _ in 0..<1_000 {
            var state = RetryState()
            let decision = RetryPolicy.part.decide(
                after: .transport(.connectionReset), state: &state, using: &generator, now: Self.now)
            guard case let .retry(after: wait) = decision else {
                Issue.record("\(decision)")
                return
            }
            #expect(wait >= .zero && wait <= .milliseconds(500))
        }
    }
}
