// Staged-copy bookkeeping: which copies in the staging area no file or upload waits for any
// more, and which were deleted.

import Foundation
import GRDB

extension Journal {
    /// Staged copies whose content is verified in the bucket since before `cutoff`, that no
    /// file still waits for: they may be deleted.
    public func stagedCopiesToRemove(completedBefore cutoff: Date) async throws(JournalError) -> [Fingerprint] {
        try await reading { db in
            try String.fetchAll(db, sql: Self.removableCopies(only: false), arguments: [JournalDate(cutoff)])
                .compactMap(Fingerprint.init(hex:))
        }
    }

    /// The staged copies that may go: verified in the bucket at `?1` or before, and waited
    /// for by no file or unfinished upload. With `only`, the one copy of content `?2`, by
    /// its key (after each upload); without, all of them (the rescan's sweep). Every
    /// subquery looks up by content (`+u.phase` keeps SQLite from choosing the phase index,
    /// which holds every completed upload).
    static func removableCopies(only: Bool) -> String {
        """
        SELECT s.fingerprint FROM stagedObject s
        WHERE \(only ? "s.fingerprint = ?2 AND " : "")s.removedAt IS NULL
        AND EXISTS (SELECT 1 FROM upload u WHERE u.fingerprint = s.fingerprint AND +u.phase = 'completed'
                    AND u.completedAt <= ?1)
        AND NOT EXISTS (SELECT 1 FROM upload u WHERE u.fingerprint = s.fingerprint
                        AND +u.phase NOT IN ('completed', 'aborted'))
        AND NOT EXISTS (SELECT 1 FROM file f WHERE f.fingerprint = s.fingerprint AND f.state != 'uploaded')
        """
    }

    /// Records that these staged copies were deleted.
    public func noteStagedCopiesRemoved(_ fingerprints: [Fingerprint], at date: Date = Date()) async throws(JournalError) {
        guard !fingerprints.isEmpty else { return }
        try await writing(durable: false) { db in
            for fingerprint in fingerprints {
                try db.cachedStatement(sql: "UPDATE stagedObject SET removedAt = ? WHERE fingerprint = ?")
                    .execute(arguments: [JournalDate(date), fingerprint.hex])
            }
        }
    }
}
