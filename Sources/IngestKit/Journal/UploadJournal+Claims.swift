// Claims: how the staged files of a card are linked to the uploads of their contents, one new
// upload per content and bucket, a server-side copy for every other file carrying it.

import Foundation
import GRDB

/// A multipart upload whose parts were all sent while its file was staged (the pipeline's
/// `PartStreamer`), for the file's claim to adopt.
public struct StreamedParts: Sendable, Equatable {
    /// The server's upload id.
    public var uploadID: String
    /// What `CreateMultipartUpload` was sent with: every label but the fingerprint.
    public var headers: [SigV4Header]
    /// The parts acknowledged: every part when the stream ended, those acknowledged before
    /// a kill when the stream is adopted after one (the upload sends the rest).
    public var parts: [UploadStateMachine.AcknowledgedPart]
    /// The journal's record of the stream (``StreamRecord``), which the claim deletes.
    public var streamID: Int64?

    public init(uploadID: String, headers: [SigV4Header], parts: [UploadStateMachine.AcknowledgedPart], streamID: Int64? = nil) {
        self.uploadID = uploadID
        self.headers = headers
        self.parts = parts
        self.streamID = streamID
    }
}

/// A staged file's content, planned for upload: the pipeline builds one per staged file.
public struct UploadClaim: Sendable, Equatable {
    public var path: CardPath
    public var fingerprint: Fingerprint
    public var size: Int64
    public var target: S3Destination
    public var key: String
    public var headers: [SigV4Header]
    /// nil: a single `PutObject`.
    public var partSize: Int64?
    public var checksum: PartDigestAlgorithm
    /// The parts' CRC32Cs from the card's bytes, when the stager computed them for this cut:
    /// journalled with a new upload (``UploadRecord/cardChecksums``).
    public var cardChecksums: PartChecksums?
    /// The upload its parts went to as the file was staged: a new upload adopts it, at
    /// once in phase `uploading` with every part; otherwise the caller aborts it.
    public var streamed: StreamedParts?

    public init(
        path: CardPath, fingerprint: Fingerprint, size: Int64, target: S3Destination, key: String,
        headers: [SigV4Header], partSize: Int64?, checksum: PartDigestAlgorithm = .crc32c, cardChecksums: PartChecksums? = nil
    ) {
        self.checksum = checksum
        self.cardChecksums = cardChecksums
        self.path = path
        self.fingerprint = fingerprint
        self.size = size
        self.target = target
        self.key = key
        self.headers = headers
        self.partSize = partSize
    }
}

/// What the journal made of a claim.
public enum ClaimResult: Sendable, Equatable {
    /// A new upload, planned by this claim (adopting its streamed parts, if any).
    case planned(UploadRecord)
    /// Upload this: pending from before (then it resumes), or planned by another file.
    case upload(UploadRecord)
    /// The bucket already holds this file's object, verified: the file is recorded as
    /// uploaded, and the object is looked at before that is believed.
    case alreadyInBucket(UploadRecord)
    /// A new copy, planned by this claim: the file's content is planned already, by the
    /// upload `of` (pending or verified), and this file's object is copied from it.
    case copy(UploadRecord, of: UploadRecord)
}

extension Journal {
    /// Links staged files to their uploads, in one transaction: a file claimed again joins
    /// the upload planned for it before (completed: the file is uploaded at once); a file
    /// whose content another file planned for the same bucket gets a copy of that upload;
    /// otherwise a new upload is planned.
    public func claim(_ claims: [UploadClaim], volumeKey: String, at date: Date = Date()) async throws(JournalError) -> [ClaimResult] {
        guard !claims.isEmpty else { return [] }
        return try await writing(durable: false) { db in
            try claims.map { claim in try Self.claim(db, claim, volumeKey: volumeKey, at: date) }
        }
    }

    /// ``record(_:volumeKey:quarantineAfter:at:)`` of a batch of outcomes and ``claim(_:volumeKey:at:)``
    /// of the uploads of its staged files, in one transaction: a card's run journals each
    /// batch this way, one commit where there were two, and the file rows and index pages
    /// both touch are written once. A kill leaves the batch unrecorded or recorded with its
    /// uploads, never staged without them.
    public func record(
        _ outcomes: [StageOutcome], claiming claims: [UploadClaim], volumeKey: String, quarantineAfter: Int = .max,
        at date: Date = Date()
    ) async throws(JournalError) -> [ClaimResult] {
        guard !outcomes.isEmpty else { return [] }
        return try await writing(durable: false) { db in
            try Self.record(db, outcomes, volumeKey: volumeKey, quarantineAfter: quarantineAfter, at: date)
            return try claims.map { claim in try Self.claim(db, claim, volumeKey: volumeKey, at: date) }
        }
    }

    private static func claim(_ db: Database, _ claim: UploadClaim, volumeKey: String, at date: Date) throws -> ClaimResult {
        // The stream's parts become the upload's below, or the caller aborts its upload: either
        // way it is no longer a stream to adopt.
        if let stream = claim.streamed?.streamID {
            try db.cachedStatement(sql: "DELETE FROM stream WHERE id = ?").execute(arguments: [stream])
        }
        let target = claim.target
        let pathBytes = Data(claim.path.bytes)
        let streamed = claim.streamed
        var record = UploadRecord(
            id: UploadRecord.logicalID(target: target, fingerprint: claim.fingerprint), endpoint: target.endpoint,
            bucket: target.bucket, region: target.region, addressing: target.addressing, key: claim.key,
            fingerprint: claim.fingerprint.hex, size: claim.size, partSize: claim.partSize, checksum: claim.checksum,
            phase: streamed == nil ? .created : .uploading, uploadID: streamed?.uploadID, restartCount: 0,
            headers: UploadRecord.encode(headers: streamed?.headers ?? claim.headers), volumeKey: volumeKey,
            sourcePath: pathBytes, etag: nil, lastError: nil, createdAt: date, updatedAt: date, completedAt: nil,
            cardChecksums: UploadRecord.encode(checksums: claim.cardChecksums.flatMap { $0.partSize == claim.partSize ? $0 : nil }))
        // A new content is inserted without a look first (a statement a file less); a content
        // some file planned already, found by what it is (endpoint, bucket, fingerprint) and
        // never by its id, keeps its upload.
        try record.insertUnlessPlanned(db)
        if db.changesCount == 0 {
            guard
                let existing = try UploadRecord.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ''"),
                    arguments: [claim.fingerprint.hex, target.endpoint, target.bucket])
            else { throw DatabaseError(resultCode: .SQLITE_INTERNAL, message: "upload of \(claim.fingerprint.hex) neither inserted nor there") }
            // The file that brought the content, claimed again (a later run, or a restage).
            if existing.volumeKey == volumeKey, existing.sourcePath == pathBytes {
                return try join(db, existing, claim, volumeKey: volumeKey, at: date)
            }
            // Another file of the same bytes: its own object, copied from the content's.
            var copy = record
            copy.copyKey = claim.key
            copy.id = UploadRecord.logicalID(target: target, fingerprint: claim.fingerprint, copyKey: claim.key)
            copy.phase = .created
            copy.uploadID = nil
            copy.headers = UploadRecord.encode(headers: claim.headers)
            copy.cardChecksums = nil
            copy.partSize = nil
            try copy.insertUnlessPlanned(db)
            if db.changesCount == 0 {
                guard
                    let planned = try UploadRecord.fetchOne(
                        db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ?"),
                        arguments: [claim.fingerprint.hex, target.endpoint, target.bucket, claim.key])
                else { throw DatabaseError(resultCode: .SQLITE_INTERNAL, message: "copy to \(claim.key) neither inserted nor there") }
                return try join(db, planned, claim, volumeKey: volumeKey, at: date)
            }
            try link(db, claim, to: copy.id, volumeKey: volumeKey, at: date)
            return .copy(copy, of: existing)
        }
        let id = record.id
        for part in streamed?.parts ?? [] {
            try db.cachedStatement(sql: "INSERT INTO uploadPart (upload, number, etag, size, digest) VALUES (?, ?, ?, ?, ?)")
                .execute(arguments: [id, part.number, part.etag, part.size, part.digest])
        }
        try link(db, claim, to: id, volumeKey: volumeKey, at: date)
        return .planned(record)
    }

    /// The file joins an upload planned before: done at once if it is verified, else waiting for it.
    private static func join(_ db: Database, _ existing: UploadRecord, _ claim: UploadClaim, volumeKey: String, at date: Date)
        throws -> ClaimResult
    {
        let done = existing.phase == .completed
        try db.cachedStatement(sql: """
            UPDATE file SET uploadID = ?1, state = ?2, updatedAt = ?3,
            manifestGeneration = CASE WHEN uploadID IS NULL OR uploadID IS ?1 THEN manifestGeneration END
            WHERE volumeKey = ?4 AND path = ?5
            """).execute(arguments: [
                existing.id, done ? FileState.uploaded : FileState.staged, JournalDate(date), volumeKey, Data(claim.path.bytes),
            ])
        return done ? .alreadyInBucket(existing) : .upload(existing)
    }

    /// The file's upload is `id`, new: its failures are forgotten. A file whose upload was of
    /// another destination is listed by the next generation of the card's history there (the
    /// manifests of a card are per bucket), as in ``join(_:_:_:volumeKey:at:)``; one staged
    /// again (no upload) keeps its listing: its object comes back to the key listed.
    private static func link(_ db: Database, _ claim: UploadClaim, to id: String, volumeKey: String, at date: Date) throws {
        try db.cachedStatement(sql: """
            UPDATE file SET uploadID = ?1, updatedAt = ?2, lastError = NULL, failures = 0, quarantined = 0,
            manifestGeneration = CASE WHEN uploadID IS NULL OR uploadID IS ?1 THEN manifestGeneration END
            WHERE volumeKey = ?3 AND path = ?4
            """).execute(arguments: [id, JournalDate(date), volumeKey, Data(claim.path.bytes)])
    }
}
