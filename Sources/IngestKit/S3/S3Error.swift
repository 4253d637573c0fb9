import Foundation

/// The `<Code>` of an S3 error response, with the codes `ingest` acts on or explains named.
///
/// Any other code is kept verbatim in ``unknown(_:)``. Two codes are equal when their raw
/// text is equal, so `.unknown("NoSuchUpload") == .noSuchUpload`; build codes from server
/// text with ``init(rawValue:)``, which always picks the named case.
public enum S3ErrorCode: Sendable, Hashable, CustomStringConvertible {
    // The upload, bucket or object is not there.
    case noSuchUpload, noSuchBucket, noSuchKey
    // Credentials, permissions and the clock.
    case accessDenied, invalidAccessKeyId, signatureDoesNotMatch, expiredToken, requestTimeTooSkewed
    case authorizationHeaderMalformed, permanentRedirect
    // Temporary trouble on the server's side, and throttling.
    case slowDown, requestTimeout, internalError, serviceUnavailable
    case throttling, throttlingException, requestThrottled, tooManyRequestsException
    case requestLimitExceeded, bandwidthLimitExceeded
    // The request or its body is wrong.
    case invalidPart, invalidPartOrder, entityTooSmall, entityTooLarge
    case badDigest, invalidDigest, xAmzContentSHA256Mismatch
    case invalidBucketName, invalidRequest, invalidArgument, notImplemented
    // A conditional write (`If-None-Match: *`) found the key taken, or raced another write.
    case preconditionFailed, conditionalRequestConflict
    /// A code this type does not name, exactly as the server sent it.
    case unknown(String)

    private static let named: [String: S3ErrorCode] = {
        let all: [S3ErrorCode] = [
            .noSuchUpload, .noSuchBucket, .noSuchKey,
            .accessDenied, .invalidAccessKeyId, .signatureDoesNotMatch, .expiredToken, .requestTimeTooSkewed,
            .authorizationHeaderMalformed, .permanentRedirect,
            .slowDown, .requestTimeout, .internalError, .serviceUnavailable,
            .throttling, .throttlingException, .requestThrottled, .tooManyRequestsException,
            .requestLimitExceeded, .bandwidthLimitExceeded,
            .invalidPart, .invalidPartOrder, .entityTooSmall, .entityTooLarge,
            .badDigest, .invalidDigest, .xAmzContentSHA256Mismatch,
            .invalidBucketName, .invalidRequest, .invalidArgument, .notImplemented,
            .preconditionFailed, .conditionalRequestConflict,
        ]
        return Dictionary(uniqueKeysWithValues: all.map { ($0.rawValue, $0) })
    }()

    /// The named case for `rawValue` if there is one, otherwise ``unknown(_:)``.
    /// Codes are case-sensitive, as S3 sends and documents them.
    public init(rawValue: String) {
        self = Self.named[rawValue] ?? .unknown(rawValue)
    }

    /// The code as S3 spells it.
    public var rawValue: String {
        switch self {
        case .noSuchUpload: "NoSuchUpload"
        case .noSuchBucket: "NoSuchBucket"
        case .noSuchKey: "NoSuchKey"
        case .accessDenied: "AccessDenied"
        case .invalidAccessKeyId: "InvalidAccessKeyId"
        case .signatureDoesNotMatch: "SignatureDoesNotMatch"
        case .expiredToken: "ExpiredToken"
        case .requestTimeTooSkewed: "RequestTimeTooSkewed"
        case .authorizationHeaderMalformed: "AuthorizationHeaderMalformed"
        case .permanentRedirect: "PermanentRedirect"
        case .slowDown: "SlowDown"
        case .requestTimeout: "RequestTimeout"
        case .internalError: "InternalError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .throttling: "Throttling"
        case .throttlingException: "ThrottlingException"
        case .requestThrottled: "RequestThrottled"
        case .tooManyRequestsException: "TooManyRequestsException"
        case .requestLimitExceeded: "RequestLimitExceeded"
        case .bandwidthLimitExceeded: "BandwidthLimitExceeded"
        case .invalidPart: "InvalidPart"
        case .invalidPartOrder: "InvalidPartOrder"
        case .entityTooSmall: "EntityTooSmall"
        case .entityTooLarge: "EntityTooLarge"
        case .badDigest: "BadDigest"
        case .invalidDigest: "InvalidDigest"
        case .xAmzContentSHA256Mismatch: "XAmzContentSHA256Mismatch"
        case .invalidBucketName: "InvalidBucketName"
        case .invalidRequest: "InvalidRequest"
        case .invalidArgument: "InvalidArgument"
        case .notImplemented: "NotImplemented"
        case .preconditionFailed: "PreconditionFailed"
        case .conditionalRequestConflict: "ConditionalRequestConflict"
        case let .unknown(raw): raw
        }
    }

    /// The server asks the client to send less: the codes AWS services use for throttling
    /// (S3 itself says `SlowDown`; other S3-compatible servers and gateways use the rest).
    public var isThrottling: Bool {
        switch self {
        case .slowDown, .throttling, .throttlingException, .requestThrottled, .tooManyRequestsException,
            .requestLimitExceeded, .bandwidthLimitExceeded:
            true
        default: false
        }
    }

    public var description: String { rawValue }

    public static func == (lhs: S3ErrorCode, rhs: S3ErrorCode) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// An error answered by an S3-compatible server: the HTTP status and, when the body was an
/// `<Error>` document, its code, message and identifiers.
///
/// Built by ``parse(status:body:)`` from a response. Its description names the code, the
/// status and what to do about it.
public struct S3Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status of the response; 200 when the error came inside a successful response.
    public let status: Int
    /// The `<Code>`, or nil when the response had no readable `<Error>` document (a HEAD
    /// response, a proxy's HTML page, a truncated body).
    public let code: S3ErrorCode?
    /// The server's `<Message>`, or for a body that is not an S3 error, the start of its text.
    public let message: String?
    public let requestID: String?
    public let hostID: String?
    public let resource: String?
    /// The server's clock, sent with `RequestTimeTooSkewed` as `<ServerTime>`.
    public let serverTime: Date?

    public init(
        status: Int, code: S3ErrorCode?, message: String? = nil, requestID: String? = nil,
        hostID: String? = nil, resource: String? = nil, serverTime: Date? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.requestID = requestID
        self.hostID = hostID
        self.resource = resource
        self.serverTime = serverTime
    }

    /// How many characters of a body that is not an S3 error document are kept as `message`.
    static let snippetLength = 160

    /// The error in a response, or nil when the response is a success.
    ///
    /// A body whose root element is `<Error>` is an error whatever the status: S3 answers
    /// `CompleteMultipartUpload` (and copies) with `200 OK` before the work is done and, if
    /// the work then fails, sends the `<Error>` in that 200's body. Whitespace before the
    /// document (S3 sends spaces to keep such a connection alive) is skipped, so that the
    /// XML declaration after it is at the start, where XML allows it.
    ///
    /// A status outside 200–299 is always an error: when its body is empty, malformed or
    /// not an S3 error document, the result has no `code` and keeps the start of the body
    /// as `message`. Malformed XML never traps. External entities are not resolved.
    public static func parse(status: Int, body: Data) -> S3Error? {
        let success = (200...299).contains(status)
        let document = body.drop(while: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D })
        let xml = S3XMLDocument.read(document, onlyRoot: "Error")
        if xml.root == "Error" {
            let fields = xml.fields
            return S3Error(
                status: status,
                code: fields["Code"].map(S3ErrorCode.init(rawValue:)),
                message: fields["Message"],
                requestID: fields["RequestId"],
                hostID: fields["HostId"],
                resource: fields["Resource"],
                serverTime: fields["ServerTime"].flatMap(ServerClock.parseISO8601)
            )
        }
        if success { return nil }
        return S3Error(status: status, code: nil, message: snippet(of: document))
    }

    /// The start of a body as one line of printable text, or nil if there is none.
    private static func snippet(of body: Data.SubSequence) -> String? {
        let text = String(decoding: body.prefix(4 * snippetLength), as: UTF8.self)
        let words = text.split(whereSeparator: { $0.isWhitespace || $0.isNewline })
        var line = words.joined(separator: " ")
        line.unicodeScalars.removeAll { $0.properties.generalCategory == .control }
        if line.isEmpty { return nil }
        return line.count > snippetLength ? String(line.prefix(snippetLength)) + "…" : line
    }

    /// What to do about this error, in a sentence.
    public var remedy: String {
        guard let code else {
            switch status {
            case 200...299: return "The server reported a failure without a code; the request is retried."
            case 403: return "The server refused access; check the credentials and the bucket's permissions."
            case 404: return "Nothing exists at this address; check --bucket, the key and the endpoint URL."
            case 400...499: return "The server rejected the request; check the endpoint URL and the bucket."
            default:
                return "The server or a proxy in front of it failed; temporary failures are retried, "
                    + "if it persists check the server's status."
            }
        }
        switch code {
        case .noSuchUpload:
            return "The multipart upload was aborted or expired on the server; the upload starts again."
        case .noSuchBucket:
            return "Create the bucket or fix --bucket (and check the endpoint URL points at the right server)."
        case .noSuchKey:
            return "The object is not in the bucket; check the key and --bucket."
        case .accessDenied:
            return "The credentials lack permission for this bucket or key; "
                + "check the bucket policy or the user's permissions."
        case .invalidAccessKeyId:
            return "The server does not know this access key; check AWS_ACCESS_KEY_ID (or the profile in use) "
                + "and that the endpoint URL is the right server."
        case .signatureDoesNotMatch:
            return "Check AWS_ACCESS_KEY_ID / the secret (AWS_SECRET_ACCESS_KEY or the profile's) "
                + "belong together, and the region."
        case .expiredToken:
            return "The session token has expired; credentials are refreshed automatically, "
                + "if it persists renew AWS_SESSION_TOKEN or check credential_process."
        case .requestTimeTooSkewed:
            return "The clock is off; it is corrected automatically, but set this machine's time right (NTP)."
        case .authorizationHeaderMalformed:
            return "The region is wrong for this bucket; set the region the message names."
        case .permanentRedirect:
            return "The bucket lives in another region or endpoint; set the region or endpoint URL."
        case .slowDown, .throttling, .throttlingException, .requestThrottled, .tooManyRequestsException,
            .requestLimitExceeded, .bandwidthLimitExceeded:
            return "The server asks to slow down; retried with backoff, if it persists lower the upload concurrency."
        case .requestTimeout:
            return "The connection sat idle too long while sending; retried automatically, "
                + "if it persists check the network."
        case .internalError, .serviceUnavailable:
            return "Temporary failure on the server; retried automatically, if it persists check the server's status."
        case .invalidPart, .invalidPartOrder, .entityTooSmall:
            return "The upload's list of parts is wrong: a bug in ingest, please report it with this message."
        case .entityTooLarge:
            return "The part or object is larger than the server accepts; check the server's size limits."
        case .badDigest, .xAmzContentSHA256Mismatch:
            return "The bytes the server received differ from the ones hashed (corrupted in transit, "
                + "or the staged file changed); the part is read again from disk and resent once."
        case .invalidDigest:
            return "The checksum header is malformed: a bug in ingest, please report it with this message."
        case .invalidBucketName:
            return "Fix --bucket: bucket names are 3 to 63 lowercase letters, digits, dots and hyphens."
        case .invalidRequest, .invalidArgument:
            return "The server rejected the request as invalid; if the message does not point at the "
                + "configuration, it is a bug in ingest: please report it."
        case .notImplemented:
            return "The server does not support this request; check that it is S3-compatible for multipart uploads."
        case .preconditionFailed:
            return "The key already holds an object: ingest never replaces one; it looks at the object and "
                + "records it as there (same fingerprint) or writes the file under its own key."
        case .conditionalRequestConflict:
            return "Another write to the same key raced this one; retried automatically."
        case .unknown:
            return "See the server's message; if it persists, check the server's documentation for this code."
        }
    }

    public var description: String { statement + ". " + remedy }

    /// What the server said (code, status, message, identifiers), without ``remedy``: for a
    /// message that gives its own advice.
    public var statement: String {
        var text = code.map { "S3 error \($0.rawValue)" } ?? "S3 request failed"
        text += (200...299).contains(status) ? " (HTTP \(status) with an error body)" : " (HTTP \(status))"
        if let message, !message.isEmpty { text += ": \(message)" }
        let ids = [resource.map { "resource \($0)" }, requestID.map { "request ID \($0)" }].compactMap { $0 }
        if !ids.isEmpty { text += " [\(ids.joined(separator: ", "))]" }
        return text
    }
}

/// The server's clock, read from responses, for correcting ours when S3 answers
/// `RequestTimeTooSkewed` (it refuses requests signed more than 15 minutes off its time).
public enum ServerClock {
    /// How far the server's clock is ahead of ours: `server − local`. Add it to the local
    /// time to get the time to sign with. Negative when our clock is ahead.
    public static func offset(server: Date, local: Date) -> Duration {
        .seconds(server.timeIntervalSince(local))
    }

    /// ``offset(server:local:)`` from an HTTP `Date` response header, or nil when the header
    /// is not an RFC 1123 date. The header has whole seconds, so the offset is good to about
    /// a second plus the response's latency: far inside S3's 15 minutes.
    public static func offset(dateHeader: String, local: Date) -> Duration? {
        parseHTTPDate(dateHeader).map { offset(server: $0, local: local) }
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An HTTP date in the RFC 1123 form HTTP servers send (RFC 9110's IMF-fixdate),
    /// `Sun, 06 Nov 1994 08:49:37 GMT`. The obsolete RFC 850 and asctime forms are not read;
    /// a caller that gets nil falls back to the body's `<ServerTime>`.
    public static func parseHTTPDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 6,
            parts[0].count == 4, parts[0].last == ",", parts[0].dropLast().allSatisfy(\.isLetter),
            parts[5] == "GMT" || parts[5] == "UTC",
            let day = number(parts[1], digits: 1...2),
            let monthIndex = months.firstIndex(of: String(parts[2])),
            let year = number(parts[3], digits: 4...4),
            let (hour, minute, second) = clockTime(parts[4])
        else { return nil }
        return date(year: year, month: monthIndex + 1, day: day, hour: hour, minute: minute, second: second)
    }

    /// An ISO 8601 UTC time as S3 writes `<ServerTime>`: `2016-05-26T23:50:55Z`, optionally
    /// with fractional seconds (`…:55.123Z`).
    public static func parseISO8601(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasSuffix("Z") else { return nil }
        let parts = trimmed.dropLast().split(separator: "T", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let ymd = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        var time = parts[1]
        var fraction = 0.0
        if let dot = time.firstIndex(of: ".") {
            let digits = time[time.index(after: dot)...]
            guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy(\.isASCIIDigit),
                let value = Double("0." + digits)
            else { return nil }
            fraction = value
            time = time[..<dot]
        }
        guard ymd.count == 3,
            let year = number(ymd[0], digits: 4...4),
            let month = number(ymd[1], digits: 2...2),
            let day = number(ymd[2], digits: 2...2),
            let (hour, minute, second) = clockTime(time),
            let whole = date(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { return nil }
        return whole.addingTimeInterval(fraction)
    }

    /// A run of ASCII digits of an allowed length, as a number.
    private static func number(_ text: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.count), text.allSatisfy(\.isASCIIDigit) else { return nil }
        return Int(text)
    }

    /// `HH:MM:SS`, each in range.
    private static func clockTime(_ text: Substring) -> (Int, Int, Int)? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3,
            let hour = number(fields[0], digits: 2...2), hour < 24,
            let minute = number(fields[1], digits: 2...2), minute < 60,
            let second = number(fields[2], digits: 2...2), second < 60
        else { return nil }
        return (hour, minute, second)
    }

    /// The UTC instant of a proleptic Gregorian date and time, or nil for a date that does
    /// not exist (31 April, 29 February of a common year).
    static func date(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date. Counts years from March, so the leap day is the last
    /// day of its year and each 400-year era has the same 146 097 days.
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400
        let monthFromMarch = (month + 9) % 12
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468  // 719 468 days from 0000-03-01 to 1970-01-01
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
