import Foundation
import GRDB
import Testing

@testable import IngestKit

/// The journal's record of streams (the parts of a large file sent as it is copied): what a
/// kill or a power cut before the file's claim leaves, and what the next process adopts.
@Suite struct StreamJournalTests {
    let volume = VolumeIdentity(
        key: "uuid:5678-EF01", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "ext4",
        device: nil)
    let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)
    let file = ScannedFile(path: CardPath("DCIM/CLIP0001.MP4"), size: 40 << 20, mtime: 17)

    func openJournal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        return (dir, journal)
    }

    func stream(id: Int64 = 42, of file: ScannedFile? = nil) -> StreamRecord {
        let file = file ?? self.file
        return StreamRecord(
            id: id, volumeKey: volume.key, path: file.path, size: file.size, mtime: file.mtime, target: target,
            key: "station/DCIM/CLIP0001.MP4", uploadID: "server-upload-1", partSize: 8 << 20,
            headers: [SigV4Header("x-amz-meta-device", "drone-7")])
    }

    func part(_ number: Int) -> UploadStateMachine.AcknowledgedPart {
        .init(number: number, etag: "\"etag-\(number)\"", size: 8 << 20, digest: "crc32c:\(number)")
    }

    func staged(_ file: ScannedFile? = nil, digest: UInt64 = 9) -> StagedFile {
        StagedFile(
            file: file ?? self.file, fingerprint: Fingerprint(high: digest, low: digest), deduplicated: false, verified: false)
    }

    @Test func aStreamKilledAfterItsFileWasStagedIsAdoptedWithEveryPartItJournalled() async throws {
        let (_, journal) = try await openJournal()
        try await journal.beginStream(stream())
        try await journal.noteStreamedPart(part(1), ofStream: 42)
        try await journal.noteStreamedPart(part(2), ofStream: 42)
        try await journal.record([.staged(staged())], volumeKey: volume.key)

        let found = try await journal.adoptableStreams()
        #expect(found.count == 1)
        #expect(found.first?.parts.map(\.number) == [1, 2])
        #expect(found.first?.stagedFingerprint == staged().fingerprint)
        let claim = try #require(found.first?.claim())
        guard case .planned(let record) = try await journal.claim([claim], volumeKey: volume.key).first else {
            Issue.record("the stream was not adopted as the file's upload")
            return
        }
        #expect(record.phase == .uploading)
        #expect(record.uploadID == "server-upload-1")
        #expect(record.key == "station/DCIM/CLIP0001.MP4")
        #expect(record.requestHeaders == [SigV4Header("x-amz-meta-device", "drone-7")])
        let (_, parts) = try #require(try await journal.upload(id: record.id))
        #expect(parts.map(\.etag) == ["\"etag-1\"", "\"etag-2\""])
        #expect(try await journal.adoptableStreams().isEmpty, "the claim ends the stream")
        #expect(try await journal.pendingUploads().map(\.id) == [record.id])
    }

    @Test func aStreamWhoseFileWasNeverStagedOrChangedSinceIsNotAdoptable() async throws {
        let (_, journal) = try await openJournal()
        try await journal.beginStream(stream())
        #expect(try await journal.adoptableStreams().first?.stagedFingerprint == nil, "not staged")

        var changed = file
        changed.mtime += 1
        try await journal.record([.staged(staged(changed))], volumeKey: volume.key)
        let found = try await journal.adoptableStreams()
        #expect(found.first?.stagedFingerprint == nil, "staged with another time: other bytes than the stream's")
        #expect(found.first?.claim() == nil)
    }

    @Test func aStreamEndedByItsAbortLeavesNothingWithItsParts() async throws {
        let (_, journal) = try await openJournal()
        try await journal.beginStream(stream())
        try await journal.noteStreamedPart(part(1), ofStream: 42)
        #expect(try await journal.hasStream(42))
        try await journal.endStream(42)
        #expect(try await !journal.hasStream(42))
        #expect(try await journal.adoptableStreams().isEmpty)
    }

    @Test func aStreamsUploadIsKnownToTheOrphanSweep() async throws {
        let (_, journal) = try await openJournal()
        try await journal.beginStream(stream())
        #expect(try await journal.multipartUploadIDs(endpoint: target.endpoint, bucket: target.bucket) == ["server-upload-1"])
    }

}

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
        func completeUpload(id: String, etag: String?, releasingStagedCopy: Bool) async throws(JournalError) -> Fingerprint? { nil }
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
        let releases = StagedCopyReleases(journal: log, area: area)
        // A full batch goes once the least time between syncs has passed since the releases began.
        try await Task.sleep(for: StagedCopyReleases.syncInterval)

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

    @Test func aLiveProcesssMarkIsNoUncleanStop() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let mine = try state.markRun()
        let again = try state.markRun()
        #expect(again.uncleanStops == 0)
        withExtendedLifetime(mine) {}
    }
}

/// A resume keeps a journalled part only when its digest is the staged copy's for its range.
@Suite struct ResumedPartsTests {
    @Test func aJournalledPartSentFromOtherBytesThanTheStagedCopyIsSentAgain() {
        let checksums = PartChecksums(partSize: 8 << 20, crc32c: [11, 22, 33])
        let parts = [1, 2, 3].map { number in
            UploadPartRecord(
                upload: "u", number: number, etag: "e\(number)", size: 8 << 20,
                digest: PartDigest(crc32c: number == 2 ? 99 : UInt32(11 * number)).journalText)
        }
        #expect(ObjectUploader.parts(parts, matching: checksums).map(\.number) == [1, 3])
        #expect(ObjectUploader.parts(parts, matching: nil).map(\.number) == [1, 2, 3], "nothing to compare with: kept")
    }
}
