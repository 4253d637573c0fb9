// The upload queue, read a page at a time: what a card's run plans and sends next, from the
// journal's partial indexes of pending uploads.

import Foundation
import GRDB

extension Journal {
    /// Files of a volume that are staged but linked to no upload (staged with `--no-upload`,
    /// by a run killed while a streamed file waited for its stream's end, or by a version
    /// that journalled uploads apart from the staging of their files), after the file
    /// `after` (its id), at most `limit`, in the order they were first journalled: a run
    /// plans them a page at a time, from the index of files by upload.
    public func stagedFilesWithoutUpload(
        ofVolume key: String, after: Int64 = 0, limit: Int = -1
    ) async throws(JournalError) -> [FileRecord] {
        try await reading { db in
            try FileRecord.fetchAll(
                db.cachedStatement(sql: """
                    SELECT * FROM file INDEXED BY file_by_upload
                    WHERE uploadID IS NULL AND id > ? AND volumeKey = ? AND state = 'staged' ORDER BY id LIMIT ?
                    """),
                arguments: [after, key, limit])
        }
    }

    /// Pending uploads carrying files of this volume that its run does not take from
    /// ``pendingUploadPage(ofVolume:after:limit:)``: those planned by another volume's file
    /// (shared content, by a version before copies), those planned for it but never started
    /// at a destination other than `target` (which follow the run to its own), and another
    /// volume's pending uploads of contents this volume's pending copies are made from.
    ///
    /// Asked from the pending uploads' side (their partial index, then each one's files by
    /// `file_by_upload`): from the card's side it looked up the upload of every file the
    /// card ever had, a random read of the upload table each, at every insertion and rescan:
    /// a cost that grew with the card, not with what is pending.
    public func pendingUploadsBesidesPages(ofVolume key: String, target: S3Destination) async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.fetchAll(
                db,
                sql: """
                    SELECT * FROM upload INDEXED BY upload_pending_by_volume WHERE phase NOT IN ('completed', 'aborted')
                    AND EXISTS (SELECT 1 FROM file WHERE file.uploadID = upload.id AND file.volumeKey = ?1)
                    AND (volumeKey IS NOT ?1 OR (phase = 'created'
                      AND NOT (endpoint = ?2 AND bucket = ?3 AND region = ?4 AND addressing = ?5)))
                    UNION
                    SELECT s.* FROM upload c INDEXED BY upload_pending_by_volume
                    JOIN upload s ON s.fingerprint = c.fingerprint AND s.endpoint = c.endpoint AND s.bucket = c.bucket
                      AND s.copyKey = ''
                    WHERE c.volumeKey = ?1 AND c.phase NOT IN ('completed', 'aborted') AND c.copyKey != ''
                    AND s.phase NOT IN ('completed', 'aborted') AND s.volumeKey IS NOT ?1
                    ORDER BY createdAt
                    """, arguments: [key, target.endpoint, target.bucket, target.region, target.addressing])
        }
    }

    /// The volume's pending uploads planned for its own files after `position`, at most
    /// `limit`, in the order they were planned, each with its position: a card's run reads
    /// its upload queue a page at a time (``UploadRunner/follow(volume:)``), from the
    /// partial index of pending uploads, so however far staging runs ahead of the uploads
    /// the queue holds no more than a page in memory.
    public func pendingUploadPage(
        ofVolume key: String, after position: Int64, limit: Int
    ) async throws(JournalError) -> [(position: Int64, record: UploadRecord)] {
        try await reading { db in
            // Each row read as the cursor passes it: a copied row (`Row.fetchAll`) finds a
            // column by comparing every name lower-cased, a visible share of a run of small
            // files.
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: """
                    SELECT rowid AS position, * FROM upload INDEXED BY upload_pending_by_volume
                    WHERE volumeKey = ? AND phase NOT IN ('completed', 'aborted') AND rowid > ?
                    ORDER BY rowid LIMIT ?
                    """),
                arguments: [key, position, limit])
            var page: [(position: Int64, record: UploadRecord)] = []
            while let row = try rows.next() { page.append((row["position"], try UploadRecord(row: row))) }
            return page
        }
    }

    /// The position of the upload planned last, 0 with none: what a run plans from now on
    /// comes after it.
    public func lastUploadPosition() async throws(JournalError) -> Int64 {
        try await reading { db in try Int64.fetchOne(db, sql: "SELECT MAX(rowid) FROM upload") ?? 0 }
    }

    /// Every pending upload (not completed, not aborted), in the order planned: a content's
    /// upload comes before its copies.
    public func pendingUploads() async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.filter(!["completed", "aborted"].contains(Column("phase"))).order(Column.rowID).fetchAll(db)
        }
    }

}
