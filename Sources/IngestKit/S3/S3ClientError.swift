// Why an S3 request failed for good, and what a failure says about the request.

/// Why an S3 request failed for good (after the retries its policy allows). Each case says
/// what to do.
public enum S3ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered with an error that retrying does not fix.
    case server(S3Error, attempts: Int)
    /// No answer: the endpoint is unreachable or the connection kept failing.
    case transport(TransportError, attempts: Int)
    /// The upload is unknown to the server (aborted, expired, or already completed).
    case uploadGone(S3Error)
    case credentials(CredentialsError)
    case request(String)
    /// The server answered something this client cannot read.
    case unexpectedAnswer(status: Int, detail: String)
    /// Every gateway left shows another bucket than the destination's (another cluster).
    case foreignBucket(String)

    public var description: String {
        switch self {
        case let .server(error, attempts): "\(error)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .transport(error, attempts): "\(error)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case .uploadGone(let error): "the multipart upload is gone from the server (\(error.code?.rawValue ?? "NoSuchUpload")): a new one is started"
        case .credentials(let error): "\(error)"
        case .request(let problem): "cannot build the request: \(problem)"
        case let .unexpectedAnswer(status, detail): "the server's answer (HTTP \(status)) cannot be read: \(detail)"
        case .foreignBucket(let refusals): "no gateway of the bucket may be used: \(refusals)"
        }
    }
}

extension S3ClientError {
    /// The request was cut: the process is stopping (``CurlTransport/cut()``).
    public var isCut: Bool {
        if case .transport(let error, _) = self, error.kind == .cut { return true }
        return false
    }

    /// The server computed another digest of the body than the one sent (`BadDigest`).
    var isBadDigest: Bool {
        if case .server(let error, _) = self, error.code == .badDigest { return true }
        return false
    }

    /// A conditional write found the key taken (`412 PreconditionFailed`).
    public var isPreconditionFailed: Bool {
        if case .server(let error, _) = self, error.code == .preconditionFailed || error.status == 412 { return true }
        return false
    }
}
