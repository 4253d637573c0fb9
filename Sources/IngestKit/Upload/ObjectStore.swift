import Foundation

/// The S3 operations one upload makes, as the uploader sees them: ``S3Client`` is the real
/// store, and unit tests drive ``ObjectUploader`` with a scripted one that fails each way
/// the S3 contract allows, at each step.
///
/// Every operation throws ``S3ClientError`` after its own retries (the store's business):
/// the uploader decides only what a failure that outlived them means.
protocol ObjectStore: Sendable {
    /// Bodies go to another host over plain HTTP, so each is signed with its SHA-256
    /// (``PayloadHash``) rather than sent as `UNSIGNED-PAYLOAD`.
    var bodiesCrossPlainHTTP: Bool { get }

    /// HeadObject; nil when there is no object at `key`. `checksumMode` asks for the
    /// object's checksums (`x-amz-checksum-mode: ENABLED`).
    func headObject(key: String, checksumMode: Bool) async throws(S3ClientError) -> ObjectHead?
    /// PutObject of the whole body; returns what its answer says of the object.
    func putObject(key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectWritten
    /// CreateMultipartUpload; returns the server's upload ID.
    func createMultipartUpload(key: String, headers: [SigV4Header]) async throws(S3ClientError) -> String
    /// UploadPart; returns the part's ETag exactly as sent.
    func uploadPart(
        key: String, uploadID: String, partNumber: Int, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header]
    ) async throws(S3ClientError) -> String
    /// ListParts, every page.
    func listParts(key: String, uploadID: String) async throws(S3ClientError) -> [ListedPart]
    /// CompleteMultipartUpload; returns the object's ETag.
    func completeMultipartUpload(key: String, uploadID: String, parts: [CompletedPart], headers: [SigV4Header])
        async throws(S3ClientError) -> String
    /// AbortMultipartUpload; an upload the server no longer knows counts as aborted.
    func abortMultipartUpload(key: String, uploadID: String) async throws(S3ClientError)
    /// Aborts `known` and every other unfinished multipart upload at exactly `key`.
    @discardableResult
    func abortUploads(key: String, known: String?) async throws(S3ClientError) -> Int
    /// CopyObject of `source`, only while its ETag is `sourceETag`, to `key`, with `headers`
    /// for the copy's own labels; the copy's ETag.
    func copyObject(key: String, from source: String, sourceETag: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> String
    /// UploadPartCopy of the bytes `range` of `source`, only while its ETag is `sourceETag`;
    /// the part's ETag.
    func uploadPartCopy(
        key: String, uploadID: String, partNumber: Int, from source: String, sourceETag: String, range: ClosedRange<Int64>
    ) async throws(S3ClientError) -> String
    /// GetObjectTagging; nil when there is no object at `key`.
    func getObjectTagging(key: String) async throws(S3ClientError) -> [String: String]?
    /// PutObjectTagging: the object's whole tag set becomes `tags`.
    func putObjectTagging(key: String, tags: [String: String]) async throws(S3ClientError)
}

extension ObjectStore {
    func headObject(key: String) async throws(S3ClientError) -> ObjectHead? {
        try await headObject(key: key, checksumMode: false)
    }

    /// The fingerprint ingest recorded with the object `head` describes: in its metadata,
    /// or, for an object whose parts were sent while its file was still being read (the
    /// fingerprint known only at the end), in its `xxh128` tag. nil: neither.
    func recordedFingerprint(of head: ObjectHead, key: String) async throws(S3ClientError) -> String? {
        if let value = head.metadata[ObjectLabelKeys.fingerprint] { return value }
        guard head.tagCount != 0 else { return nil }
        return try await getObjectTagging(key: key)?[ObjectLabelKeys.fingerprint]
    }
}

extension S3Client: ObjectStore {
    var bodiesCrossPlainHTTP: Bool { endpoint.isPlainHTTPOverNetwork }

    /// ``ObjectStore/recordedFingerprint(of:key:)``, for `ingest ls`.
    public func fingerprint(of head: ObjectHead, key: String) async throws(S3ClientError) -> String? {
        try await recordedFingerprint(of: head, key: key)
    }
}

/// The journal writes one upload makes, each committed before the uploader goes on, so the
/// journal is never ahead of the server. ``Journal`` is the real log.
protocol UploadLog: Sendable {
    /// Where the log is, for messages about it.
    var path: String { get }
    /// What the state machine says the multipart upload is now, parts as a difference.
    func persist(
        _ snapshot: UploadStateMachine.Snapshot, added: [UploadStateMachine.AcknowledgedPart], removed: [Int],
        lastError: String?
    ) async throws(JournalError)
    /// A failed run of the upload; returns whether it is quarantined now.
    func noteFailure(_ message: String, ofUpload id: String, quarantineAfter: Int) async throws(JournalError) -> Bool
    /// The object is in the bucket and verified. With `releasingStagedCopy`, returns the
    /// content whose staged copy may go now (nothing else waits for it).
    func completeUpload(id: String, etag: String?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint?
    /// These staged copies were deleted.
    func noteStagedCopiesRemoved(_ fingerprints: [Fingerprint]) async throws(JournalError)
    /// Every commit so far is on disk.
    func sync() async throws(JournalError)
    /// The upload starts again from nothing at `key`; returns it as it is now.
    func restartUpload(id: String, key: String) async throws(JournalError) -> UploadRecord?
    /// The staged copy is gone or wrong: the files go back to pending, the upload goes.
    func restage(uploadID id: String, reason: String) async throws(JournalError)
}

extension Journal: UploadLog {
    func persist(
        _ snapshot: UploadStateMachine.Snapshot, added: [UploadStateMachine.AcknowledgedPart], removed: [Int],
        lastError: String?
    ) async throws(JournalError) {
        try await persist(snapshot, added: added, removed: removed, lastError: lastError, at: Date())
    }

    func noteFailure(_ message: String, ofUpload id: String, quarantineAfter: Int) async throws(JournalError) -> Bool {
        try await noteFailure(message, ofUpload: id, quarantineAfter: quarantineAfter, at: Date())
    }

    func completeUpload(id: String, etag: String?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint? {
        try await completeUpload(id: id, etag: etag, releasingStagedCopy: releasingStagedCopy, at: Date())
    }

    func noteStagedCopiesRemoved(_ fingerprints: [Fingerprint]) async throws(JournalError) {
        try await noteStagedCopiesRemoved(fingerprints, at: Date())
    }

    func restartUpload(id: String, key: String) async throws(JournalError) -> UploadRecord? {
        try await restartUpload(id: id, key: key, at: Date())
    }

    func restage(uploadID id: String, reason: String) async throws(JournalError) {
        try await restage(uploadID: id, reason: reason, at: Date())
    }
}
