import Foundation
import Logging
import Synchronization

/// A part the server holds for an upload, as `ListParts` reports it.
public struct ListedPart: Sendable, Equatable {
    public var number: Int
    /// Exactly as the server sent it, quotes included: it goes back in Complete unchanged.
    public var etag: String
    public var size: Int64
}

/// ETags as servers write them: quoted by most, bare in some answers (SeaweedFS's
/// `ListParts`). An ETag goes back to the server exactly as received; only comparisons
/// look at it without its quotes.
enum ETag {
    /// The ETag without one pair of surrounding quotes.
    static func unquoted(_ etag: String) -> Substring {
        var bare = Substring(etag)
        if bare.count >= 2, bare.first == "\"", bare.last == "\"" { bare = bare.dropFirst().dropLast() }
        return bare
    }
}

/// What `HeadObject` says of an object.
/// What the answer to a `PutObject` says of the object it wrote. S3 (and SeaweedFS since
/// 4.x) answers a PUT that carried `x-amz-checksum-crc32c` with the checksum it computed of
/// the bytes it stored; its ETag is their MD5 unless encryption hides it.
public struct ObjectWritten: Sendable, Equatable {
    /// Exactly as the server sent it, quotes included.
    public var etag: String
    public var checksumCRC32C: String?
    public var serverSideEncryption: String?
    public var customerKeyAlgorithm: String?

    public init(etag: String, checksumCRC32C: String? = nil, serverSideEncryption: String? = nil, customerKeyAlgorithm: String? = nil) {
        self.etag = etag
        self.checksumCRC32C = checksumCRC32C
        self.serverSideEncryption = serverSideEncryption
        self.customerKeyAlgorithm = customerKeyAlgorithm
    }

    /// Whether the server's own digest of what it stored is `expected`: then the object
    /// holds exactly the bytes sent, and no `HeadObject` is needed to know it.
    public func confirms(_ expected: WholeObjectDigest) -> Bool {
        // The check reads the digests and the encryption only, never the size.
        let head = ObjectHead(
            size: 0, etag: etag, checksumCRC32C: checksumCRC32C, serverSideEncryption: serverSideEncryption,
            customerKeyAlgorithm: customerKeyAlgorithm)
        return expected.check(head) == .matches
    }
}

public struct ObjectHead: Sendable, Equatable {
    public var size: Int64
    /// Exactly as the server sent it, quotes included.
    public var etag: String?
    /// `x-amz-meta-*` headers, by name without the prefix, lowercased.
    public var metadata: [String: String]
    /// `x-amz-checksum-crc32c`: base64, with `-N` for a multipart object's composite
    /// checksum. Servers send it only to a HEAD that asks with `x-amz-checksum-mode: ENABLED`,
    /// and only for objects uploaded with CRC32C checksums.
    public var checksumCRC32C: String?
    /// `x-amz-checksum-type`: `COMPOSITE` or `FULL_OBJECT`, when the server says.
    public var checksumType: String?
    /// `x-amz-server-side-encryption`: `AES256`, `aws:kms`, `aws:kms:dsse`, when the server says.
    public var serverSideEncryption: String?
    /// `x-amz-server-side-encryption-customer-algorithm`: set for objects encrypted with a
    /// key the client provides (SSE-C).
    public var customerKeyAlgorithm: String?
    /// `x-amz-tagging-count`: how many tags the object has; nil when the server does not say.
    public var tagCount: Int?

    public init(
        size: Int64, etag: String?, metadata: [String: String] = [:], checksumCRC32C: String? = nil,
        checksumType: String? = nil, serverSideEncryption: String? = nil, customerKeyAlgorithm: String? = nil,
        tagCount: Int? = nil
    ) {
        self.tagCount = tagCount
        self.size = size
        self.etag = etag
        self.metadata = metadata
        self.checksumCRC32C = checksumCRC32C
        self.checksumType = checksumType
        self.serverSideEncryption = serverSideEncryption
        self.customerKeyAlgorithm = customerKeyAlgorithm
    }

    /// The encryption that makes the ETag something other than the content's MD5, if any:
    /// SSE-KMS (and DSSE-KMS) and SSE-C do; SSE-S3 (`AES256`) does not.
    var encryptionHidingMD5: String? {
        if let customerKeyAlgorithm { return "SSE-C (\(customerKeyAlgorithm))" }
        if let serverSideEncryption, serverSideEncryption.hasPrefix("aws:kms") { return "SSE-KMS (\(serverSideEncryption))" }
        return nil
    }
}

/// What `HeadBucket` says: whether the bucket is there, and the server's time.
public struct BucketHead: Sendable, Equatable {
    public var exists: Bool
    /// The answer's `Date` header (whole seconds), if it had a readable one.
    public var serverDate: Date?
    /// The local time the answer arrived.
    public var receivedAt: Date

    /// How far the server's clock is ahead of ours (negative: behind), from `Date`. The
    /// header names the second the answer was made in, so its middle is the best guess.
    public var clockOffset: Duration? {
        serverDate.map { ServerClock.offset(server: $0.addingTimeInterval(0.5), local: receivedAt) }
    }
}

/// A part of a multipart upload as `CompleteMultipartUpload` lists it.
public struct CompletedPart: Sendable, Hashable {
    public var number: Int
    /// Exactly as `UploadPart` returned it, quotes included.
    public var etag: String
    /// The digest sent with the part. A CRC32C one is listed as `<ChecksumCRC32C>`, which S3
    /// requires for uploads created with a checksum algorithm; an MD5 one is not listed (S3
    /// knows it through the ETag).
    public var digest: PartDigest?

    public init(number: Int, etag: String, digest: PartDigest? = nil) {
        self.number = number
        self.etag = etag
        self.digest = digest
    }
}

/// An unfinished multipart upload, as `ListMultipartUploads` reports it.
public struct ListedUpload: Sendable, Hashable {
    public var key: String
    public var uploadID: String
    public var initiated: Date

    public init(key: String, uploadID: String, initiated: Date) {
        self.key = key
        self.uploadID = uploadID
        self.initiated = initiated
    }
}

/// What `ListMultipartUploads` showed: the uploads kept, out of how many listed.
public struct MultipartUploadListing: Sendable, Equatable {
    /// The uploads the caller kept, in the server's order.
    public var uploads: [ListedUpload] = []
    /// Every upload listed, kept or not.
    public var listed = 0
    public var pages = 0
    /// The listing stopped at its bound of pages or of uploads kept while the server said
    /// there was more.
    public var isTruncated = false

    public init() {}
}

/// An object, as `ListObjectsV2` reports it.
public struct ListedObject: Sendable, Hashable {
    public var key: String
    public var size: Int64
    /// Exactly as the server sent it, quotes included.
    public var etag: String
    public var lastModified: Date

    public init(key: String, size: Int64, etag: String, lastModified: Date) {
        self.key = key
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }
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
    /// The destination's endpoint, parsed.
    let endpoint: S3Endpoint
    let credentials: CredentialsProvider
    let transport: CurlTransport
    let signer: SigV4Signer
    let logger: Logger
    /// Server time minus local time, learned from `RequestTimeTooSkewed`.
    private let clockOffset = Mutex<Duration>(.zero)

    /// Fails for an endpoint that is not a service URL (``S3Endpoint``).
    public init(
        destination: S3Destination, credentials: CredentialsProvider, transport: CurlTransport, logger: Logger
    ) throws(S3AddressError) {
        self.destination = destination
        endpoint = try S3Endpoint(destination.endpoint)
        self.credentials = credentials
        self.transport = transport
        self.signer = SigV4Signer(region: destination.region)
        self.logger = logger
    }

    // MARK: Operations

    /// PutObject: the whole body in one request. Returns the ETag as sent.
    public func putObject(
        key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> ObjectWritten {
        try await put(key: key, body: body, payloadHash: payloadHash, headers: headers, isPayload: true)
    }

    /// PutObject of a document of ingest's own (a card's ASC MHL manifest or chain), not a
    /// file's content: not counted as the job's bytes on the wire (``WireMeter``).
    public func putDocument(key: String, bytes: [UInt8], headers: [SigV4Header]) async throws(S3ClientError) -> ObjectWritten {
        try await put(key: key, body: .bytes(bytes), payloadHash: PayloadHash(sha256Of: bytes), headers: headers, isPayload: false)
    }

    private func put(
        key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header], isPayload: Bool
    ) async throws(S3ClientError) -> ObjectWritten {
        let response = try await perform(
            "PUT", key: key, headers: headers, body: body, payloadHash: payloadHash, policy: .part, isPayload: isPayload)
        return ObjectWritten(
            etag: try etag(of: response), checksumCRC32C: response[header: "x-amz-checksum-crc32c"],
            serverSideEncryption: response[header: "x-amz-server-side-encryption"],
            customerKeyAlgorithm: response[header: "x-amz-server-side-encryption-customer-algorithm"])
    }

    /// CreateMultipartUpload. Returns the server's upload ID. An upload whose parts carry
    /// CRC32C digests is created with ``PartDigestAlgorithm/createMultipartUploadHeaders``.
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
            headers: headers, body: body, payloadHash: payloadHash, policy: .part, isPayload: true)
        return try etag(of: response)
    }

    /// CompleteMultipartUpload, with the parts' ETags as the server gave them (and their
    /// CRC32C checksums, for an upload created with that algorithm). Returns the object's
    /// ETag. An `<Error>` in a 200 answer is an error, never a success.
    public func completeMultipartUpload(
        key: String, uploadID: String, parts: [CompletedPart], headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> String {
        let body = "<CompleteMultipartUpload>"
            + parts.sorted { $0.number < $1.number }.map { part in
                var element = "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(xmlEscaped(part.etag))</ETag>"
                if let digest = part.digest, let name = digest.algorithm.completeElementName {
                    element += "<\(name)>\(digest.base64)</\(name)>"
                }
                return element + "</Part>"
            }.joined() + "</CompleteMultipartUpload>"
        let bytes = Array(body.utf8)
        let response = try await perform(
            "POST", key: key, query: [S3QueryItem("uploadId", uploadID)],
            headers: [SigV4Header("Content-Type", "application/xml")] + headers, body: .bytes(bytes),
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

    /// The most pages `ListParts` follows. An upload holds at most 10,000 parts and servers
    /// send up to 1,000 a page (AWS and SeaweedFS both), so 10 pages hold any upload; 1,000
    /// leaves room for servers that send as few as 10 a page, and stops one that pages forever.
    public static let maxListPartsPages = 1_000

    /// ListParts, every page of it (at most ``maxListPartsPages``).
    public func listParts(key: String, uploadID: String) async throws(S3ClientError) -> [ListedPart] {
        var parts: [ListedPart] = []
        var marker: String?
        var pages = ListingPages(
            "ListParts", limit: Self.maxListPartsPages, pastLimitNote: "more than an upload of at most "
                + "\(S3UploadLimits.maxPartCount) parts needs: the server pages forever")
        while true {
            var query = [S3QueryItem("uploadId", uploadID)]
            if let marker { query.append(S3QueryItem("part-number-marker", marker)) }
            let response = try await perform("GET", key: key, query: query)
            pages.read()
            guard let document = S3XMLDocument.parse(response.body, records: ["Part"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListPartsResult is not XML")
            }
            for record in document.records["Part", default: []] {
                guard let number = record["PartNumber"].flatMap(Int.init), let etag = record["ETag"],
                    let size = record["Size"].flatMap(Int64.init)
                else { throw .unexpectedAnswer(status: response.status, detail: "a Part without PartNumber, ETag or Size") }
                parts.append(ListedPart(number: number, etag: etag, size: size))
            }
            guard parts.count <= S3UploadLimits.maxPartCount else {
                throw .unexpectedAnswer(
                    status: response.status,
                    detail: "ListParts listed more than \(S3UploadLimits.maxPartCount) parts, more than any upload holds")
            }
            guard document.fields["IsTruncated"] == "true" else { return parts }
            guard let next = document.fields["NextPartNumberMarker"] else {
                throw .unexpectedAnswer(status: response.status, detail: "a truncated ListParts page without a marker")
            }
            try pages.follow(next, status: response.status)
            marker = next
        }
    }

    /// HeadBucket: whether the bucket exists (and these credentials may use it). Ask before
    /// uploading: some servers (SeaweedFS among them) create a missing bucket on the first
    /// PutObject instead of refusing it, which would hide a mistyped bucket name.
    public func bucketExists() async throws(S3ClientError) -> Bool {
        try await headBucket().exists
    }

    /// HeadBucket, with the server's clock: whether the bucket exists, and the time its
    /// answer's `Date` header gives (`ingest check` compares it with ours).
    public func headBucket() async throws(S3ClientError) -> BucketHead {
        let response = try await perform("HEAD", key: "", notFoundIsAnswer: true)
        return BucketHead(
            exists: response.status != 404, serverDate: response[header: "date"].flatMap(ServerClock.parseHTTPDate),
            receivedAt: Date())
    }

    /// HeadObject; nil when there is no such object.
    ///
    /// With `checksumMode` the request asks for the object's checksums
    /// (`x-amz-checksum-mode: ENABLED`), which S3 reports only then: the whole-object check
    /// of CRC32C uploads needs it (``WholeObjectDigest/needsChecksumMode``). It is not the
    /// default because on AWS it also needs `kms:Decrypt` for SSE-KMS objects.
    public func headObject(key: String, checksumMode: Bool = false) async throws(S3ClientError) -> ObjectHead? {
        let headers = checksumMode ? [SigV4Header("x-amz-checksum-mode", "ENABLED")] : []
        let response = try await perform("HEAD", key: key, headers: headers, notFoundIsAnswer: true)
        if response.status == 404 { return nil }
        guard let size = response[header: "content-length"].flatMap(Int64.init) else {
            throw .unexpectedAnswer(status: response.status, detail: "no Content-Length")
        }
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        return ObjectHead(
            size: size, etag: response[header: "etag"], metadata: metadata,
            checksumCRC32C: response[header: "x-amz-checksum-crc32c"],
            checksumType: response[header: "x-amz-checksum-type"],
            serverSideEncryption: response[header: "x-amz-server-side-encryption"],
            customerKeyAlgorithm: response[header: "x-amz-server-side-encryption-customer-algorithm"],
            tagCount: response[header: "x-amz-tagging-count"].flatMap { Int($0) })
    }

    /// The most pages a listing follows: a server (or something posing as one) that answers
    /// truncated page after truncated page, each with new markers, would otherwise be
    /// followed forever. 100 pages of the default 1,000 entries hold 100,000 unfinished
    /// uploads, far beyond what one station leaves.
    public static let maxListPages = 100

    /// The most uploads a ``listMultipartUploads(prefix:pageSize:maxPages:keeping:)`` keeps;
    /// the listing stops there as at its page bound. With keys and upload ids of at most
    /// ``maxListedNameBytes`` each, what is kept stays under 25 MB whatever the server sends.
    public static let maxKeptUploads = 10_000

    /// The longest key or upload id a listing accepts: S3 keys are at most 1,024 bytes
    /// (``S3UploadLimits/maxKeyBytes``), upload ids far shorter.
    static let maxListedNameBytes = S3UploadLimits.maxKeyBytes

    /// ListMultipartUploads under `prefix`: the uploads begun and neither completed nor
    /// aborted (a rescan aborts the ones no journal knows). Only those `keeping` accepts are
    /// kept, so a long listing costs the memory of what is kept, not of what is listed; at
    /// most `maxPages` pages are followed (``MultipartUploadListing/isTruncated`` then says
    /// the server had more).
    ///
    /// Keys are asked for as they are, not URL-encoded (`encoding-type=url`): SeaweedFS 4.48
    /// answers `<EncodingType>url</EncodingType>` to that but sends the keys unencoded, so
    /// decoding them would turn `+` into a space and break on `%`. Spaces, `+`, `%`, `&` and
    /// any non-ASCII text come back exactly; what the encoding would add is only the control
    /// characters XML 1.0 cannot carry, so object keys must be built without them.
    ///
    /// Pages follow `NextKeyMarker` and `NextUploadIdMarker`, each sent when the server gave
    /// it: AWS orders by key and sends both; SeaweedFS orders by upload ID and sends only the
    /// second. `pageSize` (`max-uploads`, at most 1,000) is for tests; the server's default
    /// is 1,000.
    public func listMultipartUploads(
        prefix: String = "", pageSize: Int? = nil, maxPages: Int = S3Client.maxListPages,
        keeping: (ListedUpload) -> Bool = { _ in true }
    ) async throws(S3ClientError) -> MultipartUploadListing {
        var listing = MultipartUploadListing()
        var markers: (key: String?, uploadID: String?) = (nil, nil)
        var pages = ListingPages(
            "ListMultipartUploads", limit: maxPages, pastLimitNote: "more unfinished uploads than a station leaves")
        while true {
            var query = [S3QueryItem("uploads")]
            if !prefix.isEmpty { query.append(S3QueryItem("prefix", prefix)) }
            if let pageSize { query.append(S3QueryItem("max-uploads", String(pageSize))) }
            if let key = markers.key { query.append(S3QueryItem("key-marker", key)) }
            if let uploadID = markers.uploadID { query.append(S3QueryItem("upload-id-marker", uploadID)) }
            let response = try await perform("GET", key: "", query: query)
            pages.read()
            listing.pages = pages.count
            guard let document = S3XMLDocument.parse(response.body, records: ["Upload"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListMultipartUploadsResult is not XML")
            }
            for record in document.records["Upload", default: []] {
                guard let key = record["Key"], let uploadID = record["UploadId"], !uploadID.isEmpty,
                    let initiated = record["Initiated"].flatMap(ServerClock.parseISO8601)
                else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "an Upload without Key, UploadId or an ISO 8601 Initiated")
                }
                guard key.utf8.count <= Self.maxListedNameBytes, uploadID.utf8.count <= Self.maxListedNameBytes else {
                    throw .unexpectedAnswer(
                        status: response.status,
                        detail: "an Upload whose Key or UploadId is longer than \(Self.maxListedNameBytes) bytes")
                }
                let upload = ListedUpload(key: key, uploadID: uploadID, initiated: initiated)
                listing.listed += 1
                if listing.uploads.count < Self.maxKeptUploads, keeping(upload) { listing.uploads.append(upload) }
            }
            guard document.fields["IsTruncated"] == "true" else { return listing }
            let next = (key: document.fields["NextKeyMarker"], uploadID: document.fields["NextUploadIdMarker"])
            guard next.key != nil || next.uploadID != nil else {
                throw .unexpectedAnswer(
                    status: response.status, detail: "a truncated ListMultipartUploads page without markers")
            }
            guard !pages.isAtLimit, listing.uploads.count < Self.maxKeptUploads else {
                listing.isTruncated = true
                logger.warning(
                    "ListMultipartUploads has more than is followed",
                    metadata: ["prefix": "\(prefix)", "pages": "\(listing.pages)", "kept": "\(listing.uploads.count)"])
                return listing
            }
            try pages.follow([next.key, next.uploadID], status: response.status)
            markers = next
        }
    }

    /// ListObjectsV2 under `prefix`, every page of it.
    ///
    /// Keys are asked for URL-encoded (`encoding-type=url`), the one form in which any key,
    /// even one with characters XML 1.0 cannot carry, survives, and decoded when the answer
    /// says `<EncodingType>url</EncodingType>`: `+` is a space (S3 encodes as HTML forms do),
    /// `%XX` a byte of the UTF-8 form. AWS and SeaweedFS both encode this listing's keys.
    ///
    /// Pages follow `NextContinuationToken`, which is opaque and never encoded. `pageSize`
    /// (`max-keys`, at most 1,000) is for tests; the server's default is 1,000.
    public func listObjectsV2(prefix: String = "", pageSize: Int? = nil) async throws(S3ClientError) -> [ListedObject] {
        var objects: [ListedObject] = []
        try await listObjectsV2(prefix: prefix, pageSize: pageSize) { objects += $0 }
        return objects
    }

    /// The most pages ``listObjectsV2(prefix:pageSize:maxPages:page:)`` follows: 10,000,000
    /// objects at the usual 1,000 a page, more than `ingest ls` (a HeadObject each) lists in
    /// a day; it stops a server that pages forever.
    public static let maxObjectListPages = 10_000

    /// ListObjectsV2 page by page: `page` takes each page's objects before the next is asked
    /// for, so a listing of any length holds one page in memory. More than `maxPages` pages
    /// is an error.
    public func listObjectsV2(
        prefix: String = "", pageSize: Int? = nil, maxPages: Int = S3Client.maxObjectListPages,
        page: ([ListedObject]) async -> Void
    ) async throws(S3ClientError) {
        var token: String?
        var pages = ListingPages(
            "ListObjectsV2", limit: maxPages,
            pastLimitNote: "a listing too long to follow or a server that pages forever: list a narrower prefix")
        while true {
            var query = [S3QueryItem("list-type", "2"), S3QueryItem("encoding-type", "url")]
            if !prefix.isEmpty { query.append(S3QueryItem("prefix", prefix)) }
            if let pageSize { query.append(S3QueryItem("max-keys", String(pageSize))) }
            if let token { query.append(S3QueryItem("continuation-token", token)) }
            let response = try await perform("GET", key: "", query: query)
            pages.read()
            guard let document = S3XMLDocument.parse(response.body, records: ["Contents"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListBucketResult is not XML")
            }
            let encoded = document.fields["EncodingType"] == "url"
            var objects: [ListedObject] = []
            for record in document.records["Contents", default: []] {
                guard let rawKey = record["Key"], let size = record["Size"].flatMap(Int64.init),
                    let etag = record["ETag"], let lastModified = record["LastModified"].flatMap(ServerClock.parseISO8601)
                else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "a Contents without Key, Size, ETag or an ISO 8601 LastModified")
                }
                guard let key = encoded ? S3Encoding.formDecoded(rawKey) : rawKey else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "the key '\(rawKey)' is not URL-encoded UTF-8")
                }
                objects.append(ListedObject(key: key, size: size, etag: etag, lastModified: lastModified))
            }
            await page(objects)
            guard document.fields["IsTruncated"] == "true" else { return }
            guard let next = document.fields["NextContinuationToken"] else {
                throw .unexpectedAnswer(status: response.status, detail: "a truncated ListObjectsV2 page without a token")
            }
            try pages.follow(next, status: response.status)
            token = next
        }
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
        notFoundIsAnswer: Bool = false, isPayload: Bool = false
    ) async throws(S3ClientError) -> HTTPResponse {
        let location: S3Location
        do {
            location = try S3Location(
                endpoint: endpoint, bucket: destination.bucket, key: key, style: destination.addressing)
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
                headers: (headers + signature.headers).map { ($0.name, $0.value) }, body: body, isPayload: isPayload)

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
                await transport.pause(for: delay)  // cut short by a stop: the next attempt is cut too
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

extension SigV4Header {
    /// Makes `PutObject` and `CompleteMultipartUpload` write only where no object is: a
    /// key that holds one answers `412 PreconditionFailed` and keeps its object.
    public static let ifNoneMatchAny = SigV4Header("If-None-Match", "*")
}

/// Whether a server honours `If-None-Match: *` on writes.
public enum ConditionalWrites: Sendable, Equatable {
    case honoured
    /// The server wrote over an object it was told to keep, or refused the probe; the
    /// reason says which.
    case notHonoured(reason: String)
}

/// What one probe of conditional writes found, in full (``S3Client/tryConditionalWrite(key:)``).
public struct ConditionalWriteTrial: Sendable, Equatable {
    public enum Answer: Sendable, Equatable {
        /// A write to a key that held an object was refused with `412`.
        case honoured
        /// The second write wrote over the object the first had just written.
        case ignored
        /// A write failed otherwise (refused credentials, a server error…).
        case failed(S3ClientError)
    }

    public var answer: Answer
    /// The probe wrote an object and could not delete it (credentials without
    /// `DeleteObject` leave it, empty): why.
    public var leftInPlace: S3ClientError?
}

extension S3Client {
    /// Finds out whether the server honours `If-None-Match: *` (``tryConditionalWrite(key:)``),
    /// for the uploader: a write that failed counts as not honoured, with its words.
    public func probeConditionalWrites(key: String) async -> ConditionalWrites {
        let trial = await tryConditionalWrite(key: key)
        if let error = trial.leftInPlace {
            logger.info("the probe object stays", metadata: ["key": "\(key)", "error": "\(error)"])
        }
        switch trial.answer {
        case .honoured: return .honoured
        case .ignored:
            return .notHonoured(reason: "PutObject with If-None-Match: * wrote over \(key), which it had just written")
        case .failed(let error): return .notHonoured(reason: "a conditional PutObject of \(key) failed: \(error)")
        }
    }

    /// Probes `If-None-Match: *` with an empty object at `key`: written only if absent, then
    /// written again only if absent. A server that honours the condition answers the second
    /// write (or the first, if another probe's object is there) with `412`; one that ignores
    /// it writes the same empty object twice, which harms nothing. The probe deletes the
    /// object it made.
    public func tryConditionalWrite(key: String) async -> ConditionalWriteTrial {
        let headers = [
            SigV4Header.ifNoneMatchAny, SigV4Header("Content-Type", "text/plain"),
            SigV4Header("x-amz-meta-ingest-probe", "conditional writes"),
        ]
        var created = false
        var answer = ConditionalWriteTrial.Answer.honoured
        for _ in 1...2 {
            do {
                _ = try await putObject(key: key, body: .bytes([]), payloadHash: .emptyBody, headers: headers)
            } catch {
                if !error.isPreconditionFailed { answer = .failed(error) }
                break
            }
            if created { answer = .ignored }
            created = true
        }
        var trial = ConditionalWriteTrial(answer: answer)
        if created {
            do { _ = try await perform("DELETE", key: key) } catch { trial.leftInPlace = error }
        }
        return trial
    }
}
