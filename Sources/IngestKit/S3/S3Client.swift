import Foundation
import Logging
import Synchronization

/// Where objects go: an S3-compatible endpoint, a bucket, a region for signing.
public struct S3Destination: Sendable, Equatable {
    public var endpoint: S3Endpoint
    public var bucket: String
    public var region: String
    public var style: S3AddressingStyle

    public init(endpoint: S3Endpoint, bucket: String, region: String, style: S3AddressingStyle) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.style = style
    }
}

/// A part the server holds for an upload, as `ListParts` reports it.
public struct ListedPart: Sendable, Equatable {
    public var number: Int
    /// Exactly as the server sent it, quotes included: it goes back in Complete unchanged.
    public var etag: String
    public var size: Int64
}

/// What `HeadObject` says of an object.
public struct ObjectHead: Sendable, Equatable {
    public var size: Int64
    public var etag: String?
    /// `x-amz-meta-*` headers, by name without the prefix, lowercased.
    public var metadata: [String: String]
}

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

    public var description: String {
        switch self {
        case let .server(error, attempts): "\(error)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .transport(error, attempts): "\(error)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case .uploadGone(let error): "the multipart upload is gone from the server (\(error.code?.rawValue ?? "NoSuchUpload")): a new one is started"
        case .credentials(let error): "\(error)"
        case .request(let problem): "cannot build the request: \(problem)"
        case let .unexpectedAnswer(status, detail): "the server's answer (HTTP \(status)) cannot be read: \(detail)"
        }
    }
}

/// The S3 operations the uploader needs, signed with SigV4 and sent over libcurl, each with
/// its retry policy: control requests retry briefly, parts patiently.
///
/// Credentials are asked for on every attempt (so refreshed ones are used at once), an
/// expired token refreshes them, and a skewed clock is corrected from the server's `Date`.
public final class S3Client: Sendable {
    public let destination: S3Destination
    let credentials: CredentialsProvider
    let transport: CurlTransport
    let signer: SigV4Signer
    let logger: Logger
    /// Server time minus local time, learned from `RequestTimeTooSkewed`.
    private let clockOffset = Mutex<Duration>(.zero)

    public init(destination: S3Destination, credentials: CredentialsProvider, transport: CurlTransport, logger: Logger) {
        self.destination = destination
        self.credentials = credentials
        self.transport = transport
        self.signer = SigV4Signer(region: destination.region)
        self.logger = logger
    }

    // MARK: Operations

    /// PutObject: the whole body in one request. Returns the ETag as sent.
    public func putObject(
        key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> String {
        let response = try await perform(
            "PUT", key: key, headers: headers, body: body, payloadHash: payloadHash, policy: .part)
        return try etag(of: response)
    }

    /// CreateMultipartUpload. Returns the server's upload ID.
    public func createMultipartUpload(key: String, headers: [SigV4Header] = []) async throws(S3ClientError) -> String {
        let response = try await perform("POST", key: key, query: [S3QueryItem("uploads")], headers: headers)
        guard let document = S3XMLDocument.parse(response.body), let id = document.fields["UploadId"], !id.isEmpty else {
            throw .unexpectedAnswer(status: response.status, detail: "no UploadId in InitiateMultipartUploadResult")
        }
        return id
    }

    /// UploadPart. Returns the part's ETag exactly as the server sent it.
    public func uploadPart(
        key: String, uploadID: String, partNumber: Int, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> String {
        let response = try await perform(
            "PUT", key: key, query: [S3QueryItem("partNumber", String(partNumber)), S3QueryItem("uploadId", uploadID)],
            headers: headers, body: body, payloadHash: payloadHash, policy: .part)
        return try etag(of: response)
    }

    /// CompleteMultipartUpload, with the parts' ETags as the server gave them. Returns the
    /// object's ETag. An `<Error>` in a 200 answer is an error, never a success.
    public func completeMultipartUpload(
        key: String, uploadID: String, parts: [(number: Int, etag: String)]
    ) async throws(S3ClientError) -> String {
        let body = "<CompleteMultipartUpload>"
            + parts.sorted { $0.number < $1.number }.map {
                "<Part><PartNumber>\($0.number)</PartNumber><ETag>\(xmlEscaped($0.etag))</ETag></Part>"
            }.joined() + "</CompleteMultipartUpload>"
        let bytes = Array(body.utf8)
        let response = try await perform(
            "POST", key: key, query: [S3QueryItem("uploadId", uploadID)],
            headers: [SigV4Header("Content-Type", "application/xml")], body: .bytes(bytes),
            payloadHash: PayloadHash(sha256Of: bytes))
        guard let document = S3XMLDocument.parse(response.body), let etag = document.fields["ETag"] else {
            throw .unexpectedAnswer(status: response.status, detail: "no ETag in CompleteMultipartUploadResult")
        }
        return etag
    }

    /// AbortMultipartUpload. An upload the server no longer knows counts as aborted.
    public func abortMultipartUpload(key: String, uploadID: String) async throws(S3ClientError) {
        do {
            _ = try await perform("DELETE", key: key, query: [S3QueryItem("uploadId", uploadID)])
        } catch .uploadGone {
            return
        }
    }

    /// ListParts, every page of it.
    public func listParts(key: String, uploadID: String) async throws(S3ClientError) -> [ListedPart] {
        var parts: [ListedPart] = []
        var marker: String?
        while true {
            var query = [S3QueryItem("uploadId", uploadID)]
            if let marker { query.append(S3QueryItem("part-number-marker", marker)) }
            let response = try await perform("GET", key: key, query: query)
            guard let document = S3XMLDocument.parse(response.body, records: ["Part"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListPartsResult is not XML")
            }
            for record in document.records["Part", default: []] {
                guard let number = record["PartNumber"].flatMap(Int.init), let etag = record["ETag"],
                    let size = record["Size"].flatMap(Int64.init)
                else { throw .unexpectedAnswer(status: response.status, detail: "a Part without PartNumber, ETag or Size") }
                parts.append(ListedPart(number: number, etag: etag, size: size))
            }
            guard document.fields["IsTruncated"] == "true" else { return parts }
            guard let next = document.fields["NextPartNumberMarker"], next != marker else {
                throw .unexpectedAnswer(status: response.status, detail: "a truncated ListParts page without a new marker")
            }
            marker = next
        }
    }

    /// HeadBucket: whether the bucket exists (and these credentials may use it). Ask before
    /// uploading: some servers (SeaweedFS among them) create a missing bucket on the first
    /// PutObject instead of refusing it, which would hide a mistyped bucket name.
    public func bucketExists() async throws(S3ClientError) -> Bool {
        try await perform("HEAD", key: "", notFoundIsAnswer: true).status != 404
    }

    /// HeadObject; nil when there is no such object.
    public func headObject(key: String) async throws(S3ClientError) -> ObjectHead? {
        let response = try await perform("HEAD", key: key, notFoundIsAnswer: true)
        if response.status == 404 { return nil }
        guard let size = response[header: "content-length"].flatMap(Int64.init) else {
            throw .unexpectedAnswer(status: response.status, detail: "no Content-Length")
        }
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        return ObjectHead(size: size, etag: response[header: "etag"], metadata: metadata)
    }

    // MARK: The request loop

    private func etag(of response: HTTPResponse) throws(S3ClientError) -> String {
        guard let etag = response[header: "etag"] else {
            throw .unexpectedAnswer(status: response.status, detail: "no ETag header")
        }
        return etag
    }

    /// Signs and sends one request, retrying as `policy` decides; returns a 2xx answer (or
    /// a 404 to a HEAD when `notFoundIsAnswer`).
    func perform(
        _ method: String, key: String, query: [S3QueryItem] = [], headers: [SigV4Header] = [],
        body: HTTPBody = .empty, payloadHash: PayloadHash = .emptyBody, policy: RetryPolicy = .control,
        notFoundIsAnswer: Bool = false
    ) async throws(S3ClientError) -> HTTPResponse {
        let location: S3Location
        do {
            location = try S3Location(
                endpoint: destination.endpoint, bucket: destination.bucket, key: key, style: destination.style)
        } catch { throw .request("\(error)") }
        var state = RetryState()
        while true {
            let resolved: ResolvedCredentials
            do { resolved = try await credentials.credentials() } catch { throw .credentials(error) }
            let now = Date().addingTimeInterval(clockOffset.withLock { $0 }.inSeconds)
            let signature: SigV4Signature
            do {
                signature = try signer.sign(
                    SigV4Request(method: method, location: location, query: query, headers: headers, payloadHash: payloadHash),
                    credentials: resolved.credentials, at: now)
            } catch { throw .request("\(error)") }
            let request = HTTPRequest(
                method: method, url: location.url(query: query),
                headers: (headers + signature.headers).map { ($0.name, $0.value) }, body: body)

            let failure: AttemptFailure
            var lastTransportError: TransportError?
            do {
                let response = try await transport.send(request)
                if notFoundIsAnswer, response.status == 404 { return response }
                let parsedError = S3Error.parse(status: response.status, body: Data(response.body))
                if (200..<300).contains(response.status), parsedError == nil { return response }
                failure = .response(
                    parsedError ?? S3Error(status: response.status, code: nil), dateHeader: response[header: "date"])
            } catch {
                if case .bodyUnreadable = error.kind { throw .transport(error, attempts: state.failedAttempts + 1) }
                lastTransportError = error
                failure = .transport(error.kind)
            }

            let decision = policy.decide(after: failure, state: &state, random: Double.random(in: 0..<1), now: Date())
            logger.debug(
                "S3 request failed", metadata: ["method": "\(method)", "key": "\(key)", "decision": "\(decision)"])
            switch decision {
            case .retry(let delay):
                try? await Task.sleep(for: delay)
            case .correctClockAndRetry(let offset):
                clockOffset.withLock { $0 = offset }
                logger.notice("corrected the clock from the server's time", metadata: ["offset": "\(offset)"])
            case .refreshCredentialsAndRetry:
                do { _ = try await credentials.refresh(rejected: resolved) } catch { throw .credentials(error) }
            case .rereadPartAndRetry:
                break  // the body is read from disk again on the next attempt
            case .restartUpload:
                guard case .response(let error, _) = failure else { throw .unexpectedAnswer(status: 0, detail: "\(failure)") }
                throw .uploadGone(error)
            case .fail:
                switch failure {
                case .response(let error, _): throw .server(error, attempts: state.failedAttempts)
                case .transport:
                    throw .transport(
                        lastTransportError ?? TransportError(kind: .other, code: 0, message: "\(failure)"),
                        attempts: state.failedAttempts)
                }
            }
        }
    }
}
