/// What a request sends as its body.
public enum HTTPBody: Sendable, Equatable {
    case empty
    case bytes([UInt8])
    /// A byte range of a file, streamed from disk as it is sent: a 64 MiB part is never
    /// held in memory.
    case file(path: String, offset: Int64, length: Int64)

    /// The body from its byte `offset` on.
    public func suffix(from offset: Int64) -> HTTPBody {
        precondition((0...length).contains(offset), "a body's suffix starts within it")
        guard offset > 0 else { return self }
        switch self {
        case .empty: return .empty
        case .bytes(let bytes): return .bytes(Array(bytes[Int(offset)...]))
        case let .file(path, start, length): return .file(path: path, offset: start + offset, length: length - offset)
        }
    }

    public var length: Int64 {
        switch self {
        case .empty: 0
        case .bytes(let bytes): Int64(bytes.count)
        case .file(_, _, let length): length
        }
    }
}

public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    public var url: String
    /// Sent in this order; names as given.
    public var headers: [(name: String, value: String)]
    public var body: HTTPBody
    /// The body is a file's content being uploaded (a part, a single PUT): counted by the
    /// transport's ``WireMeter`` as it is sent.
    public var isPayload: Bool
    /// Send `Expect: 100-continue` and hold the body until the server says to go on (or a
    /// short wait passes): a server that refuses the request on its headers (a conditional
    /// write to a key taken, 412) is spared the body. Other requests send the body at once.
    public var expectContinue: Bool

    public init(
        method: String, url: String, headers: [(name: String, value: String)] = [], body: HTTPBody = .empty,
        isPayload: Bool = false, expectContinue: Bool = false
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.isPayload = isPayload
        self.expectContinue = expectContinue
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.url == b.url && a.body == b.body && a.isPayload == b.isPayload
            && a.expectContinue == b.expectContinue
            && a.headers.map { [$0.name, $0.value] } == b.headers.map { [$0.name, $0.value] }
    }
}

public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    /// Header names lowercased; a header sent twice has its values joined with ", ".
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public subscript(header name: String) -> String? { headers[name.lowercased()] }
}

/// A request that got no HTTP answer. Every case says what went wrong on the way.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Nothing answered at that address (refused, unreachable).
        case connectionFailed
        /// The connection broke mid-request or mid-answer (reset, closed, nothing received).
        case connectionReset
        /// No progress for longer than the timeouts allow.
        case timedOut
        case hostNotFound
        /// The TLS handshake or the server's certificate failed.
        case tls
        /// An `https://` URL reached a server that answered the TLS handshake in plain
        /// HTTP (OpenSSL's "wrong version number"): the endpoint's scheme is wrong, and
        /// sending again cannot fix it. `server` is the URL's `host:port`.
        case plainHTTP(server: String)
        /// The body could not be read from disk.
        case bodyUnreadable(SystemError)
        /// libcurl refused an option the transport sets: its build lacks a feature, or a
        /// setting is out of the option's range. Never worth retrying.
        case optionRefused
        /// Cut because the process is stopping (``CurlTransport/cut()``): not retried; what
        /// it carried is sent again by the run that resumes.
        case cut
        case other
    }

    public var kind: Kind
    /// libcurl's error code (CURLcode), for logs.
    public var code: Int32
    public var message: String

    public var description: String {
        let remedy: String =
            switch kind {
            case .connectionFailed:
                "nothing accepted the connection; retried briefly in case the server is restarting, "
                    + "otherwise check the endpoint URL (host and port) and that the server is running"
            case .connectionReset:
                "the connection broke before the answer was complete; retried, "
                    + "if it persists check the network or any proxy in between"
            case .timedOut: "the server did not answer in time; retried, if it persists check the network"
            case .hostNotFound: "the endpoint's host name does not resolve; check the endpoint URL and DNS"
            case .plainHTTP(let server):
                "the server at https://\(server) speaks plain http, not https: use http://\(server) in the endpoint"
            case .tls:
                "the TLS handshake failed; check the endpoint URL (https or http, host name), "
                    + "the trusted CA certificates, and this machine's clock"
            case .bodyUnreadable: "the staged file could not be read; check the staging disk"
            case .cut: "ingest is stopping; what the request carried is sent again when the upload resumes"
            case .optionRefused:
                "the libcurl this machine loads lacks a feature ingest needs, or a transport setting is out of range; "
                    + "install the libcurl ingest was built against (the libcurl4 package) and check the [s3] settings"
            case .other: "retried, if it persists check the network"
            }
        // What the person must change comes first when it is all they need to know.
        if case .plainHTTP = kind { return "\(remedy) (curl error \(code): \(message))" }
        return "\(message) (curl error \(code)): \(remedy)"
    }
}

/// One line of a response's head as libcurl hands it over, line ending included, parsed on
/// its bytes (a few per response, for every request: Foundation's trimming showed as a
/// visible share of the CPU of a card of small files).
enum ResponseHeadLine: Equatable {
    /// `HTTP/…`: a response begins (again, after a `100 Continue`).
    case status
    /// `Name: value`, the name lowercased, both trimmed of spaces and tabs.
    case field(name: String, value: String)
    /// Anything else: the blank line that ends the head, a line without a colon.
    case other

    init(_ bytes: UnsafeRawBufferPointer) {
        let line = Self.trimmed(bytes[...])
        if line.starts(with: "HTTP/".utf8) {
            self = .status
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            let name = Self.trimmed(line[..<colon]).map(asciiLowercased)
            self = .field(
                name: String(decoding: name, as: UTF8.self),
                value: String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self))
        } else {
            self = .other
        }
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        var (start, end) = (bytes.startIndex, bytes.endIndex)
        while start < end, blank(bytes[start]) { start += 1 }
        while end > start, blank(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }
}
