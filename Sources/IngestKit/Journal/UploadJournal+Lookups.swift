// Uploads looked up: one by its id, a copy's content upload, the destinations and server
// upload ids the journal knows (for `ingest rescan`), the summary `ingest status` shows.

import Foundation
import GRDB

extension Journal {
    /// The upload that sends the bytes a copy is made from; nil when there is none any more
    /// (its staged copy was found wrong, and its file waits for the card).
    public func contentUpload(of copy: UploadRecord) async throws(JournalError) -> UploadRecord? {
        try await reading { db in
            try UploadRecord.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ''"),
                arguments: [copy.fingerprint, copy.endpoint, copy.bucket])
        }
    }

    /// One upload and its acknowledged parts; nil when the journal has no such id.
    public func upload(id: String) async throws(JournalError) -> (UploadRecord, [UploadPartRecord])? {
        // Once per upload run: statements cached, so none is compiled (and authorized) per file.
        try await reading { db in
            guard let record = try UploadRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM upload WHERE id = ?"), arguments: [id])
            else { return nil }
            let parts = try UploadPartRecord.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM uploadPart WHERE upload = ? ORDER BY number"), arguments: [id])
            return (record, parts)
        }
    }

    /// Uploads whose id starts with `prefix` (people type a few digits).
    public func uploads(idPrefix prefix: String) async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.filter(Column("id").like(prefix + "%")).fetchAll(db)
        }
    }

    /// Every destination the journal has uploads for, in the order first used: where
    /// `ingest rescan` looks for multipart uploads no journal knows.
    public func uploadTargets() async throws(JournalError) -> [S3Destination] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT endpoint, bucket, region, addressing FROM upload
                    GROUP BY endpoint, bucket ORDER BY MIN(createdAt)
                    """
            ).compactMap { row in
                guard let addressing = S3AddressingStyle(rawValue: row[3]) else { return nil }
                return S3Destination(endpoint: row[0], bucket: row[1], region: row[2], addressing: addressing)
            }
        }
    }

    /// The server's multipart upload ids the journal holds for uploads to this bucket: the
    /// uploads a run started and has not finished (completed uploads forget theirs), and the
    /// streams of files being copied (``StreamRecord``).
    public func multipartUploadIDs(endpoint: String, bucket: String) async throws(JournalError) -> Set<String> {
        try await reading { db in
            Set(try String.fetchAll(
                db,
                sql: """
                    SELECT uploadID FROM upload WHERE endpoint = ?1 AND bucket = ?2 AND uploadID IS NOT NULL
                    UNION SELECT uploadID FROM stream WHERE endpoint = ?1 AND bucket = ?2
                    """,
                arguments: [endpoint, bucket]))
        }
    }

    /// Recently failed or pending uploads, for `ingest status`.
    public func uploadSummary() async throws(JournalError) -> UploadSummary {
        try await reading { db in
            var byPhase: [UploadStateMachine.Phase: JournalSummary.Tally] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT phase, COUNT(*), COALESCE(SUM(size), 0) FROM upload GROUP BY phase") {
                if let phase = UploadStateMachine.Phase(rawValue: row[0]) { byPhase[phase] = .init(count: row[1], bytes: row[2]) }
            }
            let pending = try UploadRecord.filter(!["completed", "aborted"].contains(Column("phase")))
                .order(Column("updatedAt").desc).limit(50).fetchAll(db)
            return UploadSummary(byPhase: byPhase, pending: pending)
        }
    }
}

/// Uploads by phase, and the pending ones, for `ingest status`.
public struct UploadSummary: Sendable, Equatable {
    public var byPhase: [UploadStateMachine.Phase: JournalSummary.Tally]
    /// Pending uploads, most recently updated first (at most 50).
    public var pending: [UploadRecord]
    public static let empty = UploadSummary(byPhase: [:], pending: [])
}
