import Foundation
import GRDB

/// How the last card's ingest ended, as the journal keeps it for the metrics: every
/// process that writes the metrics file (a card's run, `ingest rescan`) writes the same
/// last card, whichever process ingested it.
public struct CardRunRecord: Sendable, Equatable {
    public var endedAt: Date
    public var exitStatus: Int32
    public var seconds: Double
    public var staged = 0
    public var stagedBytes: Int64 = 0
    /// Objects uploaded and verified by that run.
    public var uploaded = 0
    public var uploadedBytes: Int64 = 0
    /// Files that failed to stage or upload in that run.
    public var failed = 0

    public init(endedAt: Date, exitStatus: Int32, seconds: Double) {
        self.endedAt = endedAt
        self.exitStatus = exitStatus
        self.seconds = seconds
    }
}

extension Journal {
    /// Records the end of a card's ingest: it becomes the last card, and the count of cards
    /// ingested goes up by one. One row, whatever the journal holds.
    public func noteCardRun(_ run: CardRunRecord) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    INSERT INTO cardRun (id, lastEndedAt, lastExitStatus, lastSeconds, lastStaged, lastStagedBytes,
                      lastUploaded, lastUploadedBytes, lastFailed, cardsTotal)
                    VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, 1)
                    ON CONFLICT(id) DO UPDATE SET lastEndedAt = excluded.lastEndedAt, lastExitStatus = excluded.lastExitStatus,
                      lastSeconds = excluded.lastSeconds, lastStaged = excluded.lastStaged,
                      lastStagedBytes = excluded.lastStagedBytes, lastUploaded = excluded.lastUploaded,
                      lastUploadedBytes = excluded.lastUploadedBytes, lastFailed = excluded.lastFailed,
                      cardsTotal = cardRun.cardsTotal + 1
                    """,
                arguments: [
                    JournalDate(run.endedAt), run.exitStatus, run.seconds, run.staged, run.stagedBytes, run.uploaded,
                    run.uploadedBytes, run.failed,
                ])
        }
    }

    /// The last card recorded and how many cards were; nil before the first.
    static func lastCardRun(_ db: Database) throws -> (last: CardRunRecord, total: Int)? {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT lastEndedAt, lastExitStatus, lastSeconds, lastStaged, lastStagedBytes, lastUploaded,
                      lastUploadedBytes, lastFailed, cardsTotal FROM cardRun WHERE id = 1
                    """),
            let ended = (row[0] as JournalDate?)?.date
        else { return nil }
        var run = CardRunRecord(endedAt: ended, exitStatus: row[1], seconds: row[2])
        run.staged = row[3]
        run.stagedBytes = row[4]
        run.uploaded = row[5]
        run.uploadedBytes = row[6]
        run.failed = row[7]
        return (run, row[8])
    }
}
