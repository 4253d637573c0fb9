import Foundation

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
    /// ago and that no file or upload still waits for, and records their removal (copies
    /// already gone count: a kill after deleting one, before its record). Returns how many went.
    public func removeVerifiedCopies(journal: Journal, retention: Duration, now: Date = Date()) async throws(JournalError) -> Int {
        let cutoff = now.addingTimeInterval(-retention.inSeconds)
        let candidates = try await journal.stagedCopiesToRemove(completedBefore: cutoff)
        guard !candidates.isEmpty else { return 0 }
        // Their uploads' completions may not be on disk yet (``Journal/sync()``).
        try await journal.sync()
        // Unlinking a large copy frees its extents there and then: not on the concurrency pool.
        let removed = await BlockingWorkers.shared.run {
            candidates.filter { System.removeIfPresent(path(for: $0)) }
        }
        try await journal.noteStagedCopiesRemoved(removed)
        return removed.count
    }

    /// The whole clean-up `ingest rescan` does: verified copies past `retention`, partial
    /// copies abandoned by dead processes, and copies a killed run let go but did not
    /// delete. Complete copies the journal does not know (a kill between linking a copy and
    /// journalling it) are kept: the next ingest of their card finds them by content
    /// instead of copying again.
    public func sweep(journal: Journal, retention: Duration) async throws(IngestError) -> StagingSweep {
        var sweep = StagingSweep()
        sweep.partialsRemoved = removeAbandonedPartials()
        freeLeftovers()
        do { sweep.copiesRemoved = try await removeVerifiedCopies(journal: journal, retention: retention) } catch {
            throw .journal(error)
        }
        return sweep
    }
}
