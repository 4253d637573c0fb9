// The tus client's request loop: every request is sent, judged and retried here.

import Foundation

extension TusClient {
    /// Sends one request to `url` (on the creation URL's server), retrying as `policy`
    /// decides; returns a 2xx answer, or one whose status is in `answers` (a 404 the
    /// operation reads as "gone").
    func perform(
        _ method: String, url: String, headers: [(name: String, value: String)] = [], body: HTTPBody = .empty,
        policy: RetryPolicy = .control, answers: Set<Int> = [], isPayload: Bool = false
    ) async throws(TusError) -> HTTPResponse {
        try endpoint.checkSameServer(url)
        let request = HTTPRequest(
            method: method, url: url, headers: [("Tus-Resumable", Self.protocolVersion)] + headers + extraHeaders,
            body: body, isPayload: isPayload)
        var state = RetryState()
        while true {
            let kind: FailureKind
            // The error to throw if this failure ends the request, given the attempts made.
            let failure: (_ attempts: Int) -> TusError
            do {
                let response = try await transport.send(request)
                if (200..<300).contains(response.status) || answers.contains(response.status) { return response }
                kind = Self.failureKind(status: response.status)
                let detail = Self.excerpt(of: response.body, hiding: extraHeaders)
                failure = { .server(status: response.status, detail: detail, attempts: $0) }
            } catch {
                if case .bodyUnreadable = error.kind { throw .transport(error, attempts: state.failedAttempts + 1) }
                kind = RetryPolicy.classify(.transport(error.kind))
                failure = { .transport(error, attempts: $0) }
            }

            let decision = policy.decide(afterFailureOf: kind, state: &state, random: Double.random(in: 0..<1))
            logger.debug(
                "tus request failed",
                metadata: [
                    "method": "\(method)", "url": "\(url)", "failure": "\(failure(state.failedAttempts))",
                    "decision": "\(decision)",
                ])
            switch decision {
            case .retry(let delay):
                await transport.pause(for: delay)  // cut short by a stop: the next attempt is cut too
            case .rereadPartAndRetry:
                break  // the chunk is read from disk again on the next attempt
            case .correctClockAndRetry, .refreshCredentialsAndRetry, .restartUpload, .fail:
                // tus signs nothing and has no credentials to refresh: the kinds that ask for a
                // clock correction, a refresh or a new upload are never given here. The rest
                // is a failure for good.
                throw failure(state.failedAttempts)
            }
        }
    }

    /// What an error status of a tus server means for retrying it:
    /// - `423 Locked`: another request holds the upload's lock (tusd answers it while an
    ///   earlier PATCH of the upload is still open, a broken one it has not noticed yet);
    ///   the lock is released within seconds: transient.
    /// - `460 Checksum Mismatch`: the bytes the server received are not those the checksum
    ///   covers; sent again once, read from disk again (as S3's `BadDigest`).
    /// - 408, 500, 502, 503, 504 transient, 429 throttled, as for S3.
    /// - Everything else is permanent: a 4xx says the request is wrong and resending cannot
    ///   change that (404, 409 and 410 are answers the operations read before this).
    static func failureKind(status: Int) -> FailureKind {
        switch status {
        case 423, 408, 500, 502, 503, 504: .transient
        case 429: .throttled
        case 460: .corruptedBody
        default: .permanent
        }
    }

    /// The start of an error answer's body, for the error's text: one line of at most 200
    /// characters, with every word of `headers`' values of 8 characters or more replaced,
    /// before the cut, by `<redacted>`; a server that echoes the request's headers must not
    /// put the bearer token into our logs.
    static func excerpt(of body: [UInt8], hiding headers: [(name: String, value: String)]) -> String {
        var text = String(decoding: body, as: UTF8.self)
        let secrets = headers.flatMap { $0.value.split(whereSeparator: \.isWhitespace) }.filter { $0.count >= 8 }
        for secret in secrets.sorted(by: { $0.count > $1.count }) {
            text = text.replacingOccurrences(of: String(secret), with: "<redacted>")
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
        return line.count > 200 ? String(line.prefix(200)) + "…" : line
    }
}
