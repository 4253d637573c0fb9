import Foundation
import GRDB

/// A multipart upload a large file's parts go to while the file is copied (`StreamRun`, the
/// streaming phase of ``UploadStateMachine``), before the file is staged and its content known: journalled when the
/// server creates it, before its first part is sent, with each part as it is acknowledged.
///
/// A stream ends in the claim of its file, which adopts it as the content's upload in the
/// same transaction that deletes it (``Journal/claim(_:volumeKey:at:)``), or in its abort.
/// One that a kill or a power cut ended before either is adopted by the next process that
/// finds its owner gone (``Journal/adoptableStreams()``): no acknowledged part is lost to
/// the journal, and no staged file is left with nothing to send it.
public struct StreamRecord: Sendable, Equatable, FetchableRecord {
    /// Chosen by the stream's owner, which holds the lock of this number while it streams
    /// (``StateDirectory/lockStream(_:)``).
    public var id: Int64
    public var volumeKey: String
    public var path: CardPath
    public var size: Int64
    public var mtime: Int64
    public var target: S3Destination
    public var key: String
    /// The server's multipart upload id.
    public var uploadID: String
    public var partSize: Int64
    /// What `CreateMultipartUpload` was sent with: every label but the fingerprint.
    public var headers: [SigV4Header]
    public var createdAt: Date

    public init(
        id: Int64, volumeKey: String, path: CardPath, size: Int64, mtime: Int64, target: S3Destination, key: String,
        uploadID: String, partSize: Int64, headers: [SigV4Header], createdAt: Date = Date()
    ) {
        self.id = id
        self.volumeKey = volumeKey
        self.path = path
        self.size = size
        self.mtime = mtime
        self.target = target
        self.key = key
        self.uploadID = uploadID
        self.partSize = partSize
        self.headers = headers
        self.createdAt = createdAt
    }

    public init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        volumeKey = try row.decode(forColumn: "volumeKey")
        path = CardPath(bytes: Array(try row.decode(Data.self, forColumn: "path")))
        size = try row.decode(forColumn: "size")
        mtime = try row.decode(forColumn: "mtime")
        let addressing: S3AddressingStyle = try row.decode(forColumn: "addressing")
        target = S3Destination(
            endpoint: try row.decode(forColumn: "endpoint"), bucket: try row.decode(forColumn: "bucket"),
            region: try row.decode(forColumn: "region"), addressing: addressing)
        key = try row.decode(forColumn: "key")
        uploadID = try row.decode(forColumn: "uploadID")
        partSize = try row.decode(forColumn: "partSize")
        headers = UploadRecord.decode(headers: try row.decode(forColumn: "headers"))
        createdAt = try row.decode(JournalDate.self, forColumn: "createdAt").date
    }
}

/// A stream whose owner is gone, with what the journal knows of its file.
public struct AdoptableStream: Sendable, Equatable {
    public var stream: StreamRecord
    public var parts: [UploadStateMachine.AcknowledgedPart]
    /// The file's fingerprint when it is staged as the stream saw it (same size and time, no
    /// upload yet): the stream can become its content's upload. Nil: the file's copy never
    /// completed, or the file changed since; the stream is to be aborted.
    public var stagedFingerprint: Fingerprint?

    /// The claim that adopts the stream as the upload of its staged file.
    public func claim(checksum: PartDigestAlgorithm = .crc32c) -> UploadClaim? {
        guard let fingerprint = stagedFingerprint else { return nil }
        var claim = UploadClaim(
            path: stream.path, fingerprint: fingerprint, size: stream.size, target: stream.target, key: stream.key,
            headers: stream.headers, partSize: stream.partSize, checksum: checksum)
        claim.streamed = StreamedParts(
            uploadID: stream.uploadID, headers: stream.headers, parts: parts, streamID: stream.id)
        return claim
    }
}

extension Journal {
    /// Journals a stream the server has just created, before any of its parts is sent.
    public func beginStream(_ stream: StreamRecord) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    INSERT INTO stream (id, volumeKey, path, size, mtime, endpoint, bucket, region, addressing, key,
                    uploadID, partSize, headers, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    stream.id, stream.volumeKey, Data(stream.path.bytes), stream.size, stream.mtime, stream.target.endpoint,
                    stream.target.bucket, stream.target.region, stream.target.addressing, stream.key, stream.uploadID,
                    stream.partSize, UploadRecord.encode(headers: stream.headers), JournalDate(stream.createdAt),
                ])
        }
    }

    /// Journals a part of stream `id` the server acknowledged.
    public func noteStreamedPart(_ part: UploadStateMachine.AcknowledgedPart, ofStream id: Int64) async throws(JournalError) {
        try await writing { db in
            try db.cachedStatement(sql: """
                INSERT INTO streamPart (stream, number, etag, size, digest) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(stream, number) DO UPDATE SET etag = excluded.etag, size = excluded.size, digest = excluded.digest
                """).execute(arguments: [id, part.number, part.etag, part.size, part.digest])
        }
    }

    /// Forgets stream `id` (its upload was aborted on the server), with its parts.
    public func endStream(_ id: Int64) async throws(JournalError) {
        try await writing { db in try db.execute(sql: "DELETE FROM stream WHERE id = ?", arguments: [id]) }
    }

    /// Every stream in the journal, oldest first, with its parts and its file's staged
    /// content: those whose owner still runs are the caller's to leave alone
    /// (``StateDirectory/lockStream(_:)``). At most ``PartStreamer``'s streams a process, so
    /// few.
    public func adoptableStreams() async throws(JournalError) -> [AdoptableStream] {
        try await reading { db in
            let streams = try StreamRecord.fetchAll(db, sql: "SELECT * FROM stream ORDER BY createdAt, id")
            return try streams.map { stream in
                let parts = try Row.fetchAll(
                    db, sql: "SELECT number, etag, size, digest FROM streamPart WHERE stream = ? ORDER BY number",
                    arguments: [stream.id]
                ).map { UploadStateMachine.AcknowledgedPart(number: $0[0], etag: $0[1], size: $0[2], digest: $0[3]) }
                let staged = try String.fetchOne(
                    db,
                    sql: """
                        SELECT fingerprint FROM file WHERE volumeKey = ? AND path = ? AND size = ? AND mtime = ?
                        AND state = 'staged' AND uploadID IS NULL
                        """,
                    arguments: [stream.volumeKey, Data(stream.path.bytes), stream.size, stream.mtime])
                return AdoptableStream(stream: stream, parts: parts, stagedFingerprint: staged.flatMap(Fingerprint.init(hex:)))
            }
        }
    }
}

extension Journal {
    /// Whether stream `id` is still in the journal (its owner may have ended it before its
    /// lock was taken).
    public func hasStream(_ id: Int64) async throws(JournalError) -> Bool {
        try await reading { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM stream WHERE id = ?", arguments: [id]) ?? false }
    }

    /// What is left to take up: uploads pending, the parts acknowledged of them, and files
    /// that need their card again (pending: never staged, or their staged copy was lost).
    /// From indexes only.
    public func leftToTakeUp() async throws(JournalError) -> (uploads: Int, parts: Int, filesNeedingCard: Int) {
        try await reading { db in
            let uploads = try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM upload INDEXED BY upload_by_phase_completion WHERE phase NOT IN ('completed', 'aborted')") ?? 0
            // Completed uploads keep no parts: every part row is a pending upload's.
            let parts = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM uploadPart") ?? 0
            let files = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM file WHERE state = 'pending'") ?? 0
            return (uploads, parts, files)
        }
    }
}
