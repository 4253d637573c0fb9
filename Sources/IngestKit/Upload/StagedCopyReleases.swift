import Glibc
import Synchronization

/// Staged copies let go as their uploads verify, when nothing is to be kept (`[staging]
/// retention = 0`): each is deleted at once, and the deletions are journalled in batches.
///
/// The journal's completion of an upload answers, in its own transaction, whether the copy
/// may go (``UploadLog/completeUpload(id:etag:releasingStagedCopy:)``); recording the
/// deletion separately for every file doubled the journal writes of a card of small
/// files. A kill between a deletion and its batch's write leaves the journal saying the
/// copy is there: the next sweep (`ingest rescan`) finds it gone and records it then.
final class StagedCopyReleases: Sendable {
    /// Deletions journalled in one write.
    static let batchSize = 64

    private let journal: any UploadLog
    private let area: StagingArea
    private let unrecorded = Mutex<[Fingerprint]>([])
    private let deleted = Atomic<Int>(0)

    init(journal: any UploadLog, area: StagingArea) {
        self.journal = journal
        self.area = area
    }

    /// Copies deleted so far.
    var count: Int { deleted.load(ordering: .relaxed) }

    /// A copy up to this size is let go on the calling task: renaming and truncating it
    /// takes less than the hand-over to a blocking worker and back (two thread wake-ups).
    static let retiredOnTask: Int64 = 1 << 20

    /// Deletes the staged copy of `fingerprint`, of `size` bytes (already gone counts as
    /// deleted; its inode may be kept as a spare, ``StagingArea/retire(_:size:)``) and journals it
    /// with the next batch.
    func release(_ fingerprint: Fingerprint, size: Int64) async {
        let area = area
        // Freeing a large copy's extents takes a while: not on the concurrency pool.
        let gone = size <= Self.retiredOnTask
            ? area.retire(fingerprint, size: size) : await BlockingWorkers.shared.run { area.retire(fingerprint, size: size) }
        guard gone else { return }
        deleted.add(1, ordering: .relaxed)
        let batch = unrecorded.withLock { list -> [Fingerprint] in
            list.append(fingerprint)
            guard list.count >= Self.batchSize else { return [] }
            defer { list.removeAll(keepingCapacity: true) }
            return list
        }
        await record(batch)
    }

    /// Journals the deletions not yet journalled: at the end of a run.
    func flush() async {
        await record(unrecorded.withLock { list in defer { list.removeAll() }; return list })
    }

    private func record(_ batch: [Fingerprint]) async {
        guard !batch.isEmpty else { return }
        // A failed write only delays the record: the sweep finds these copies gone.
        try? await journal.noteStagedCopiesRemoved(batch)
    }
}
