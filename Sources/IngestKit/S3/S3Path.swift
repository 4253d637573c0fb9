import Foundation

/// Percent-encoding as AWS Signature Version 4 and S3 define it (`UriEncode` in the S3 API
/// reference): every byte of the UTF-8 form is written `%XX` in upper-case hexadecimal except
/// the RFC 3986 unreserved characters `A-Z a-z 0-9 - . _ ~`.
///
/// It is stricter than RFC 3986 on purpose: `+`, `$`, `!`, `*` and the like are encoded too,
/// because S3 compares our canonical request with one it rebuilds from the wire, and a
/// character one side encodes and the other does not is a `SignatureDoesNotMatch`.
enum S3Encoding {
    /// `text` with everything but the unreserved characters percent-encoded, `/` included.
    static func percentEncoded(_ text: some StringProtocol) -> String {
        percentEncoded(text, keeping: nil)
    }

    /// A slash-separated path (an object key, say) with each segment encoded once and the
    /// slashes kept. Empty segments, `.` and `..` stay as they are: S3 keys are opaque strings
    /// and S3, unlike other AWS services, neither normalises nor double-encodes the path.
    static func encodedPath(_ path: some StringProtocol) -> String {
        // Byte by byte, `/` kept: splitting the key into segments and joining them again
        // cost 40,000 instructions a request.
        percentEncoded(path, keeping: UInt8(ascii: "/"))
    }

    private static func percentEncoded(_ text: some StringProtocol, keeping kept: UInt8?) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) || byte == kept {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `path` is already in the form ``encodedPath(_:)`` produces: it starts with `/`
    /// and holds only unreserved characters, `/` and `%XX` escapes in upper-case hex.
    static func isEncodedPath(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count,
                    isUpperHexDigit(bytes[index + 1]), isUpperHexDigit(bytes[index + 2])
                else { return false }
                index += 3
            } else if isUnreserved(byte) || byte == UInt8(ascii: "/") {
                index += 1
            } else {
                return false
            }
        }
        return true
    }

    /// Decodes a key from a listing asked for with `encoding-type=url`: S3 encodes it as HTML
    /// forms do, so `+` is a space and `%XX` one byte of the UTF-8 form (botocore decodes it
    /// with `unquote_plus` for the same reason). Nil when an escape is cut short or not hex,
    /// or the bytes are not UTF-8.
    static func formDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var input = text.utf8.makeIterator()
        while let byte = input.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = input.next().flatMap(hexValue), let low = input.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    private static func isUpperHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
}

/// One query parameter, unencoded. A `nil` value is a parameter without `=`, like `?uploads`:
/// it is sent as `uploads` and signed as `uploads=`, which is how S3 canonicalises it.
public struct S3QueryItem: Sendable, Hashable {
    public var name: String
    public var value: String?

    public init(_ name: String, _ value: String? = nil) {
        self.name = name
        self.value = value
    }

    /// The query string that is both sent and signed: names and values percent-encoded the
    /// SigV4 way, sorted by encoded name then encoded value, joined with `&`. Sending exactly
    /// the signed order leaves S3 nothing to canonicalise differently. Empty when there are
    /// no items.
    static func canonicalQuery(_ items: [S3QueryItem], valuelessAsEmpty: Bool = true) -> String {
        items.map { item in
            (name: S3Encoding.percentEncoded(item.name), value: item.value.map { S3Encoding.percentEncoded($0) })
        }
        .sorted { lhs, rhs in
            if lhs.name != rhs.name { return lhs.name.utf8.lexicographicallyPrecedes(rhs.name.utf8) }
            return (lhs.value ?? "").utf8.lexicographicallyPrecedes((rhs.value ?? "").utf8)
        }
        .map { item in
            if let value = item.value { return "\(item.name)=\(value)" }
            return valuelessAsEmpty ? "\(item.name)=" : item.name
        }
        .joined(separator: "&")
    }
}

/// Where the bucket name goes in a request URL.
public enum S3AddressingStyle: String, Sendable, CaseIterable, Codable {
    /// `https://endpoint/bucket/key`: works with every S3-compatible server and with any
    /// bucket name, and is what MinIO, SeaweedFS and most self-hosted servers expect.
    case path
    /// `https://bucket.endpoint/key`: what AWS prefers; needs a bucket name that is a valid
    /// DNS name and a server (and certificate) that answers for `*.endpoint`.
    case virtualHost = "virtual-host"
}

/// An S3 service endpoint as configured: scheme, host and port, nothing else.
public struct S3Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// `https` or `http`.
    public let scheme: String
    /// The host name in lower case, or an IP address (IPv6 in brackets, as in a URL).
    public let host: String
    /// The port when the URL names one that is not the scheme's default.
    public let port: Int?

    /// Parses `https://host[:port][/]`. The endpoint names the service only: a path, query,
    /// fragment or user name is refused rather than silently dropped, because a request
    /// signed for one path and sent to another fails in ways that are hard to trace.
    public init(_ url: String) throws(S3AddressError) {
        let text = url.trimmingCharacters(in: .whitespaces)
        let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw .invalidEndpoint(url, problem: "it has no scheme (write https://host)") }
        let scheme = parts[0].lowercased()
        guard scheme == "https" || scheme == "http" else {
            throw .invalidEndpoint(url, problem: "the scheme must be https or http, not '\(parts[0])'")
        }
        var authority = Substring(parts[1])
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.isEmpty else { throw .invalidEndpoint(url, problem: "it has no host") }
        if let bad = authority.first(where: { "/?#@ ".contains($0) }) {
            throw .invalidEndpoint(
                url, problem: "it may hold only scheme, host and port, but has '\(bad)' after the host")
        }

        let hostPart: Substring
        let portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw .invalidEndpoint(url, problem: "the IPv6 address has no closing ']'")
            }
            hostPart = authority[...close]
            let rest = authority[authority.index(after: close)...]
            if rest.isEmpty {
                portPart = nil
            } else if rest.hasPrefix(":") {
                portPart = rest.dropFirst()
            } else {
                throw .invalidEndpoint(url, problem: "unexpected '\(rest)' after the IPv6 address")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
            portPart = nil
        }
        guard !hostPart.isEmpty else { throw .invalidEndpoint(url, problem: "it has no host") }
        var port: Int?
        if let portPart {
            guard let number = Int(portPart), (1...65535).contains(number) else {
                throw .invalidEndpoint(url, problem: "the port '\(portPart)' is not a number from 1 to 65535")
            }
            port = number
        }
        if port == (scheme == "https" ? 443 : 80) { port = nil }
        self.scheme = scheme
        self.host = hostPart.lowercased()
        self.port = port
    }

    /// The `Host` header for a request to `host`: with `:port` only when it is not the default.
    func authority(host: String) -> String {
        if let port { return "\(host):\(port)" }
        return host
    }

    /// The host is this machine (`localhost`, 127.0.0.0/8, `[::1]`): plain HTTP never leaves it.
    public var isLoopback: Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// Plain HTTP to another host: anyone on the path can read and change what is sent.
    public var isPlainHTTPOverNetwork: Bool { scheme == "http" && !isLoopback }

    /// The host is an IP address, which cannot take a bucket name in front of it.
    var isIPAddress: Bool {
        host.hasPrefix("[") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }

    public var description: String { "\(scheme)://\(authority(host: host))" }
}

/// Where an S3 request goes: the `Host` header and the encoded path, built once so that what
/// is signed and what is sent on the wire cannot drift apart.
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    public let scheme: String
    /// The `Host` header value and URL authority: host, and `:port` when not the default.
    public let host: String
    /// The path exactly as sent and as signed (the canonical URI): each key segment
    /// percent-encoded once.
    public let path: String

    /// The location of `key` in `bucket` (an empty key addresses the bucket itself).
    ///
    /// Virtual-host style needs a bucket name that is one DNS label sequence in lower case
    /// and, over https, no dots (a dotted bucket name does not match the wildcard
    /// certificate); such buckets must use path style, and this throws saying so.
    public init(endpoint: S3Endpoint, bucket: String, key: String, style: S3AddressingStyle) throws(S3AddressError) {
        guard !bucket.isEmpty, !bucket.contains("/") else {
            throw .invalidBucket(bucket, problem: "a bucket name must not be empty or contain '/'")
        }
        let encodedKey = S3Encoding.encodedPath(key)
        scheme = endpoint.scheme
        switch style {
        case .path:
            host = endpoint.authority(host: endpoint.host)
            path = "/" + S3Encoding.percentEncoded(bucket) + (key.isEmpty ? "" : "/" + encodedKey)
        case .virtualHost:
            if endpoint.isIPAddress {
                throw .invalidBucket(
                    bucket, problem: "the endpoint \(endpoint) is an IP address, so the bucket cannot be a host name; "
                        + "use path-style addressing")
            }
            let dnsSafe = bucket.allSatisfy {
                ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "."
            }
            if !dnsSafe || bucket.hasPrefix("-") || bucket.hasSuffix("-") || bucket.hasPrefix(".")
                || bucket.hasSuffix(".") || bucket.contains("..") || bucket.count > 63
            {
                throw .invalidBucket(
                    bucket,
                    problem: "it is not a valid DNS name, so it cannot go in the host name; use path-style addressing")
            }
            if endpoint.scheme == "https", bucket.contains(".") {
                throw .invalidBucket(
                    bucket, problem: "a bucket name with dots does not match the server's TLS certificate "
                        + "in virtual-host style; use path-style addressing")
            }
            host = endpoint.authority(host: "\(bucket).\(endpoint.host)")
            path = "/" + encodedKey
        }
    }

    /// The full URL to hand to the HTTP client: the path as signed, and the query items in
    /// the signed order (valueless items written without `=`, as `?uploads`).
    public func url(query: [S3QueryItem] = []) -> String {
        let queryString = S3QueryItem.canonicalQuery(query, valuelessAsEmpty: false)
        return "\(scheme)://\(host)\(path)" + (queryString.isEmpty ? "" : "?" + queryString)
    }

    public var description: String { url() }
}

/// A bucket or endpoint that cannot address S3. Each message says which value and what to do.
public enum S3AddressError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidEndpoint(String, problem: String)
    case invalidBucket(String, problem: String)

    public var description: String {
        switch self {
        case let .invalidEndpoint(url, problem):
            "invalid S3 endpoint '\(url)': \(problem). Write it as https://host or https://host:port."
        case let .invalidBucket(bucket, problem):
            "cannot address bucket '\(bucket)': \(problem)."
        }
    }
}
