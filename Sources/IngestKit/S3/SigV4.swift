import Crypto
import Foundation

/// An access key pair, and the session token that comes with temporary credentials.
///
/// The secret and the token never appear in `description`, `debugDescription` or `dump`:
/// credentials end up in log lines and error messages by accident, and either of them lets
/// anyone who reads the log act as us.
public struct AWSCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let accessKeyID: String
    public let secretAccessKey: String
    /// Present for temporary credentials (STS, `credential_process`); sent as `x-amz-security-token`.
    public let sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public var description: String {
        "AWSCredentials(\(accessKeyID), secret redacted\(sessionToken == nil ? "" : ", session token redacted"))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessKeyID": accessKeyID,
                "secretAccessKey": "<redacted>",
                "sessionToken": sessionToken == nil ? "<none>" : "<redacted>",
            ])
    }
}

/// The `x-amz-content-sha256` value: the hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
///
/// Over TLS, parts and objects go `UNSIGNED-PAYLOAD`: TLS protects the bytes, and the
/// CRC32C the server checks (from the card's read) catches corruption. Over plain HTTP to
/// another host ([s3] allow_http) or with `[upload] sign_payloads`, they carry their real
/// hash (``ofFile(path:offset:length:)``), so a man in the middle who changes the body and
/// recomputes its CRC32C still breaks the signature.
public struct PayloadHash: Sendable, Hashable, CustomStringConvertible {
    /// The header value: 64 lower-case hex digits or `UNSIGNED-PAYLOAD`.
    public let value: String

    private init(value: String) { self.value = value }

    /// The hash of a body held in memory.
    public init(sha256Of body: some DataProtocol) {
        self.init(SHA256.hash(data: body))
    }

    /// The hash of a body hashed as it was read (a part streamed from a file).
    public init(_ digest: SHA256.Digest) {
        self.init(value: lowercaseHex(digest))
    }

    /// A hash computed elsewhere, as 64 hex digits; `nil` if it is not one.
    public init?(hex: String) {
        let lower = hex.lowercased()
        guard lower.utf8.count == 64, lower.utf8.allSatisfy({ isLowerHexDigit($0) }) else { return nil }
        self.init(value: lower)
    }

    /// The hash of an empty body, for GET, HEAD, DELETE and bodiless POSTs such as `?uploads`.
    public static let emptyBody = PayloadHash(sha256Of: [UInt8]())

    /// The body is not covered by the signature: only where TLS protects it.
    public static let unsigned = PayloadHash(value: "UNSIGNED-PAYLOAD")

    /// The SHA-256 of a range of a file, read in 1 MiB blocks (call off the concurrency pool).
    public static func ofFile(path: String, offset: Int64, length: Int64) throws(SystemError) -> PayloadHash {
        let blockSize = min(1 << 20, max(Int(length + 4095) / 4096 * 4096, 4096))
        let reader = try FileRangeReader(path: path, offset: offset, length: length, buffer: AlignedBuffer(size: blockSize))
        var hash = SHA256()
        while case let bytes = try reader.next(), !bytes.isEmpty { hash.update(bufferPointer: bytes) }
        return PayloadHash(hash.finalize())
    }

    public var description: String { value }
}

/// One HTTP header as the signer takes and gives them.
///
/// The value of `x-amz-security-token` is redacted from `description` and `dump`, so that a
/// request's headers can be logged.
public struct SigV4Header: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    private var isSecret: Bool { name.lowercased() == "x-amz-security-token" }

    public var description: String { "\(name): \(isSecret ? "<redacted>" : value)" }

    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "value": isSecret ? "<redacted>" : value])
    }
}

/// A request as the HTTP layer will send it, which is what gets signed.
public struct SigV4Request: Sendable, Hashable {
    /// `GET`, `PUT`, `POST`, `DELETE`, `HEAD`.
    public var method: String
    /// The `Host` header: the host, and `:port` when it is not the scheme's default.
    public var host: String
    /// The path exactly as sent, already percent-encoded once (see ``S3Location``); it is
    /// the canonical URI as it is: S3 neither normalises nor re-encodes it.
    public var path: String
    /// The query parameters, unencoded; their order does not matter.
    public var query: [S3QueryItem]
    /// Headers to send and sign besides those the signer adds (`Content-MD5`, `Content-Type`,
    /// `x-amz-checksum-*`, ...). Every header given here is signed.
    public var headers: [SigV4Header]
    public var payloadHash: PayloadHash

    public init(
        method: String, host: String, path: String, query: [S3QueryItem] = [], headers: [SigV4Header] = [],
        payloadHash: PayloadHash
    ) {
        self.method = method
        self.host = host
        self.path = path
        self.query = query
        self.headers = headers
        self.payloadHash = payloadHash
    }

    /// A request to an ``S3Location``, whose host and path are the ones that go on the wire.
    public init(
        method: String, location: S3Location, query: [S3QueryItem] = [], headers: [SigV4Header] = [],
        payloadHash: PayloadHash
    ) {
        self.init(
            method: method, host: location.host, path: location.path, query: query, headers: headers,
            payloadHash: payloadHash)
    }
}

/// What signing produced: the headers to add to the request, and the parts of the
/// `Authorization` header for diagnostics (none of them is secret).
public struct SigV4Signature: Sendable, Hashable, CustomStringConvertible {
    /// `x-amz-date`, `x-amz-content-sha256` (when the signer sends it), `x-amz-security-token`
    /// (with temporary credentials) and `Authorization`, in that order.
    public let headers: [SigV4Header]
    /// The hex HMAC-SHA256 of the string to sign.
    public let signature: String
    /// The `;`-joined lower-case names of the signed headers.
    public let signedHeaders: String
    /// `yyyymmdd/region/service/aws4_request`.
    public let credentialScope: String

    /// The `Authorization` header value.
    public var authorization: String {
        headers.first { $0.name == "Authorization" }?.value ?? ""
    }

    public var description: String {
        "SigV4 signature \(signature) for \(credentialScope) over \(signedHeaders)"
    }
}

/// A request the signer refuses: signing it would produce a request S3 rejects, or one whose
/// headers could be split on the wire. No message holds a secret or a header value.
public enum SigV4Error: Error, Sendable, Equatable, CustomStringConvertible {
    case missingCredentials(problem: String)
    case reservedHeader(String)
    case invalidHeaderName(String)
    case invalidHeaderValue(headerName: String)
    case pathNotEncoded(String)
    case invalidRequest(problem: String)

    public var description: String {
        switch self {
        case let .missingCredentials(problem):
            "cannot sign the request: \(problem). Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                + "or a profile in ~/.aws/credentials."
        case let .reservedHeader(name):
            "cannot sign the request: the header '\(name)' is set by the signer and must not be given "
                + "(this is a bug in ingest: please report it)"
        case let .invalidHeaderName(name):
            "cannot sign the request: '\(name)' is not a valid HTTP header name "
                + "(this is a bug in ingest: please report it)"
        case let .invalidHeaderValue(name):
            "cannot sign the request: the value of header '\(name)' holds a line break or NUL; "
                + "check the value configured for it"
        case let .pathNotEncoded(path):
            "cannot sign the request: the path '\(path)' is not percent-encoded; "
                + "build it with S3Location (this is a bug in ingest: please report it)"
        case let .invalidRequest(problem):
            "cannot sign the request: \(problem) (this is a bug in ingest: please report it)"
        }
    }
}

/// Signs requests with AWS Signature Version 4, header form, as S3 checks it.
///
/// Our own code rather than libcurl's `CURLOPT_AWS_SIGV4`: the libcurl of Debian 12 mis-signs
/// S3 requests with a read-callback body, `?uploads` and unsorted queries.
///
/// The signing key depends only on the secret, the day, the region and the service, so it is
/// derived once a day (four HMACs) and reused for every part.
public struct SigV4Signer: Sendable {
    public let region: String
    public let service: String
    /// Whether `x-amz-content-sha256` is sent and signed. S3 requires it; the generic SigV4
    /// test suite (and other services) do not use it.
    public let sendsContentSHA256: Bool
    private let keyCache = SigningKeyCache()

    /// A signer for `service` in `region`; `sendsContentSHA256` defaults to whether the
    /// service is `s3`.
    public init(region: String, service: String = "s3", sendsContentSHA256: Bool? = nil) {
        self.region = region
        self.service = service
        self.sendsContentSHA256 = sendsContentSHA256 ?? (service == "s3")
    }

    static let algorithm = "AWS4-HMAC-SHA256"

    /// The headers that authenticate `request` as made by `credentials` at `date` (the
    /// clock-corrected time: S3 refuses requests more than 15 minutes off).
    public func sign(
        _ request: SigV4Request, credentials: AWSCredentials, at date: Date
    ) throws(SigV4Error) -> SigV4Signature {
        let canonical = try canonicalize(request, credentials: credentials, at: date)
        var mac = keyCache.keyedHMAC(
            secret: credentials.secretAccessKey, date: canonical.time.date, region: region, service: service)
        mac.update(data: Array(canonical.stringToSign.utf8))
        let signature = lowercaseHex(mac.finalize())
        let authorization =
            "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(canonical.scope), "
            + "SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"
        return SigV4Signature(
            headers: canonical.addedHeaders + [SigV4Header("Authorization", authorization)],
            signature: signature, signedHeaders: canonical.signedHeaders, credentialScope: canonical.scope)
    }

    /// The canonical request, as the SigV4 specification lays it out. For tests and for
    /// diagnosing `SignatureDoesNotMatch` (S3 returns its own in the error body). It holds the
    /// session token, so it must not be logged as it is.
    func canonicalRequest(
        for request: SigV4Request, credentials: AWSCredentials, at date: Date
    ) throws(SigV4Error) -> String {
        try canonicalize(request, credentials: credentials, at: date).request
    }

    /// The string to sign: algorithm, timestamp, scope and the canonical request's hash.
    func stringToSign(
        for request: SigV4Request, credentials: AWSCredentials, at date: Date
    ) throws(SigV4Error) -> String {
        try canonicalize(request, credentials: credentials, at: date).stringToSign
    }

    /// The signing key: HMAC-SHA256 chained over `AWS4` + secret, the day, the region, the
    /// service and `aws4_request`.
    static func signingKey(secret: String, date: String, region: String, service: String) -> SymmetricKey {
        var key = SymmetricKey(data: Array("AWS4\(secret)".utf8))
        for step in [date, region, service, "aws4_request"] {
            key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(step.utf8), using: key)))
        }
        return key
    }

    // MARK: Canonicalisation

    private struct Canonical {
        var time: SigV4Time
        var scope: String
        var signedHeaders: String
        /// The canonical request's bytes, as hashed.
        var requestBytes: [UInt8]
        var stringToSign: String
        var addedHeaders: [SigV4Header]

        var request: String { String(decoding: requestBytes, as: UTF8.self) }
    }

    /// Headers the signer sets itself; given by the caller they would be signed twice or
    /// disagree with the ones added.
    private static let reservedHeaders: [[UInt8]] = [
        "host", "authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
    ].map { Array($0.utf8) }

    private func canonicalize(
        _ request: SigV4Request, credentials: AWSCredentials, at date: Date
    ) throws(SigV4Error) -> Canonical {
        try Self.validate(credentials)
        guard !request.method.isEmpty, request.method.utf8.allSatisfy(isTokenCharacter) else {
            throw .invalidRequest(problem: "'\(request.method)' is not an HTTP method")
        }
        let badHostByte: (UInt8) -> Bool = { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") }
        guard !request.host.isEmpty, !request.host.utf8.contains(where: badHostByte) else {
            throw .invalidRequest(problem: "'\(request.host)' is not a host name")
        }
        guard S3Encoding.isEncodedPath(request.path) else { throw .pathNotEncoded(request.path) }

        let time = SigV4Time(date)
        var added = [SigV4Header("x-amz-date", time.timestamp)]
        if sendsContentSHA256 { added.append(SigV4Header("x-amz-content-sha256", request.payloadHash.value)) }
        if let token = credentials.sessionToken { added.append(SigV4Header("x-amz-security-token", token)) }

        // Every request is signed once, a card of small files thousands of times a second: the
        // canonical request is written as bytes into one buffer and hashed from there.
        var headers: [(name: [UInt8], value: [UInt8])] = [(Array("host".utf8), Array(request.host.utf8))]
        headers.reserveCapacity(request.headers.count + added.count + 1)
        for header in request.headers {
            let name = header.name.utf8.map(asciiLowercased)
            guard !name.isEmpty, name.allSatisfy(isTokenCharacter) else { throw .invalidHeaderName(header.name) }
            guard !Self.reservedHeaders.contains(name) else { throw .reservedHeader(header.name) }
            guard !header.value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }) else {
                throw .invalidHeaderValue(headerName: header.name)
            }
            headers.append((name, Self.normalizedValue(header.value.utf8)))
        }
        for header in added { headers.append((Array(header.name.utf8), Array(header.value.utf8))) }
        // By name; the values of one name in the order given (as HTTP folds them).
        let order = headers.indices.sorted { lhs, rhs in
            headers[lhs].name == headers[rhs].name
                ? lhs < rhs : headers[lhs].name.lexicographicallyPrecedes(headers[rhs].name)
        }

        var canonical: [UInt8] = []
        canonical.reserveCapacity(512)
        canonical += request.method.utf8
        canonical.append(0x0A)
        canonical += request.path.utf8
        canonical.append(0x0A)
        canonical += S3QueryItem.canonicalQuery(request.query).utf8
        var signed: [UInt8] = []
        for (position, index) in order.enumerated() {
            let header = headers[index]
            if position > 0, headers[order[position - 1]].name == header.name {
                canonical.append(UInt8(ascii: ","))  // another value of the same name
            } else {
                canonical.append(0x0A)
                canonical += header.name
                canonical.append(UInt8(ascii: ":"))
                if !signed.isEmpty { signed.append(UInt8(ascii: ";")) }
                signed += header.name
            }
            canonical += header.value
        }
        canonical.append(0x0A)
        canonical.append(0x0A)
        canonical += signed
        canonical.append(0x0A)
        canonical += request.payloadHash.value.utf8

        let scope = "\(time.date)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            Self.algorithm, time.timestamp, scope, lowercaseHex(SHA256.hash(data: canonical)),
        ].joined(separator: "\n")
        return Canonical(
            time: time, scope: scope, signedHeaders: String(decoding: signed, as: UTF8.self), requestBytes: canonical,
            stringToSign: stringToSign, addedHeaders: added)
    }

    private static func validate(_ credentials: AWSCredentials) throws(SigV4Error) {
        guard !credentials.accessKeyID.isEmpty else { throw .missingCredentials(problem: "the access key ID is empty") }
        let fitsCredentialField: (UInt8) -> Bool = {
            $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: ",")
        }
        guard credentials.accessKeyID.utf8.allSatisfy(fitsCredentialField) else {
            throw .missingCredentials(
                problem: "the access key ID '\(credentials.accessKeyID)' holds a space, '/', ',' or a non-ASCII character")
        }
        guard !credentials.secretAccessKey.isEmpty else {
            throw .missingCredentials(problem: "the secret access key for \(credentials.accessKeyID) is empty")
        }
        if let token = credentials.sessionToken {
            guard !token.isEmpty, !token.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }) else {
                throw .missingCredentials(
                    problem: "the session token for \(credentials.accessKeyID) is empty or holds a line break")
            }
        }
    }

    /// A header value as SigV4 signs it: spaces and tabs trimmed at both ends and each inner
    /// run of them written as one space.
    static func normalizedValue(_ value: String) -> String {
        String(decoding: normalizedValue(value.utf8), as: UTF8.self)
    }

    private static func normalizedValue(_ value: String.UTF8View) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(value.count)
        var pendingSpace = false
        for byte in value {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                pendingSpace = !result.isEmpty
            } else {
                if pendingSpace { result.append(UInt8(ascii: " ")) }
                pendingSpace = false
                result.append(byte)
            }
        }
        return result
    }
}

/// The request time in the two forms SigV4 uses: `20150830T123600Z` and `20150830`, in UTC.
struct SigV4Time: Sendable, Equatable {
    let timestamp: String
    var date: String { String(timestamp.prefix(8)) }

    init(_ instant: Date) {
        var seconds = time_t(instant.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        timestamp = digits(parts.tm_year + 1900, 4) + digits(parts.tm_mon + 1, 2) + digits(parts.tm_mday, 2) + "T"
            + digits(parts.tm_hour, 2) + digits(parts.tm_min, 2) + digits(parts.tm_sec, 2) + "Z"
    }
}

/// The last signing key derived, for reuse until the secret or the day changes.
///
/// It holds a SHA-256 of the secret rather than the secret, so that refreshed credentials
/// are told apart without keeping another copy of the old secret around.
final class SigningKeyCache: @unchecked Sendable {
    private struct Entry {
        let secretDigest: SHA256.Digest
        let scope: String
        /// HMAC-SHA256 with the signing key, its key already absorbed: each signature copies it.
        let mac: HMAC<SHA256>
    }

    private let lock = NSLock()
    private var entry: Entry?
    /// How many keys were derived, for tests of the caching.
    private var derivations = 0

    /// An HMAC-SHA256 keyed with the signing key, ready for the string to sign.
    func keyedHMAC(secret: String, date: String, region: String, service: String) -> HMAC<SHA256> {
        let digest = SHA256.hash(data: Array(secret.utf8))
        let scope = "\(date)/\(region)/\(service)"
        lock.lock()
        defer { lock.unlock() }
        if let entry, entry.secretDigest == digest, entry.scope == scope { return entry.mac }
        let mac = HMAC<SHA256>(key: SigV4Signer.signingKey(secret: secret, date: date, region: region, service: service))
        entry = Entry(secretDigest: digest, scope: scope, mac: mac)
        derivations += 1
        return mac
    }
}

extension SigV4Signer {
    /// How many signing keys this signer (and its copies) derived so far.
    var signingKeyDerivations: Int { keyCache.derivationCount }
}

extension SigningKeyCache {
    var derivationCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return derivations
    }
}

/// An RFC 7230 `tchar`: the characters a header name or method may hold.
private func isTokenCharacter(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        true
    default:
        "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

private func isLowerHexDigit(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
}
