import Foundation
import GRDB

/// What a card holds that its last scan could not ingest, through no rule of the user's: a
/// folder too deep to enter, one that cannot be read (``SkipReason/losesContent``). Kept
/// per card until its next scan, so that `status` names them and the card is not safe to
/// erase while any is there.
public struct LostSkip: Sendable, Equatable {
    public var path: CardPath
    /// ``SkipReason/code``.
    public var code: String
    /// ``SkipReason/description``.
    public var reason: String
}

extension Journal {
    /// Replaces the card's lost skips with those of the scan just made (at most
    /// ``ScanPlan/reportLimit`` of them: the scan lists no more).
    public func noteLostSkips(_ skips: [(CardPath, SkipReason)], ofVolume key: String) async throws(JournalError) {
        try await writing(durable: false) { db in
            try db.cachedStatement(sql: "DELETE FROM cardSkip WHERE volumeKey = ?").execute(arguments: [key])
            for (path, reason) in skips {
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO cardSkip (volumeKey, path, reason, code) VALUES (?, ?, ?, ?)")
                    .execute(arguments: [key, Data(path.bytes), reason.description, reason.code])
            }
        }
    }

    /// The card's lost skips, as its last scan found them, in path order.
    public func lostSkips(ofVolume key: String) async throws(JournalError) -> [LostSkip] {
        try await reading { db in
            try Row.fetchAll(db, sql: "SELECT path, code, reason FROM cardSkip WHERE volumeKey = ? ORDER BY path", arguments: [key])
                .map { row in LostSkip(path: CardPath(bytes: Array(row[0] as Data)), code: row[1], reason: row[2]) }
        }
    }
}
