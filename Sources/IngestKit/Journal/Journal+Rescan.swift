import Foundation
import GRDB

/// Lifetime totals of the journal, for `ingest rescan`'s summary and the metrics.
public struct JournalTotals: Sendable, Equatable {
    public typealias Tally = JournalSummary.Tally
    /// Files by state (pending: not yet staged; staged: waiting for its upload; uploaded).
    public var files: [FileState: Tally] = [:]
    /// Files not in the bucket yet whose last attempt failed (retried on the next run).
    public var failedFiles = Tally.zero
    /// Uploads not verified in the bucket yet.
    public var pendingUploads = Tally.zero
    /// Pending uploads whose last attempt failed.
    public var failedUploads = Tally.zero
    /// Staged copies still held in the staging area.
    public var stagedCopies = Tally.zero
    /// Quarantined files and uploads (``FileRecord/quarantined``), with their bytes.
    public var quarantinedFiles = Tally.zero
    public var quarantinedUploads = Tally.zero
    /// When the most recent object verified in the bucket.
    public var lastUploadAt: Date?
    /// The last `ingest rescan` recorded: when it ended, and how.
    public var lastRescanAt: Date?
    public var lastRescanExitStatus: Int32?
    /// When the last `ingest rescan` that finished everything ended.
    public var lastRescanSuccessAt: Date?
    /// The last orphan sweep (nil: none yet) and what it found.
    public var lastOrphanSweepAt: Date?
    public var lastOrphanSweep = OrphanSweepRecord()
    /// Orphan multipart uploads aborted by every sweep.
    public var orphansAbortedTotal = 0
    /// The last card's ingest (nil: none yet), and how many cards were ingested.
    public var lastCard: CardRunRecord?
    public var cardsTotal = 0
    /// The verdicts of the cards seen in the last ``recentCardDays`` days, as their last run
    /// recorded them (``Journal/noteVerdict(ofVolume:safe:reason:)``).
    public var recentCards: [CardVerdictRecord] = []
    public static let recentCardDays = 30

    public init() {}

    /// Files ever staged (staged or, since, uploaded), with their bytes.
    public var stagedEver: Tally { files[.staged, default: .zero] + files[.uploaded, default: .zero] }
    /// Files not in the bucket yet (to be staged, or staged and waiting for their upload).
    public var notUploaded: Tally { files[.pending, default: .zero] + files[.staged, default: .zero] }
}

/// A card's recorded verdict, for the metrics.
public struct CardVerdictRecord: Sendable, Equatable {
    public var volumeKey: String
    public var name: String
    public var safeToErase: Bool
}

/// What one orphan sweep found, as the journal keeps it for the metrics.
public struct OrphanSweepRecord: Sendable, Equatable {
    public var aborted = 0
    public var young = 0
    /// Destinations that could not be swept.
    public var failures = 0

    public init(aborted: Int = 0, young: Int = 0, failures: Int = 0) {
        self.aborted = aborted
        self.young = young
        self.failures = failures
    }
}

extension JournalSummary.Tally {
    /// Byte sums saturate: a card's sizes are the card's to say (see `Int64.addingSaturating`).
    public static func + (a: Self, b: Self) -> Self { Self(count: a.count + b.count, bytes: a.bytes.addingSaturating(b.bytes)) }
}

extension Journal {
    /// The journal's lifetime totals, read in one transaction.
    ///
    /// Written after every card, so each query is answered from an index (migration v7):
    /// the files by state from (state, size) alone, the rest from the rows not done yet
    /// (`IN` lists and `= 1`, which SQLite matches to an index where `!=`, `NOT IN` and a
    /// bare column are not), so that it stays cheap at a million files and uploads.
    public func totals() async throws(JournalError) -> JournalTotals {
        try await reading { db in
            var totals = JournalTotals()
            let since = JournalDate(Date().addingTimeInterval(-Double(JournalTotals.recentCardDays) * 86_400))
            totals.recentCards = try Row.fetchAll(
                db, sql: "SELECT key, name, safeToErase FROM volume WHERE safeToErase IS NOT NULL AND lastSeen >= ? ORDER BY key",
                arguments: [since]
            ).map { CardVerdictRecord(volumeKey: $0[0], name: $0[1], safeToErase: $0[2]) }
            func tally(_ sql: String) throws -> JournalSummary.Tally {
                let row = try Row.fetchOne(db, sql: sql)!
                return .init(count: row[0], bytes: row[1])
            }
            func list(_ values: [String]) -> String { values.map { "'\($0)'" }.joined(separator: ", ") }
            for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*), COALESCE(SUM(size), 0) FROM file GROUP BY state") {
                if let state = FileState(rawValue: row[0]) { totals.files[state] = .init(count: row[1], bytes: row[2]) }
            }
            let notUploaded = list(FileState.allCases.filter { $0 != .uploaded }.map(\.rawValue))
            totals.failedFiles = try tally(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM file WHERE state IN (\(notUploaded)) AND lastError IS NOT NULL")
            let pending = "phase IN (\(list(UploadStateMachine.Phase.allCases.filter { $0 != .completed && $0 != .aborted }.map(\.rawValue))))"
            totals.pendingUploads = try tally("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM upload WHERE \(pending)")
            totals.failedUploads = try tally(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM upload WHERE \(pending) AND lastError IS NOT NULL")
            totals.stagedCopies = try tally("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM stagedObject WHERE removedAt IS NULL")
            totals.quarantinedFiles = try tally("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM file WHERE quarantined = 1")
            totals.quarantinedUploads = try tally("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM upload WHERE quarantined = 1")
            totals.lastUploadAt = try JournalDate.fetchOne(db, sql: "SELECT MAX(completedAt) FROM upload WHERE phase = 'completed'")?.date
            if let row = try Row.fetchOne(db, sql: "SELECT lastRunAt, lastExitStatus, lastSuccessAt FROM rescan WHERE id = 1") {
                totals.lastRescanAt = (row[0] as JournalDate?)?.date
                totals.lastRescanExitStatus = row[1]
                totals.lastRescanSuccessAt = (row[2] as JournalDate?)?.date
            }
            if let row = try Row.fetchOne(
                db, sql: "SELECT lastRunAt, lastAborted, lastYoung, lastFailures, abortedTotal FROM orphanSweep WHERE id = 1")
            {
                totals.lastOrphanSweepAt = (row[0] as JournalDate?)?.date
                totals.lastOrphanSweep = OrphanSweepRecord(aborted: row[1], young: row[2], failures: row[3])
                totals.orphansAbortedTotal = row[4]
            }
            if let (last, total) = try Self.lastCardRun(db) {
                totals.lastCard = last
                totals.cardsTotal = total
            }
            return totals
        }
    }

    /// A volume's files by state: what is left of a card after a run.
    public func files(byStateOfVolume key: String) async throws(JournalError) -> [FileState: JournalSummary.Tally] {
        try await reading { db in
            var byState: [FileState: JournalSummary.Tally] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT state, COUNT(*), COALESCE(SUM(size), 0) FROM file WHERE volumeKey = ? GROUP BY state",
                arguments: [key])
            {
                if let state = FileState(rawValue: row[0]) { byState[state] = .init(count: row[1], bytes: row[2]) }
            }
            return byState
        }
    }

    /// Pending uploads in the order planned (a content's before its copies), but for those carrying a file of one of `volumeKeys`
    /// (the cards a rescan is about to ingest, which finish their own).
    public func pendingUploads(exceptOfVolumes volumeKeys: Set<String>) async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            let keys = Array(volumeKeys)
            let placeholders = keys.isEmpty ? "NULL" : Array(repeating: "?", count: keys.count).joined(separator: ", ")
            return try UploadRecord.fetchAll(
                db,
                sql: """
                    SELECT * FROM upload WHERE phase NOT IN ('completed', 'aborted')
                    AND NOT EXISTS (SELECT 1 FROM file WHERE file.uploadID = upload.id AND file.volumeKey IN (\(placeholders)))
                    ORDER BY rowid
                    """, arguments: StatementArguments(keys))
        }
    }

    /// The keys of every volume the journal has seen.
    public func volumeKeys() async throws(JournalError) -> Set<String> {
        try await reading { db in Set(try String.fetchAll(db, sql: "SELECT key FROM volume")) }
    }

    /// When the last orphan sweep that reached every destination ran; nil if none has.
    public func lastCompleteOrphanSweep() async throws(JournalError) -> Date? {
        try await reading { db in
            try JournalDate.fetchOne(db, sql: "SELECT lastCompleteAt FROM orphanSweep WHERE id = 1")?.date
        }
    }

    /// Records an orphan sweep: its time (as complete only when every destination was
    /// swept, so that a failed one is tried again on the next rescan) and what it found.
    public func noteOrphanSweep(_ sweep: OrphanSweepRecord, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    INSERT INTO orphanSweep (id, lastRunAt, lastCompleteAt, lastAborted, lastYoung, lastFailures, abortedTotal)
                    VALUES (1, ?1, ?2, ?3, ?4, ?5, ?3)
                    ON CONFLICT(id) DO UPDATE SET lastRunAt = excluded.lastRunAt,
                      lastCompleteAt = COALESCE(excluded.lastCompleteAt, orphanSweep.lastCompleteAt),
                      lastAborted = excluded.lastAborted, lastYoung = excluded.lastYoung,
                      lastFailures = excluded.lastFailures, abortedTotal = orphanSweep.abortedTotal + excluded.lastAborted
                    """,
                arguments: [
                    JournalDate(date), sweep.failures == 0 ? JournalDate(date) : nil, sweep.aborted, sweep.young, sweep.failures,
                ])
        }
    }

    /// Records how a rescan ended: its time, its exit status, and (when it finished
    /// everything) its time as the last success.
    public func noteRescan(endedAt date: Date, exitStatus: ExitStatus) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    INSERT INTO rescan (id, lastRunAt, lastExitStatus, lastSuccessAt) VALUES (1, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET lastRunAt = excluded.lastRunAt, lastExitStatus = excluded.lastExitStatus,
                      lastSuccessAt = COALESCE(excluded.lastSuccessAt, rescan.lastSuccessAt)
                    """, arguments: [JournalDate(date), exitStatus.rawValue, exitStatus == .success ? JournalDate(date) : nil])
        }
    }
}

/// A card seen lately with files not in the bucket that only the card can bring: copied
/// never, or restaged because their object went missing or changed in the bucket and their
/// staged copy was gone. A rescan names it, and fails, until the card comes back.
public struct CardAwaitingItself: Sendable, Equatable {
    public var volumeKey: String
    /// The card as people call it (its label, else its device or path).
    public var name: String
    /// Where it was last mounted.
    public var rootPath: String
    public var files: Int
    public var bytes: Int64
    /// One of the files, and why it waits.
    public var firstPath: CardPath
    public var reason: String?
}

extension Journal {
    /// The cards seen since `date` with files waiting for the card (``CardAwaitingItself``), but
    /// those of `volumeKeys` (the cards a rescan just ingested, which said their own verdict).
    /// One indexed pass over the pending files, grouped by card.
    public func cardsAwaitingThemselves(seenSince date: Date, except volumeKeys: Set<String>) async throws(JournalError)
        -> [CardAwaitingItself]
    {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT v.key, v.name, v.rootPath, COUNT(*), SUM(f.size), MIN(f.path), MAX(f.lastError)
                    FROM file f JOIN volume v ON v.key = f.volumeKey
                    WHERE f.state = 'pending' AND v.lastSeen >= ?
                    GROUP BY v.key ORDER BY v.key
                    """, arguments: [JournalDate(date)]
            ).compactMap { row in
                let key: String = row[0]
                guard !volumeKeys.contains(key) else { return nil }
                return CardAwaitingItself(
                    volumeKey: key, name: row[1], rootPath: row[2], files: row[3], bytes: row[4] ?? 0,
                    firstPath: CardPath(bytes: Array(row[5] as Data)), reason: row[6])
            }
        }
    }
}
