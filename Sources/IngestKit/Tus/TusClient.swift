// The tus client and its operations (tus.io/protocols/resumable-upload): OPTIONS, and the
// creation, offset, append and termination of one upload. Its request loop, where every
// request is sent and retried, is in TusClient+Requests.swift; what the operations return in
// TusServerInfo.swift, TusCreatedUpload.swift and TusUploadStatus.swift, how they fail in
// TusError.swift.

import Foundation
import Logging

/// A client of a tus 1.0 server (tus.io resumable uploads): asks what the server supports,
/// creates uploads, asks an upload's offset, appends chunks streamed from disk, and
/// terminates uploads.
///
/// Every request carries `Tus-Resumable: 1.0.0` and the extra headers given at creation
/// (`Authorization: Bearer …`), which are secrets: they are never logged, never in an error,
/// and the ``description`` names them without their values. Requests go only to the creation
/// URL's server (``TusEndpoint``). Each is retried by ``RetryPolicy``'s rules, with this
/// client's reading of tus statuses (``failureKind(status:)``): control requests briefly,
/// chunks patiently.
public final class TusClient: Sendable, CustomStringConvertible {
    /// The protocol version this client speaks, sent as `Tus-Resumable`.
    public static let protocolVersion = "1.0.0"

    public let endpoint: TusEndpoint
    /// Sent with every request after the protocol's own headers.
    let extraHeaders: [(name: String, value: String)]
    let transport: CurlTransport
    let logger: Logger

    /// Fails for a creation URL ``TusEndpoint`` refuses, or an extra header whose name is
    /// not a token or whose value holds a line break (it would smuggle in other headers).
    public init(
        creationURL: String, headers: [(name: String, value: String)] = [], transport: CurlTransport, logger: Logger
    ) throws(TusError) {
        endpoint = try TusEndpoint(creationURL)
        for header in headers {
            let nameIsToken = !header.name.isEmpty
                && header.name.utf8.allSatisfy { (0x21...0x7E).contains($0) && $0 != UInt8(ascii: ":") }
            guard nameIsToken, !header.value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) else {
                throw .invalidHeader(name: String(header.name.prefix(40)))
            }
        }
        extraHeaders = headers
        self.transport = transport
        self.logger = logger
    }

    public var description: String {
        let names = extraHeaders.map(\.name).joined(separator: ", ")
        return "tus client of \(endpoint.creationURL)" + (names.isEmpty ? "" : " (headers: \(names))")
    }

    /// OPTIONS on the creation URL: the versions, extensions, largest upload and checksum
    /// algorithms the server supports.
    public func serverInfo() async throws(TusError) -> TusServerInfo {
        let response = try await perform("OPTIONS", url: endpoint.creationURL)
        guard let versions = response[header: "tus-version"].map(Self.list), !versions.isEmpty else {
            throw .unexpectedAnswer(status: response.status, detail: "no Tus-Version header")
        }
        let maxSize = try response[header: "tus-max-size"].map { (text: String) throws(TusError) -> Int64 in
            try TusAnswerNumbers.byteCount(text, header: "Tus-Max-Size", status: response.status)
        }
        return TusServerInfo(
            versions: versions, extensions: Set(Self.list(response[header: "tus-extension"] ?? "")), maxSize: maxSize,
            checksumAlgorithms: Set(Self.list(response[header: "tus-checksum-algorithm"] ?? "").map { $0.lowercased() }))
    }

    /// POST to the creation URL (the `creation` extension): a new upload of `length` bytes
    /// with `metadata`. Returns its URL, absolute, from the answer's `Location` (resolved
    /// against the creation URL, refused on another server: ``TusEndpoint``), and its expiry
    /// if the server gives one.
    ///
    /// A retried POST whose first attempt was received creates a second upload; the first
    /// is never used and expires on the server (or the caller terminates what it knows).
    ///
    /// With a `body` (the `creation-with-upload` extension, where the server announces it),
    /// its bytes go in the same request, from offset 0; ``TusCreatedUpload/offset`` says how
    /// many the server kept. A retried POST then sends the body again, to a new upload: the
    /// caller keeps such bodies to one chunk.
    public func create(length: Int64, metadata: TusMetadata = TusMetadata(), body: HTTPBody = .empty)
        async throws(TusError) -> TusCreatedUpload
    {
        precondition(length >= 0, "an upload's length is never negative")
        precondition(body.length <= length, "a creation's body is part of the upload")
        var headers = [(name: "Upload-Length", value: String(length))]
        let encoded = metadata.headerValue
        if !encoded.isEmpty { headers.append((name: "Upload-Metadata", value: encoded)) }
        let withBody = body.length > 0
        if withBody { headers.append((name: "Content-Type", value: "application/offset+octet-stream")) }
        let response = try await perform(
            "POST", url: endpoint.creationURL, headers: headers, body: body, policy: withBody ? .part : .control,
            isPayload: withBody)
        guard let location = response[header: "location"], !location.isEmpty else {
            throw .unexpectedAnswer(status: response.status, detail: "no Location header")
        }
        let offset =
            withBody
            ? try TusAnswerNumbers.offset(response[header: "upload-offset"], lowest: 0, highest: body.length, status: response.status)
            : 0
        return TusCreatedUpload(
            url: try endpoint.resolve(location: location, status: response.status), expires: Self.expiry(of: response),
            offset: offset)
    }

    /// HEAD on an upload: how many bytes the server holds (`Upload-Offset`, required), the
    /// upload's length and expiry if it says; ``TusUploadStatus/gone`` for 404 and 410.
    ///
    /// A 403, which the spec also allows for an unknown upload, is an error rather than
    /// "gone": it is as likely a refused token, and taking it for "gone" would restart an
    /// upload that exists. The server sends `Cache-Control: no-store` so that no cache in
    /// between answers with a stale offset; the request itself needs no header for that.
    public func status(of url: String) async throws(TusError) -> TusUploadStatus {
        let response = try await perform("HEAD", url: url, answers: [404, 410])
        if response.status == 404 || response.status == 410 { return .gone }
        let length = try response[header: "upload-length"].map { (text: String) throws(TusError) -> Int64 in
            try TusAnswerNumbers.byteCount(text, header: "Upload-Length", status: response.status)
        }
        let offset = try TusAnswerNumbers.offset(
            response[header: "upload-offset"], lowest: 0, highest: length, status: response.status)
        return .found(
            offset: offset, length: length, expires: Self.expiry(of: response),
            metadata: TusMetadata(headerValue: response[header: "upload-metadata"] ?? ""))
    }

    /// PATCH: appends `body` (a range of a file on disk, `HTTPBody.file`: a chunk is streamed,
    /// never held in memory) at `offset`, with its checksum if given. Returns the server's
    /// new offset, which lies in `offset...offset + body.length` (``TusAnswerNumbers``).
    ///
    /// Fails with ``TusError/offsetMismatch(sent:)`` on 409 (the server holds another offset:
    /// ask ``status(of:)``), ``TusError/uploadGone(status:)`` on 404 and 410, and
    /// ``TusError/checksumMismatch(algorithm:)`` on a 460 that came back after the one resend.
    /// A retry after a broken connection can meet a 409 too: the server may have kept what
    /// arrived of the first attempt. The caller asks the offset then, and goes on from it.
    public func append(
        to url: String, offset: Int64, body: HTTPBody, checksum: TusChecksum? = nil, policy: RetryPolicy = .part
    ) async throws(TusError) -> Int64 {
        var headers = [
            (name: "Content-Type", value: "application/offset+octet-stream"), (name: "Upload-Offset", value: String(offset)),
        ]
        if let checksum { headers.append((name: "Upload-Checksum", value: checksum.headerValue)) }
        let response: HTTPResponse
        do {
            response = try await perform(
                "PATCH", url: url, headers: headers, body: body, policy: policy, answers: [404, 409, 410], isPayload: true)
        } catch .server(460, _, _) {
            throw .checksumMismatch(algorithm: checksum?.algorithm ?? "(none sent)")
        }
        switch response.status {
        case 409: throw .offsetMismatch(sent: offset)
        case 404, 410: throw .uploadGone(status: response.status)
        default:
            return try TusAnswerNumbers.offset(
                response[header: "upload-offset"], lowest: offset, highest: offset + body.length, status: response.status)
        }
    }

    /// Appends `body`, the upload's bytes from `offset`, until the server holds them all,
    /// and returns the server's offset then. Unlike a resent ``append(to:offset:body:checksum:policy:)``,
    /// a `PATCH` whose connection broke, that the server answered with another offset
    /// (`409`) or with an error, is followed by a `HEAD`, and only what the server still
    /// lacks is sent: a server reads a `PATCH`'s whole body before it refuses its offset, so
    /// resending the chunk as it was would send it all for nothing. Attempts are spaced and
    /// counted by ``RetryPolicy/part``, counted again from zero once a `PATCH` moves the
    /// offset.
    ///
    /// - Parameters:
    ///   - known: the server's offset, when the caller knows it (its last answer); nil asks
    ///     it first.
    ///   - checksum: the checksum of the bytes one `PATCH` sends, or nil for none.
    public func appendAll(
        to url: String, offset: Int64, body: HTTPBody, known: Int64?,
        checksum: (HTTPBody) async throws(TusError) -> TusChecksum?
    ) async throws(TusError) -> Int64 {
        let end = offset + body.length
        var state = RetryState()
        var at = known
        while true {
            let server: Int64
            if let at {
                server = at
            } else {
                guard case .found(let found, _, _, _) = try await status(of: url) else { throw .uploadGone(status: 404) }
                server = found
            }
            guard server >= offset else {
                throw .unexpectedAnswer(
                    status: 200, detail: "the server holds \(server) bytes of the upload, less than the \(offset) it acknowledged")
            }
            if server >= end { return server }
            let rest = body.suffix(from: server - offset)
            do {
                at = try await append(to: url, offset: server, body: rest, checksum: try await checksum(rest), policy: .once)
                state = RetryState()
            } catch .offsetMismatch {
                at = nil
            } catch {
                let kind: FailureKind
                switch error {
                case .transport(let problem, _): kind = RetryPolicy.classify(.transport(problem.kind))
                case .server(let status, _, _): kind = Self.failureKind(status: status)
                case .checksumMismatch: kind = .corruptedBody
                default: throw error
                }
                switch RetryPolicy.part.decide(afterFailureOf: kind, state: &state, random: Double.random(in: 0..<1)) {
                case .retry(let delay):
                    await transport.pause(for: delay)  // cut short by a stop: the next attempt is cut too
                case .rereadPartAndRetry:
                    break
                case .correctClockAndRetry, .refreshCredentialsAndRetry, .restartUpload, .fail:
                    switch error {
                    case .transport(let problem, _): throw .transport(problem, attempts: state.failedAttempts)
                    case let .server(status, detail, _): throw .server(status: status, detail: detail, attempts: state.failedAttempts)
                    default: throw error
                    }
                }
                at = nil
            }
        }
    }

    /// DELETE on an upload (the `termination` extension): the server forgets it and its
    /// bytes. An upload the server no longer knows (404, 410) counts as terminated.
    public func terminate(_ url: String) async throws(TusError) {
        _ = try await perform("DELETE", url: url, answers: [404, 410])
    }

    /// A comma-separated header's items, trimmed, empty ones left out.
    private static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `Upload-Expires` (an RFC 7231 date), if given. One that cannot be read counts as not
    /// given: it only tells how long an unfinished upload may wait, and refusing the whole
    /// answer for it would fail uploads whose bytes are fine.
    private static func expiry(of response: HTTPResponse) -> Date? {
        response[header: "upload-expires"].flatMap(ServerClock.parseHTTPDate)
    }
}
