// Why a tus request failed for good, or why its answer cannot be trusted.

/// Why a tus request failed (after the retries its policy allows), or why the server's
/// answer was refused. Each case says what went wrong and what to do.
///
/// No case carries a request header: the extra headers given to the ``TusClient``
/// (`Authorization: Bearer …`) are secrets, and an error ends up in logs and reports. A
/// server's error text is carried only as ``TusClient`` redacted it.
public enum TusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The creation URL is not one this client sends to.
    case invalidCreationURL(reason: String)
    /// An extra header whose name is not an HTTP token or whose value holds a line break.
    case invalidHeader(name: String)
    /// A request would go to another server than the creation URL's (`origin` is the other
    /// one's `scheme://host:port`).
    case foreignServer(origin: String)
    /// A metadata key the protocol does not allow (empty, not ASCII, a space or a comma).
    case invalidMetadataKey(String)
    /// The server answered 409 to a PATCH: the upload's offset on the server is not `sent`.
    case offsetMismatch(sent: Int64)
    /// The upload is unknown to the server (HTTP 404 or 410): expired, terminated, or never
    /// created there.
    case uploadGone(status: Int)
    /// The server computed another checksum of the chunk than the one sent (HTTP 460), again
    /// after the chunk was read from disk and sent once more.
    case checksumMismatch(algorithm: String)
    /// The server answered with an error that retrying does not fix (or that persisted).
    case server(status: Int, detail: String, attempts: Int)
    /// No answer: the server is unreachable or the connection kept failing.
    case transport(TransportError, attempts: Int)
    /// The server answered something this client does not trust or cannot read.
    case unexpectedAnswer(status: Int, detail: String)

    public var description: String {
        switch self {
        case .invalidCreationURL(let reason):
            "the tus creation URL \(reason): give the endpoint as https://HOST/PATH/ (or http:// where plain HTTP is allowed)"
        case .invalidHeader(let name):
            "the tus header \"\(name)\" cannot be sent: its name must be an HTTP token and its value one line; "
                + "check the destination's headers"
        case .foreignServer(let origin):
            "the tus server pointed a request to another server (\(origin)) than the creation URL's: refused, "
                + "so that no file content or credentials go elsewhere; check the server's configuration "
                + "(behind a proxy: the host and scheme it reports)"
        case .invalidMetadataKey(let key):
            "the tus metadata key \"\(key)\" is not allowed: keys are non-empty ASCII without spaces or commas"
        case .offsetMismatch(let sent):
            "the tus server holds another offset than \(sent) for the upload (HTTP 409): "
                + "ask it with HEAD and continue from its offset"
        case .uploadGone(let status):
            "the tus upload is gone from the server (HTTP \(status)): it expired or was terminated; a new upload is needed"
        case .checksumMismatch(let algorithm):
            "the tus server received other bytes than those the \(algorithm) checksum covers (HTTP 460), twice: "
                + "the staged file changes or something corrupts data in transit; check the staging disk and the network"
        case let .server(status, detail, attempts):
            "the tus server answered HTTP \(status)" + (detail.isEmpty ? "" : " (\(detail))") + ": "
                + Self.remedy(status: status) + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .transport(error, attempts):
            "\(error)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .unexpectedAnswer(status, detail):
            "the tus server's answer (HTTP \(status)) cannot be trusted: \(detail); check that the endpoint is a tus 1.0 server"
        }
    }

    /// What to do about an error status, by what the protocol (and HTTP) make it mean.
    private static func remedy(status: Int) -> String {
        switch status {
        case 401, 403: "the server refuses the credentials; check the token in the destination's headers"
        case 412: "the server does not speak tus 1.0.0; use a tus 1.0 endpoint"
        case 413: "the file is larger than the server accepts (its Tus-Max-Size)"
        case 415: "the server refuses the chunk's content type; check that the endpoint is a tus 1.0 server"
        case 423: "the upload stayed locked by another request; retry later"
        case 400..<500: "the server refuses the request; check the creation URL and the server's log"
        default: "the server failed; retried, if it persists check the server and its log"
        }
    }
}
