import Foundation
import GRDB

/// What is quarantined: files and uploads that failed too often, or can never become an
/// object as configured. They are shown by `ingest status`, counted by the metrics and in
/// the exit status of every run that meets them, and kept (with their staged copies) until
/// they succeed or the operator forgets them.
public struct QuarantineSummary: Sendable, Equatable {
    public var files: [FileRecord]
    public var uploads: [UploadRecord]
    /// Bytes of staged copies that only quarantined files and uploads hold.
    public var stagedBytes: Int64
    public static let empty = QuarantineSummary(files: [], uploads: [], stagedBytes: 0)

    public var count: Int { files.count + uploads.count }
}

/// How `ingest forget` names a quarantined file: `file-` and its row in the journal.
public enum QuarantinedFileID {
    public static let prefix = "file-"

    public static func text(_ record: FileRecord) -> String { prefix + String(record.id ?? 0) }

    public static func row(_ text: String) -> Int64? {
        guard text.hasPrefix(prefix) else { return nil }
        return Int64(text.dropFirst(prefix.count))
    }
}

extension Journal {
    /// Quarantined files and uploads of one volume (nil: of every volume), at most `limit`
    /// of each, most recently failed first.
    public func quarantine(ofVolume key: String? = nil, limit: Int = 50) async throws(JournalError) -> QuarantineSummary {
        try await reading { db in
            var files = FileRecord.filter(Column("quarantined") == true)
            var uploads = UploadRecord.filter(Column("quarantined") == true)
            if let key {
                // From the quarantined rows' side (their partial indexes), never from every
                // file of the volume: `+` keeps SQLite off the (volumeKey, path) index.
                files = files.filter(sql: "+volumeKey = ?", arguments: [key])
                uploads = uploads.filter(
                    sql: "EXISTS (SELECT 1 FROM file WHERE file.uploadID = upload.id AND file.volumeKey = ?)", arguments: [key])
            }
            let stagedBytes = try Int64.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(s.size), 0) FROM stagedObject s WHERE s.removedAt IS NULL
                    AND (EXISTS (SELECT 1 FROM file f WHERE f.fingerprint = s.fingerprint AND f.quarantined)
                         OR EXISTS (SELECT 1 FROM upload u WHERE u.fingerprint = s.fingerprint AND u.quarantined))
                    """) ?? 0
            return QuarantineSummary(
                files: try files.order(Column("updatedAt").desc).limit(limit).fetchAll(db),
                uploads: try uploads.order(Column("updatedAt").desc).limit(limit).fetchAll(db),
                stagedBytes: stagedBytes)
        }
    }

    /// How many files and uploads of a volume are quarantined: a run of the card that
    /// leaves any ends with a non-zero status. Counted from the quarantined rows (partial
    /// indexes) at the end of every run: from the volume's side it read every file the
    /// card ever had and each one's upload, a cost that grew with the card.
    public func quarantinedCount(ofVolume key: String) async throws(JournalError) -> Int {
        try await reading { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT (SELECT COUNT(*) FROM file INDEXED BY file_quarantined WHERE quarantined = 1 AND volumeKey = ?1)
                         + (SELECT COUNT(*) FROM upload INDEXED BY upload_quarantined WHERE quarantined = 1
                            AND EXISTS (SELECT 1 FROM file WHERE file.uploadID = upload.id AND file.volumeKey = ?1))
                    """, arguments: [key]) ?? 0
        }
    }

    /// The operator gives a file up (`ingest forget file-N`): it is not staged again while
    /// its size and time stay the same. Returns the file, and the fingerprint of its staged
    /// copy when nothing else still needs that copy (the caller deletes it and records so).
    public func forgetFile(row: Int64, note: String, at date: Date = Date()) async throws(JournalError) -> (FileRecord, Fingerprint?)? {
        try await writing { db in
            guard let file = try FileRecord.fetchOne(db, key: row) else { return nil }
            try db.execute(
                sql: """
                    UPDATE file SET state = 'forgotten', quarantined = 0, failures = 0, uploadID = NULL, lastError = ?,
                    updatedAt = ? WHERE id = ?
                    """, arguments: [note, JournalDate(date), row])
            guard let fingerprint = file.fingerprint else { return (file, nil) }
            let needed = try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM file WHERE fingerprint = ?1 AND state IN ('pending', 'staged'))
                        OR EXISTS (SELECT 1 FROM upload WHERE fingerprint = ?1 AND phase NOT IN ('completed', 'aborted'))
                    """, arguments: [fingerprint]) ?? true
            return (file, needed ? nil : Fingerprint(hex: fingerprint))
        }
    }
}
