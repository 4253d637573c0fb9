import Foundation

/// A destination as everything above it sees it: where a file's object is written, read
/// back, labelled, listed and abandoned. ``UploadService`` hands one out per destination
/// (made by its ``StoreFactory``); the runner, the streamed parts, the custody history, the
/// bucket check, the orphan sweep, `ingest ls`, `abort`, `verify-card` and `check` use only
/// this protocol. The S3 store is the real one; unit tests use a scripted store that fails
/// each way the contract allows, at each step.
///
/// An object is written whole in one request (``putObject(key:body:payloadHash:headers:)``)
/// or as an upload of numbered parts, begun, sent part by part, then completed into the
/// object or abandoned. What a destination cannot do beyond that is said by its
/// ``capabilities``, which the callers consult instead of assuming S3.
///
/// Every operation throws ``S3ClientError`` after its own retries (the store's business):
/// the caller decides only what a failure that outlived them means.
public protocol ObjectStore: Sendable {
    /// What this destination can do beyond writing, reading back and abandoning objects.
    var capabilities: StoreCapabilities { get }
    /// How far ``listUploads(prefix:keeping:)`` follows a listing before it stops.
    var uploadListingBound: ListingBound { get }
    /// Bodies go to another host over plain HTTP, so each is signed with its SHA-256
    /// (``PayloadHash``) rather than sent as `UNSIGNED-PAYLOAD`.
    var bodiesCrossPlainHTTP: Bool { get }

    /// Whether the destination is there and these credentials may use it, with the
    /// server's clock (its answer's `Date`). Asked before the first upload: some servers
    /// create a missing destination on the first write instead of refusing it, which would
    /// hide a mistyped name.
    func headBucket() async throws(S3ClientError) -> BucketHead
    /// Whether the destination writes only where nothing is when a write asks it to
    /// (`If-None-Match: *`), and keeps the checksums sent with objects: found once, before
    /// its first upload, with a probe object at `key` that is removed afterwards; what the
    /// second write met, and whether the probe object could not be removed.
    func tryConditionalWrite(key: String) async -> ConditionalWriteTrial

    /// What the destination holds at `key`; nil when nothing. `checksumMode` asks for the
    /// object's checksums as well (`x-amz-checksum-mode: ENABLED` on S3).
    func headObject(key: String, checksumMode: Bool) async throws(S3ClientError) -> ObjectHead?
    /// What the destination holds as the object a completed upload made, recorded as
    /// `object` (``StoredObject``) and labelled with `headers` at its creation; nil when
    /// nothing. S3 looks at the key; a tus server, which addresses an upload by its URL
    /// (recorded as its identity), at that URL.
    func headObject(recorded object: StoredObject, key: String, headers: [SigV4Header]) async throws(S3ClientError) -> ObjectHead?
    /// Writes the whole body at `key` in one request; returns what the answer says of the
    /// object written.
    func putObject(key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectWritten
    /// Writes a small document of ingest's own (a card's ASC MHL manifest or chain, not a
    /// file's content) at `key` in one request, under the condition `headers` carry
    /// (`If-None-Match: *`, or `If-Match` on the ETag it replaces); not counted as the job's
    /// bytes on the wire.
    func putDocument(key: String, bytes: [UInt8], headers: [SigV4Header]) async throws(S3ClientError) -> ObjectWritten
    /// Reads a small document of ingest's own at `key` whole, with its ETag; nil when there
    /// is none. A card's history is read this way when another station wrote to it.
    func getDocument(key: String) async throws(S3ClientError) -> StoredDocument?
    /// Begins an upload in parts of an object of `size` bytes at `key`, labelled with
    /// `headers`; returns its id. (A tus server is told the size now; S3 learns it from the
    /// parts.)
    func createMultipartUpload(key: String, size: Int64, headers: [SigV4Header]) async throws(S3ClientError) -> String
    /// Sends part `partNumber` of the upload, the object's bytes from `offset` on; returns
    /// the part's ETag exactly as sent. (S3 places a part by its number, a tus server by its
    /// offset.)
    func uploadPart(
        key: String, uploadID: String, partNumber: Int, offset: Int64, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header]
    ) async throws(S3ClientError) -> String
    /// An upload an earlier process began at `key` goes on in this one, labelled with
    /// `headers` at its creation: a store that cannot read an upload's labels back from the
    /// server keeps them (tus). S3 needs nothing: this default does nothing.
    func resumingUpload(key: String, uploadID: String, headers: [SigV4Header])
    /// The parts the destination holds for the upload, every one; the upload's parts are
    /// `partSize` bytes long, the last one shorter. (A tus server tells only how many bytes
    /// it holds: the parts those cover are its parts.)
    func listParts(key: String, uploadID: String, partSize: Int64) async throws(S3ClientError) -> [ListedPart]
    /// Makes the upload's parts the object at `key`; returns the object's ETag, nil where the
    /// answer names none (Ceph RGW 16): the object is looked at after `Complete` anyway.
    func completeMultipartUpload(key: String, uploadID: String, parts: [CompletedPart], headers: [SigV4Header])
        async throws(S3ClientError) -> String?
    /// Abandons the upload and its parts; an upload the destination no longer knows counts
    /// as abandoned.
    func abortMultipartUpload(key: String, uploadID: String) async throws(S3ClientError)
    /// Abandons `known`, and every other unfinished upload at exactly `key` that the
    /// destination can find and that began before `othersBefore` (a run killed before
    /// journalling an upload's id leaves one); returns how many. An upload that began later
    /// may be another station's, still being sent: it is left alone.
    @discardableResult
    func abortUploads(key: String, known: String?, othersBefore: Date) async throws(S3ClientError) -> Int
    /// Makes `key` a copy of `source`, only while its ETag is `sourceETag`, with `headers`
    /// for the copy's own labels, its bytes never crossing the network; the copy's ETag.
    func copyObject(key: String, from source: String, sourceETag: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> String
    /// Makes part `partNumber` of the upload the bytes `range` of `source`, only while its
    /// ETag is `sourceETag`; the part's ETag.
    func uploadPartCopy(
        key: String, uploadID: String, partNumber: Int, from source: String, sourceETag: String, range: ClosedRange<Int64>
    ) async throws(S3ClientError) -> String
    /// The bytes `range` of the object at `key`, only while its ETag is `ifMatch` when one is
    /// given (a replaced object fails with a precondition error); nil when there is no
    /// object. The caller bounds the range: it is held whole in memory. Needs
    /// ``StoreCapabilities/rangedReads``.
    func getObject(key: String, range: ClosedRange<Int64>, ifMatch: String?) async throws(S3ClientError) -> ObjectRange?
    /// The object's tags; nil when there is no object at `key`. Needs
    /// ``StoreCapabilities/tagging``.
    func getObjectTagging(key: String) async throws(S3ClientError) -> [String: String]?
    /// The object's whole tag set becomes `tags`. Needs ``StoreCapabilities/tagging``.
    func putObjectTagging(key: String, tags: [String: String]) async throws(S3ClientError)

    /// Every object under `prefix`, page by page: `page` takes each page before the next is
    /// asked for, so a listing of any length holds one page in memory. A listing longer
    /// than the store follows (a server that pages forever) is an error. Needs
    /// ``StoreCapabilities/listing``.
    func listObjects(prefix: String, page: ([ListedObject]) async -> Void) async throws(S3ClientError)
    /// The uploads begun under `prefix` and neither completed nor abandoned; only those
    /// `keeping` accepts are kept, so a long listing costs the memory of what is kept. It
    /// stops at ``uploadListingBound`` (``MultipartUploadListing/isTruncated`` then says
    /// there was more). Needs ``StoreCapabilities/listing``.
    func listUploads(prefix: String, keeping: (ListedUpload) -> Bool) async throws(S3ClientError) -> MultipartUploadListing
}

extension ObjectStore {
    public func resumingUpload(key: String, uploadID: String, headers: [SigV4Header]) {}

    public func headObject(key: String) async throws(S3ClientError) -> ObjectHead? {
        try await headObject(key: key, checksumMode: false)
    }

    public func headObject(recorded object: StoredObject, key: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectHead?
    {
        try await headObject(key: key, checksumMode: false)
    }

    /// The fingerprint ingest recorded with the object `head` describes: in its metadata,
    /// or, for an object whose parts were sent while its file was still being read (the
    /// fingerprint known only at the end), in its `xxh128` tag. nil: neither.
    public func recordedFingerprint(of head: ObjectHead, key: String) async throws(S3ClientError) -> String? {
        if let value = head.metadata[ObjectLabelKeys.fingerprint] { return value }
        guard capabilities.contains(.tagging), head.tagCount != 0 else { return nil }
        return try await getObjectTagging(key: key)?[ObjectLabelKeys.fingerprint]
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
    /// The object is in the bucket and verified, `object` its identity as the verifying look
    /// found it. With `releasingStagedCopy`, returns the content whose staged copy may go now
    /// (nothing else waits for it).
    func completeUpload(id: String, object: StoredObject?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint?
    /// Whether the object at `key` with this ETag was proven not ours (``Journal/noteForeignObject(key:etag:target:)``).
    func isForeign(key: String, etag: String, target: S3Destination) async throws(JournalError) -> Bool
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

    func completeUpload(id: String, object: StoredObject?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint? {
        try await completeUpload(id: id, object: object, releasingStagedCopy: releasingStagedCopy, at: Date())
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
