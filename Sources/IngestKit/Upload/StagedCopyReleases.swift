import Synchronization

/// Staged copies let go as their uploads verify, when nothing is to be kept (`[staging]
/// retention = 0`): deleted in batches, each once the journal has synced the completions
/// that allow it, and the deletions journalled a batch later.
///
/// The journal's completion of an upload answers, in its own transaction, whether the copy
/// may go (``UploadLog/completeUpload(id:etag:releasingStagedCopy:)``); that commit is not
/// synced, so a power cut could undo it, and the copy may be the only one left of a file
/// whose upload would then be pending again. So the copies wait here until one
/// ``UploadLog/sync()`` makes their completions durable: a batch goes once it holds
/// ``batchSize`` copies and ``syncInterval`` has passed since the last sync, or once it
/// holds ``maxWaiting`` copies or ``batchBytes`` (the staging disk is not kept full for a
/// sync's sake), so that a card of small files costs a few syncs a second, not one a file
/// or one a few dozen files (each sync holds the journal's other writes back). Their
/// deletion is recorded with the next batch. A kill or a cut before a deletion's record
/// leaves the journal saying the copy is there: the next sweep (`ingest rescan`) finds it
/// gone and records it.
final class StagedCopyReleases: Sendable {
    /// Copies deleted after one sync at least, and deletions journalled in one write.
    static let batchSize = 64
    /// The least time between two syncs for a batch of ``batchSize`` or more…
    static let syncInterval: Duration = .milliseconds(250)
    /// …unless this many copies wait: they are bounded in number, as the memory they take is…
    static let maxWaiting = 1024
    /// …or they hold this many bytes of the staging disk.
    static let batchBytes: Int64 = 64 << 20

    private struct Waiting {
        /// Completed, not yet synced: to delete after the next sync.
        var toDelete: [(fingerprint: Fingerprint, size: Int64)] = []
        var toDeleteBytes: Int64 = 0
        /// Deleted, not yet journalled.
        var unrecorded: [Fingerprint] = []
        /// When the last batch was taken for its sync.
        var lastSync: ContinuousClock.Instant
    }

    private let journal: any UploadLog
    private let area: StagingArea
    private let waiting: Mutex<Waiting>
    private let deleted = Atomic<Int>(0)
    /// The time: the continuous clock's, or a test's.
    private let now: @Sendable () -> ContinuousClock.Instant

    init<C: Clock>(journal: any UploadLog, area: StagingArea, clock: C = ContinuousClock())
    where C.Instant == ContinuousClock.Instant {
        self.journal = journal
        self.area = area
        now = { clock.now }
        waiting = Mutex(Waiting(lastSync: clock.now))
    }

    /// Copies deleted so far.
    var count: Int { deleted.load(ordering: .relaxed) }

    /// A copy up to this size is let go on the calling task: renaming and truncating it
    /// takes less than the hand-over to a blocking worker and back (two thread wake-ups).
    static let retiredOnTask: Int64 = 1 << 20

    /// Lets the staged copy of `fingerprint`, of `size` bytes, go once its completion is
    /// synced: with the batch it fills, or at ``flush()``. (Already gone counts as deleted;
    /// its inode may be kept as a spare, ``StagingArea/retire(_:size:)``.)
    func release(_ fingerprint: Fingerprint, size: Int64) async {
        let batch = waiting.withLock { waiting -> [(fingerprint: Fingerprint, size: Int64)] in
            waiting.toDelete.append((fingerprint, size))
            waiting.toDeleteBytes += size
            let now = self.now()
            let due = waiting.toDelete.count >= Self.batchSize && now - waiting.lastSync >= Self.syncInterval
            guard due || waiting.toDelete.count >= Self.maxWaiting || waiting.toDeleteBytes >= Self.batchBytes else { return [] }
            waiting.lastSync = now
            waiting.toDeleteBytes = 0
            defer { waiting.toDelete.removeAll(keepingCapacity: true) }
            return waiting.toDelete
        }
        await delete(batch)
    }

    /// At the end of a run's uploads: deletes the copies waiting, after a sync, and journals
    /// the deletions not yet journalled (the run syncs the journal once more before it
    /// reports its end).
    func flush() async {
        let batch = waiting.withLock { waiting in
            defer {
                waiting.toDelete.removeAll()
                waiting.toDeleteBytes = 0
            }
            return waiting.toDelete
        }
        await delete(batch)
        let unrecorded = waiting.withLock { waiting in defer { waiting.unrecorded.removeAll() }; return waiting.unrecorded }
        // A failed write only delays the record: the sweep finds these copies gone.
        try? await journal.noteStagedCopiesRemoved(unrecorded)
    }

    /// Syncs the journal, then deletes `batch` and records the deletions of the batch before
    /// (that write needs no sync of its own: the next sync carries it). A failed sync keeps
    /// the copies: the sweep deletes them once their completions are on disk.
    private func delete(_ batch: [(fingerprint: Fingerprint, size: Int64)]) async {
        guard !batch.isEmpty else { return }
        do { try await journal.sync() } catch { return }
        var gone: [Fingerprint] = []
        for (fingerprint, size) in batch {
            let area = area
            // Freeing a large copy's extents takes a while: not on the concurrency pool.
            let retired = size <= Self.retiredOnTask
                ? area.retire(fingerprint, size: size) : await BlockingWorkers.shared.run { area.retire(fingerprint, size: size) }
            if retired { gone.append(fingerprint) }
        }
        deleted.add(gone.count, ordering: .relaxed)
        let unrecorded = waiting.withLock { waiting -> [Fingerprint] in
            defer { waiting.unrecorded = gone }
            return waiting.unrecorded
        }
        try? await journal.noteStagedCopiesRemoved(unrecorded)
    }
}
