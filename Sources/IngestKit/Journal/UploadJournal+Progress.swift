// An upload's progress as the journal keeps it: parts acknowledged, failures counted and
// quarantined, completion, restart, restage and removal.

import Foundation
import GRDB

extension Journal {
    /// Commits what the state machine says the upload is now. Parts are written as a
    /// difference: `added` are new acknowledgements, `removed` parts no longer count
    /// (reconciliation dropped them, or a restart cleared them).
    public func persist(
        _ snapshot: UploadStateMachine.Snapshot, added: [UploadStateMachine.AcknowledgedPart], removed: [Int],
        lastError: String?, at date: Date = Date()
    ) async throws(JournalError) {
        try await writing { db in
            let id = snapshot.logicalUploadID
            try db.cachedStatement(sql: """
                UPDATE upload SET phase = ?, uploadID = ?, restartCount = ?, lastError = ?, updatedAt = ? WHERE id = ?
                """).execute(arguments: [snapshot.phase, snapshot.uploadID, snapshot.restartCount, lastError, JournalDate(date), id])
            for number in removed {
                try db.cachedStatement(sql: "DELETE FROM uploadPart WHERE upload = ? AND number = ?")
                    .execute(arguments: [id, number])
            }
            for part in added {
                try db.cachedStatement(sql: """
                    INSERT INTO uploadPart (upload, number, etag, size, digest) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(upload, number) DO UPDATE SET etag = excluded.etag, size = excluded.size, digest = excluded.digest
                    """).execute(arguments: [id, part.number, part.etag, part.size, part.digest])
            }
        }
    }

    /// Records why this run's attempt at an upload failed (its phase stays what it was), and
    /// counts the failure: at `quarantineAfter` failed runs in a row the upload is
    /// quarantined. Returns whether it is quarantined now.
    @discardableResult
    public func noteFailure(
        _ message: String, ofUpload id: String, quarantineAfter: Int = .max, at date: Date = Date()
    ) async throws(JournalError) -> Bool {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE upload SET lastError = ?, failures = failures + 1, quarantined = failures + 1 >= ?,
                    updatedAt = ? WHERE id = ?
                    """, arguments: [message, quarantineAfter, JournalDate(date), id])
            return try Bool.fetchOne(db, sql: "SELECT quarantined FROM upload WHERE id = ?", arguments: [id]) ?? false
        }
    }

    /// A staged file of a volume cannot become an object as configured (a key or labels
    /// beyond S3's limits): quarantined at once, with the reason, until a run plans it.
    public func noteNotUploadable(path: CardPath, volumeKey: String, reason: String, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE file SET lastError = ?, failures = failures + 1, quarantined = 1, updatedAt = ?
                    WHERE volumeKey = ? AND path = ?
                    """, arguments: [reason, JournalDate(date), volumeKey, Data(path.bytes)])
        }
    }

    /// The object is in the bucket and verified: the upload is completed, its parts are no
    /// longer needed, and every file carrying this content is uploaded. `object`: what
    /// identifies the object's bytes, as the look that verified it found them, recorded in
    /// the same transaction (nil only where the destination has no such identity: a tus
    /// server, or a destination that cannot copy, whose file counts as its content's upload).
    ///
    /// With `releasingStagedCopy`, the same transaction answers whether the content's staged
    /// copy may go now (no other file or upload still waits for it): one journal write per
    /// small file, where a separate look cost a read and a write more. The caller deletes
    /// the copy, then records it with ``noteStagedCopiesRemoved(_:at:)``.
    ///
    /// Completions that come while another is being written are written together, in one
    /// transaction (``GroupCommit``); each returns once its own is committed, not synced:
    /// the caller deletes the staged copy only after a ``sync()``.
    @discardableResult
    public func completeUpload(
        id: String, object: StoredObject?, releasingStagedCopy: Bool = false, at date: Date = Date()
    ) async throws(JournalError) -> Fingerprint? {
        try await completions.submit(Completion(id: id, object: object, releasingStagedCopy: releasingStagedCopy, date: date)) {
            batch throws(JournalError) in
            try await self.writing(durable: false) { db in try batch.map { try Self.complete($0, in: db) } }
        }
    }

    /// One upload's completion, as ``completeUpload(id:object:releasingStagedCopy:at:)`` writes it.
    struct Completion: Sendable {
        var id: String
        var object: StoredObject?
        var releasingStagedCopy: Bool
        var date: Date
    }

    private static func complete(_ completion: Completion, in db: Database) throws -> Fingerprint? {
        let (id, date) = (completion.id, JournalDate(completion.date))
        // One statement writes the completion and reads what the rest needs of the upload.
        guard
            let upload = try Row.fetchOne(
                db.cachedStatement(sql: """
                    UPDATE upload SET phase = 'completed', etag = ?, objectChecksum = ?, versionID = ?, etagLearned = 0,
                    lastError = NULL, uploadID = NULL, failures = 0, quarantined = 0, updatedAt = ?, completedAt = ? WHERE id = ?
                    RETURNING fingerprint, partSize
                    """), arguments: [
                        completion.object?.etag, completion.object?.checksum, completion.object?.versionID, date, date, id,
                    ])
        else { return nil }
        // Only a multipart upload has parts journalled.
        if upload["partSize"] as Int64? != nil {
            try db.cachedStatement(sql: "DELETE FROM uploadPart WHERE upload = ?").execute(arguments: [id])
        }
        try db.cachedStatement(sql: """
            UPDATE file SET state = 'uploaded', lastError = NULL, failures = 0, quarantined = 0, updatedAt = ?
            WHERE uploadID = ?
            """).execute(arguments: [date, id])
        guard completion.releasingStagedCopy, let hex = upload["fingerprint"] as String? else { return nil }
        return try String.fetchOne(
            db.cachedStatement(sql: Self.removableCopies(only: true)), arguments: [date, hex]
        ).flatMap(Fingerprint.init(hex:))
    }

    /// Starts an upload again from nothing, to `key`: its object is not where the journal
    /// said (missing, or another content at the key), or its key turned out to hold other
    /// bytes. The server's multipart upload, if any, was aborted by the caller; its parts
    /// are forgotten, and every file carrying this content waits for it again.
    public func restartUpload(id: String, key: String, at date: Date = Date()) async throws(JournalError) -> UploadRecord? {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE upload SET key = ?, phase = 'created', uploadID = NULL, etag = NULL, objectChecksum = NULL,
                    versionID = NULL, etagLearned = 0, completedAt = NULL,
                    updatedAt = ? WHERE id = ?
                    """, arguments: [key, JournalDate(date), id])
            try db.execute(sql: "DELETE FROM uploadPart WHERE upload = ?", arguments: [id])
            // Its next object has not been read back.
            try db.execute(sql: "DELETE FROM readBack WHERE upload = ?", arguments: [id])
            try db.execute(
                sql: "UPDATE file SET state = 'staged', updatedAt = ? WHERE uploadID = ? AND state = 'uploaded'",
                arguments: [JournalDate(date), id])
            return try UploadRecord.fetchOne(db, key: id)
        }
    }

    /// Sends upload `id` with `algorithm`'s part digests rather than the one it was planned
    /// with, if nothing of it has reached the server yet (created, no upload id, no part):
    /// an upload keeps one algorithm from its first part to its completion. Returns the
    /// upload as it is now (changed or not); nil when it is not in the journal.
    public func useDigest(_ algorithm: PartDigestAlgorithm, forUnstartedUpload id: String, at date: Date = Date())
        async throws(JournalError) -> UploadRecord?
    {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE upload SET checksum = ?, updatedAt = ?
                    WHERE id = ? AND phase = 'created' AND uploadID IS NULL
                    AND NOT EXISTS (SELECT 1 FROM uploadPart WHERE upload = upload.id)
                    """, arguments: [algorithm, JournalDate(date), id])
            return try UploadRecord.fetchOne(db, key: id)
        }
    }

    /// The staged copy of an upload is gone or no longer matches its fingerprint: its files
    /// go back to pending, so the next ingest of the card copies them again, and the upload
    /// is removed (the caller aborted it on the server first). `objectLost`: the object was
    /// verified, then found missing or changed in the bucket (`reason` says which), which the
    /// files keep until they are staged again (``FileRecord``'s `objectLost` column), and so
    /// do files that had left it for another destination (`formerUpload`), for the verdict in
    /// its own.
    public func restage(uploadID id: String, reason: String, objectLost: Bool = false, at date: Date = Date())
        async throws(JournalError)
    {
        try await writing { db in
            if objectLost {
                try db.execute(sql: "UPDATE formerUpload SET objectLost = ? WHERE upload = ?", arguments: [reason, id])
            }
            try db.execute(
                sql: """
                    UPDATE file SET state = 'pending', fingerprint = NULL, uploadID = NULL, lastError = ?1, updatedAt = ?2,
                    objectLost = CASE WHEN ?4 THEN ?1 END
                    WHERE uploadID = ?3
                    """, arguments: [reason, JournalDate(date), id, objectLost])
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [id])
        }
    }

    /// Removes an upload from the journal (after `abort`, or for `forget`). Its files stay
    /// staged with no upload: the next ingest of the card plans a new one.
    public func removeUpload(id: String, note: String, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: "UPDATE file SET lastError = ?, updatedAt = ? WHERE uploadID = ? AND state != 'uploaded'",
                arguments: [note, JournalDate(date), id])
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [id])
        }
    }
}
