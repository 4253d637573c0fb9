// A tus 1.0 server as a destination: the second implementation of ObjectStore, beside S3.

import Foundation
import Synchronization

/// A tus 1.0 server (tus.io resumable uploads) as the destination of a card's files.
///
/// A tus server keeps uploads, each a byte stream at its own URL, appended at its offset;
/// it has no keys, no listing, no tags and no copies. The object store's operations map
/// onto it so:
/// - an upload in parts is one tus upload: `createMultipartUpload` is the creation (`POST`
///   with `Upload-Length` and the labels as `Upload-Metadata`), and its id is the upload's
///   URL, which the journal records before the first byte is sent;
/// - part *n* is a `PATCH` at its offset (parts go one at a time, in order: the store lacks
///   ``StoreCapabilities/partsInAnyOrder``). A part the server holds in part (a kill or a cut
///   connection mid-chunk) is finished from the server's offset, so a byte is sent twice only
///   if it was in flight when the connection broke. Its "ETag" is `tus:<end offset>`;
/// - `listParts` is a `HEAD`: the parts its `Upload-Offset` covers whole;
/// - `completeMultipartUpload` checks with a `HEAD` that the server holds every byte
///   (`Upload-Offset` = `Upload-Length`): that is what makes the upload the object. Its
///   "ETag" is the upload's URL;
/// - a whole object in one request (``putObject(key:body:payloadHash:headers:)``, a file of
///   at most one chunk) is a creation carrying its body (`creation-with-upload`) where the
///   server announces it, else a creation and a `PATCH`;
/// - `headObject` by key answers for the uploads this process has created or resumed (the
///   journal names their URLs to it): the server's offset and length, and the metadata it
///   kept (`xxh128` among it). A key it does not know reads as free: a tus server never
///   writes over an upload, since each creation is a new one, so "free" replaces nothing;
/// - `abortMultipartUpload` is `DELETE` (`termination`) where announced; elsewhere the
///   server lets an unfinished upload expire.
///
/// The extra headers (a bearer token) are the ``TusClient``'s, never logged.
public final class TusStore: ObjectStore {
    public let client: TusClient
    /// What the server said of itself in answer to `OPTIONS`: asked once, on first need.
    private let info = Mutex<TusServerInfo?>(nil)
    /// The upload of each key this process created or was told of (the journal's upload
    /// id) and has not verified yet, so that a `HEAD` by key can find it. Forgotten once a
    /// `HEAD` finds it whole (the verification) or it is terminated, so a card of 100,000
    /// files holds only the uploads in flight.
    private let uploads = Mutex<[String: Known]>([:])

    private struct Known {
        var url: String
        /// The labels sent with its creation (``metadata(key:headers:)``), if this process
        /// knows them.
        var labels: TusMetadata?
        /// The server's offset as its last answer said; nil when unknown (an upload an
        /// earlier process began, or a request that failed): asked before the next `PATCH`,
        /// so no chunk is sent to an offset the server would refuse after reading it all.
        var offset: Int64?
    }

    public init(client: TusClient) {
        self.client = client
    }

    /// None: no listing, tags, copies or documents, and parts only in order.
    public static let capabilities: StoreCapabilities = []

    public var capabilities: StoreCapabilities { Self.capabilities }

    /// tus signs nothing: a body is never hashed for a signature.
    public var bodiesCrossPlainHTTP: Bool { false }

    public var uploadListingBound: ListingBound { ListingBound(pages: 0, kept: 0) }

    // MARK: the server

    /// `OPTIONS`: a tus 1.0 server with the `creation` extension is there, and takes these
    /// headers. The answer has no useful `Date` (tus signs nothing, so the clock does not
    /// matter).
    public func headBucket() async throws(S3ClientError) -> BucketHead {
        _ = try await serverInfo()
        return BucketHead(exists: true, serverDate: nil, receivedAt: Date())
    }

    /// A tus server never writes over an upload: each creation makes a new one at a new URL.
    /// Nothing to probe: no key can hold bytes that a write would replace, and the uploads'
    /// checksums are the tus store's own affair.
    public func tryConditionalWrite(key: String) async -> ConditionalWriteTrial {
        ConditionalWriteTrial(answer: .honoured)
    }

    func serverInfo() async throws(S3ClientError) -> TusServerInfo {
        if let known = info.withLock({ $0 }) { return known }
        let found: TusServerInfo
        do { found = try await client.serverInfo() } catch { throw Self.storeError(error) }
        guard found.speaksVersion1 else {
            throw .unexpectedAnswer(
                status: 200,
                detail: "the tus server speaks \(found.versions.joined(separator: ", ")), not \(TusClient.protocolVersion)")
        }
        guard found.extensions.contains("creation") else {
            throw .unexpectedAnswer(
                status: 200, detail: "the tus server does not announce the creation extension, which ingest needs to start uploads")
        }
        info.withLock { $0 = found }
        return found
    }

    // MARK: objects

    /// The upload of `key` this process knows, when the server holds every byte of it. Its
    /// labels are those the server's `HEAD` gives back, over those it was created with: the
    /// protocol has a `HEAD` give the whole `Upload-Metadata`, but some servers give only
    /// part of it (tuspyserver: `filename` and `filetype`), and the upload at this URL was
    /// created with ours. A server's label that differs from ours is the server's word.
    public func headObject(key: String, checksumMode: Bool) async throws(S3ClientError) -> ObjectHead? {
        guard let known = uploads.withLock({ $0[key] }) else { return nil }
        let status: TusUploadStatus
        do { status = try await client.status(of: known.url) } catch { throw Self.storeError(error) }
        guard case let .found(offset, length, _, metadata) = status, let length, offset == length else { return nil }
        forget(key, url: known.url)
        var labels: [String: String] = [:]
        for source in [known.labels ?? TusMetadata(), metadata] {
            for name in source.values.keys {
                if let value = source.text(name) { labels[name.lowercased()] = value }
            }
        }
        return ObjectHead(size: length, etag: known.url, metadata: labels)
    }

    /// The upload at the URL its completion recorded (its ``StoredObject/etag``: the URL is
    /// what identifies an upload here), complete: every byte the server holds, with the
    /// labels it gives back over those the upload was created with. What a tus server can
    /// prove is that much: an upload of that length at that URL, finished; the `xxh128`
    /// label is the server's word only where its `HEAD` gives `Upload-Metadata` back.
    public func headObject(recorded object: StoredObject, key: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectHead?
    {
        resumingUpload(key: key, uploadID: object.etag, headers: headers)
        return try await headObject(key: key, checksumMode: false)
    }

    public func resumingUpload(key: String, uploadID url: String, headers: [SigV4Header]) {
        let labels = try? Self.metadata(key: key, headers: headers)
        uploads.withLock { $0[key] = Known(url: url, labels: labels, offset: nil) }
    }

    /// A file of at most one chunk, in one request where the server takes a body with the
    /// creation: a lost answer then costs that one chunk sent again, to a new upload (the
    /// first expires unused), as a lost `PATCH` would.
    public func putObject(key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectWritten
    {
        let info = try await serverInfo()
        let metadata = try Self.metadata(key: key, headers: headers)
        let url: String
        let offset: Int64
        do {
            let created = try await client.create(
                length: body.length, metadata: metadata,
                body: Self.createsWithBody(info) ? body : .empty)
            (url, offset) = (created.url, created.offset)
        } catch { throw Self.storeError(error) }
        uploads.withLock { $0[key] = Known(url: url, labels: metadata, offset: offset) }
        if offset < body.length {
            _ = try await append(key: key, url: url, offset: offset, body: body.suffix(from: offset), known: offset)
        }
        return ObjectWritten(etag: url)
    }

    public func createMultipartUpload(key: String, size: Int64, headers: [SigV4Header]) async throws(S3ClientError) -> String {
        _ = try await serverInfo()
        let metadata = try Self.metadata(key: key, headers: headers)
        let url: String
        do { url = try await client.create(length: size, metadata: metadata).url } catch { throw Self.storeError(error) }
        uploads.withLock { $0[key] = Known(url: url, labels: metadata, offset: 0) }
        return url
    }

    /// `PATCH`es of what the part lacks on the server, from the server's offset: asked first
    /// when this process does not know it (an upload an earlier process began, a request
    /// that failed) and after every failed `PATCH` (``TusClient/appendAll(to:offset:body:known:checksum:)``).
    /// So after a kill, a power cut or a broken connection mid-chunk only the bytes the server
    /// did not keep are sent again.
    public func uploadPart(
        key: String, uploadID url: String, partNumber: Int, offset: Int64, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header]
    ) async throws(S3ClientError) -> String {
        let known = uploads.withLock { $0[key].flatMap { $0.url == url ? $0.offset : nil } }
        _ = try await append(key: key, url: url, offset: offset, body: body, known: known)
        return "tus:\(offset + body.length)"
    }

    /// The parts the server's offset covers whole (and the last when it holds every byte).
    public func listParts(key: String, uploadID url: String, partSize: Int64) async throws(S3ClientError) -> [ListedPart] {
        precondition(partSize > 0, "a part has bytes")
        let (offset, length) = try await position(of: url, key: key)
        var parts: [ListedPart] = []
        var start: Int64 = 0
        while start < length {
            let end = min(start + partSize, length)
            guard end <= offset else { break }
            parts.append(ListedPart(number: parts.count + 1, etag: "tus:\(end)", size: end - start))
            start = end
        }
        return parts
    }

    /// The upload is the object once the server holds every byte of it.
    public func completeMultipartUpload(key: String, uploadID url: String, parts: [CompletedPart], headers: [SigV4Header])
        async throws(S3ClientError) -> String?
    {
        let (offset, length) = try await position(of: url, key: key)
        guard offset == length else {
            throw .unexpectedAnswer(
                status: 200, detail: "the tus server holds \(offset) of the upload's \(length) bytes; the missing parts are sent again")
        }
        return url
    }

    public func abortMultipartUpload(key: String, uploadID url: String) async throws(S3ClientError) {
        guard try await serverInfo().extensions.contains("termination") else { return }
        do { try await client.terminate(url) } catch { throw Self.storeError(error) }
        forget(key, url: url)
    }

    /// Only the upload known: a tus server lists nothing, so an upload whose URL was never
    /// journalled is found by no one and expires on the server.
    @discardableResult
    public func abortUploads(key: String, known: String?, othersBefore: Date) async throws(S3ClientError) -> Int {
        guard let known else { return 0 }
        try await abortMultipartUpload(key: key, uploadID: known)
        return 1
    }

    // MARK: what a tus server cannot do (the capabilities say so; no caller asks)

    public func putDocument(key: String, bytes: [UInt8], headers: [SigV4Header]) async throws(S3ClientError) -> ObjectWritten {
        throw Self.cannot("keep documents")
    }

    public func getDocument(key: String) async throws(S3ClientError) -> StoredDocument? { throw Self.cannot("keep documents") }

    public func copyObject(key: String, from source: String, sourceETag: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> String
    {
        throw Self.cannot("copy")
    }

    public func uploadPartCopy(
        key: String, uploadID: String, partNumber: Int, from source: String, sourceETag: String, range: ClosedRange<Int64>
    ) async throws(S3ClientError) -> String {
        throw Self.cannot("copy")
    }

    public func getObject(key: String, range: ClosedRange<Int64>, ifMatch: String?) async throws(S3ClientError) -> ObjectRange? {
        throw Self.cannot("read objects back")
    }

    public func getObjectTagging(key: String) async throws(S3ClientError) -> [String: String]? { throw Self.cannot("tag") }

    public func putObjectTagging(key: String, tags: [String: String]) async throws(S3ClientError) { throw Self.cannot("tag") }

    public func listObjects(prefix: String, page: ([ListedObject]) async -> Void) async throws(S3ClientError) {
        throw Self.cannot("list")
    }

    public func listUploads(prefix: String, keeping: (ListedUpload) -> Bool) async throws(S3ClientError) -> MultipartUploadListing {
        throw Self.cannot("list")
    }

    // MARK: helpers

    /// Whether a whole object goes in its creation's request: where the server takes a body
    /// there (`creation-with-upload`), unless chunks carry checksums, which only a `PATCH`
    /// does here.
    static func createsWithBody(_ info: TusServerInfo) -> Bool {
        info.extensions.contains("creation-with-upload")
            && !(info.extensions.contains("checksum") && TusChecksum.strongest(of: info.checksumAlgorithms) != nil)
    }

    /// The upload of `key` is at `url`, where the server holds `offset` bytes (nil: not
    /// known); its labels as known already.
    private func note(_ key: String, url: String, offset: Int64?) {
        uploads.withLock { uploads in
            let labels = uploads[key].flatMap { $0.url == url ? $0.labels : nil }
            uploads[key] = Known(url: url, labels: labels, offset: offset)
        }
    }

    private func forget(_ key: String, url: String) {
        uploads.withLock { if $0[key]?.url == url { $0[key] = nil } }
    }

    /// `body`, the upload's bytes from `offset`, until the server holds them all, each
    /// `PATCH` with the checksum of its bytes where the server announces the `checksum`
    /// extension and an algorithm this client has (the strongest both have): then the server
    /// stores no byte of a chunk that changed on the way. `known`: the server's offset, if
    /// this process knows it.
    private func append(key: String, url: String, offset: Int64, body: HTTPBody, known: Int64?) async throws(S3ClientError)
        -> Int64
    {
        let info = try await serverInfo()
        let algorithm =
            info.extensions.contains("checksum") ? TusChecksum.strongest(of: info.checksumAlgorithms) : nil
        do {
            let reached = try await client.appendAll(to: url, offset: offset, body: body, known: known) {
                (bytes: HTTPBody) throws(TusError) -> TusChecksum? in
                guard let algorithm else { return nil }
                do {
                    return try await BlockingWorkers.shared.run { () throws(SystemError) -> TusChecksum in
                        try TusChecksum.compute(algorithm, of: bytes)
                    }
                } catch {
                    throw .unexpectedAnswer(status: 0, detail: "the chunk's \(algorithm) checksum cannot be computed: \(error)")
                }
            }
            note(key, url: url, offset: reached)
            return reached
        } catch {
            note(key, url: url, offset: nil)
            throw Self.storeError(error)
        }
    }

    /// The upload's offset and length; gone is ``S3ClientError/uploadGone(_:)``, and an
    /// answer without a length is refused (every upload ingest creates has one).
    private func position(of url: String, key: String) async throws(S3ClientError) -> (offset: Int64, length: Int64) {
        let status: TusUploadStatus
        do { status = try await client.status(of: url) } catch { throw Self.storeError(error) }
        switch status {
        case .gone:
            forget(key, url: url)
            throw Self.gone(status: 404)
        case let .found(offset, length?, _, _):
            note(key, url: url, offset: offset)
            return (offset, length)
        case .found(_, nil, _, _): throw .unexpectedAnswer(status: 200, detail: "the tus server's HEAD has no Upload-Length")
        }
    }

    /// The labels an S3 object would carry (`x-amz-meta-*`, decoded), the key as `filename`
    /// and the content type as `filetype` (the names tus clients and servers use for them).
    static func metadata(key: String, headers: [SigV4Header]) throws(S3ClientError) -> TusMetadata {
        var metadata = TusMetadata()
        do {
            for header in headers {
                let name = header.name.lowercased()
                if name.hasPrefix(ObjectLabels.metadataPrefix) {
                    let label = String(name.dropFirst(ObjectLabels.metadataPrefix.count))
                    try metadata.set(label, Array(MetadataEncoding.decode(header.value).utf8))
                } else if name == "content-type" {
                    try metadata.set("filetype", Array(header.value.utf8))
                }
            }
            try metadata.set("filename", Array(key.utf8))
            if metadata.values["filetype"] == nil { try metadata.set("filetype", Array("application/octet-stream".utf8)) }
        } catch {
            throw .request("\(error)")
        }
        return metadata
    }

    private static func gone(status: Int) -> S3ClientError {
        .uploadGone(S3Error(status: status, code: nil, message: "the tus upload is gone: it expired or was terminated"))
    }

    private static func cannot(_ what: String) -> S3ClientError {
        .request("a tus server cannot \(what) (the store's capabilities say so; this is a bug: please report it)")
    }

    /// A tus failure as the store's callers read failures: a transport failure stays one
    /// (retried the same way, `cut` included), a gone upload is ``S3ClientError/uploadGone(_:)``
    /// (the upload starts over), a 460 twice is a bad digest, and the server's refusals keep
    /// their status, with the tus client's words (which never hold a header's value).
    static func storeError(_ error: TusError) -> S3ClientError {
        switch error {
        case let .transport(problem, attempts): .transport(problem, attempts: attempts)
        case .uploadGone(let status): gone(status: status)
        case .offsetMismatch(let sent):
            .server(S3Error(status: 409, code: nil, message: TusError.offsetMismatch(sent: sent).description), attempts: 1)
        case .checksumMismatch:
            .server(S3Error(status: 460, code: .badDigest, message: error.description), attempts: 2)
        case let .server(status, _, attempts): .server(S3Error(status: status, code: nil, message: error.description), attempts: attempts)
        case let .unexpectedAnswer(status, detail): .unexpectedAnswer(status: status, detail: detail)
        case .invalidCreationURL, .invalidHeader, .foreignServer, .invalidMetadataKey: .request(error.description)
        }
    }
}
