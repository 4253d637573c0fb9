import Foundation
import Glibc

/// What a sweep of the staging area removed.
public struct StagingSweep: Sendable, Equatable {
    /// Staged copies whose objects verified longer ago than the retention.
    public var copiesRemoved = 0
    /// Partial copies left by processes that no longer run (a kill -9, a crash).
    public var partialsRemoved = 0
    public init() {}
}

extension StagingArea {
    /// Deletes the staged copies whose objects verified in the bucket longer than `retention`
    /// ago and that no file or upload still waits for, and records their removal. Returns
    /// how many went.
    public func removeVerifiedCopies(journal: Journal, retention: Duration, now: Date = Date()) async throws -> Int {
        let cutoff = now.addingTimeInterval(-retention.inSeconds)
        var removed: [Fingerprint] = []
        for fingerprint in try await journal.stagedCopiesToRemove(completedBefore: cutoff) {
            if unlink(path(for: fingerprint)) == 0 || errno == ENOENT { removed.append(fingerprint) }
        }
        try await journal.noteStagedCopiesRemoved(removed)
        return removed.count
    }

    /// The whole clean-up `ingest rescan` does: verified copies past `retention`, and
    /// partial copies abandoned by dead processes. Complete copies the journal does not
    /// know (a kill between linking a copy and journalling it) are kept: the next ingest of
    /// their card finds them by content instead of copying again.
    public func sweep(journal: Journal, retention: Duration) async throws(IngestError) -> StagingSweep {
        var sweep = StagingSweep()
        sweep.partialsRemoved = removeAbandonedPartials()
        do { sweep.copiesRemoved = try await removeVerifiedCopies(journal: journal, retention: retention) } catch {
            throw .stateUnusable(path: journal.path, reason: "cannot clean the staging area: \(error)")
        }
        return sweep
    }
}
