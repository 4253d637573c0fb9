import Foundation
import GRDB
import Testing

@testable import IngestKit

/// Which commits are synced: durable writes, and ``Journal/sync()``; the per-file writes of a
/// card wait for the next sync.
@Suite struct JournalDurabilityTests {
    @Test func aDurableWriteIsCommittedWithTheLogSyncedAndAPerFileWriteIsNot() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        let durable = try await journal.writing { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        let perFile = try await journal.writing(durable: false) { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(durable == 2, "FULL: the write-ahead log is synced at this commit")
        #expect(perFile == 1, "NORMAL: synced by the next durable commit or checkpoint")
        let after = try await journal.writing(durable: false) { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(after == 1, "a durable write leaves the connection as it found it")
    }

    /// The journal as the releases see it: which copies were still on disk at each sync.
    final class SyncLog: UploadLog, @unchecked Sendable {
        let path = "test"
        let area: StagingArea
        let copies: [Fingerprint]
        private let lock = NSLock()
        private var presentAtSyncs: [Int] = []
        private var recorded: [Fingerprint] = []

        init(area: StagingArea, copies: [Fingerprint]) {
            self.area = area
            self.copies = copies
        }

        var syncs: [Int] { lock.withLock { presentAtSyncs } }
        var removed: [Fingerprint] { lock.withLock { recorded } }

        func sync() async throws(JournalError) {
            let present = copies.filter(area.contains).count
            lock.withLock { presentAtSyncs.append(present) }
        }
        func noteStagedCopiesRemoved(_ fingerprints: [Fingerprint]) async throws(JournalError) {
            lock.withLock { recorded += fingerprints }
        }
        func persist(
            _ snapshot: UploadStateMachine.Snapshot, added: [UploadStateMachine.AcknowledgedPart], removed: [Int],
            lastError: String?
        ) async throws(JournalError) {}
        func noteFailure(_ message: String, ofUpload id: String, quarantineAfter: Int) async throws(JournalError) -> Bool { false }
        func completeUpload(id: String, object: StoredObject?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint? { nil }
        func isForeign(key: String, etag: String, target: S3Destination) async throws(JournalError) -> Bool { false }
        func restartUpload(id: String, key: String) async throws(JournalError) -> UploadRecord? { nil }
        func restage(uploadID id: String, reason: String) async throws(JournalError) {}
    }

    /// `count` staged copies of one byte each.
    func stagedCopies(_ count: Int, in area: StagingArea) throws -> [Fingerprint] {
        try (1...count).map { n in
            let fingerprint = Fingerprint(high: UInt64(n), low: 7)
            let path = area.path(for: fingerprint)
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: path, contents: Data([UInt8(n % 256)])))
            return fingerprint
        }
    }

    @Test func aFullBatchWaitsForTheLeastTimeBetweenSyncs() async throws {
        let dir = TemporaryDirectory()
        let area = try StagingArea(root: dir.path + "/staging")
        let copies = try stagedCopies(StagedCopyReleases.batchSize * 2, in: area)
        let log = SyncLog(area: area, copies: copies)
        let releases = StagedCopyReleases(journal: log, area: area)

        for fingerprint in copies { await releases.release(fingerprint, size: 1) }
        #expect(log.syncs.isEmpty, "two batches within the interval: no sync yet")
        #expect(copies.allSatisfy(area.contains))
        await releases.flush()
        #expect(log.syncs == [copies.count])
        #expect(!copies.contains(where: area.contains))
    }

    @Test func aLargeCopyGoesAfterASyncOfItsOwnWithoutWaitingForABatch() async throws {
        let dir = TemporaryDirectory()
        let area = try StagingArea(root: dir.path + "/staging")
        let copies = try stagedCopies(2, in: area)
        let log = SyncLog(area: area, copies: copies)
        let releases = StagedCopyReleases(journal: log, area: area)

        await releases.release(copies[0], size: 1)
        await releases.release(copies[1], size: StagedCopyReleases.batchBytes)
        #expect(log.syncs == [2], "the staging disk is not kept full waiting for a batch")
        #expect(!copies.contains(where: area.contains))
    }

    @Test func stagedCopiesAreDeletedOnlyAfterASyncMadeTheirCompletionsDurable() async throws {
        let dir = TemporaryDirectory()
        let area = try StagingArea(root: dir.path + "/staging")
        let count = StagedCopyReleases.batchSize + 3
        let copies = try stagedCopies(count, in: area)
        let log = SyncLog(area: area, copies: copies)
        let clock = ManualClock()
        let releases = StagedCopyReleases(journal: log, area: area, clock: clock)
        // A full batch goes once the least time between syncs has passed since the releases began.
        clock.advance(by: StagedCopyReleases.syncInterval)

        for fingerprint in copies.prefix(StagedCopyReleases.batchSize - 1) { await releases.release(fingerprint, size: 1) }
        #expect(log.syncs.isEmpty)
        #expect(copies.allSatisfy(area.contains), "no copy goes before its completion is synced")

        for fingerprint in copies.dropFirst(StagedCopyReleases.batchSize - 1) { await releases.release(fingerprint, size: 1) }
        #expect(log.syncs == [count], "one sync, with every copy still there")
        #expect(copies.prefix(StagedCopyReleases.batchSize).allSatisfy { !area.contains($0) })
        #expect(copies.suffix(3).allSatisfy(area.contains))

        await releases.flush()
        #expect(log.syncs == [count, 3])
        #expect(!copies.contains(where: area.contains))
        #expect(Set(log.removed) == Set(copies), "every deletion journalled")
        #expect(releases.count == count)
    }
}

/// A process's mark in the state directory: one left by a process that is gone tells the
/// next of an unclean stop.
@Suite struct RunMarkTests {
    @Test func aMarkLeftByAProcessThatIsGoneCountsAsOneUncleanStop() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let first = try state.markRun()
        #expect(first.uncleanStops == 0)
        // A process of another boot (a power cut), and one of this boot that no longer runs.
        for name in ["0123456789abcdef-4242", "\(StateDirectory.bootID)-\(Int32.max)"] {
            #expect(FileManager.default.createFile(atPath: "\(state.runsPath)/\(name)", contents: nil))
        }
        let second = try state.markRun()
        #expect(second.uncleanStops == 2)
        #expect(try state.markRun().uncleanStops == 0, "each unclean stop is told once")
        first.end()
        second.end()
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.runsPath).isEmpty)
    }

    /// What a process a signal stops (a clean stop) or one that calls `exit` does before it
    /// ends: every mark of it goes, though its services still hold them.
    @Test func endingAllMarksLeavesNoneForTheNextProcessToCall() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let held = try state.markRun()
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.runsPath).count == 1)
        RunMark.endAll()
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.runsPath).isEmpty)
        withExtendedLifetime(held) {}
    }

    @Test func aLiveProcesssMarkIsNoUncleanStop() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let mine = try state.markRun()
        let again = try state.markRun()
        #expect(again.uncleanStops == 0)
        withExtendedLifetime(mine) {}
    }
}
