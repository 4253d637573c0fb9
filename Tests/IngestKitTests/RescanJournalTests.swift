import Foundation
import Glibc
import Testing

@testable import IngestKit

/// What `ingest rescan` asks of the journal and the staging area: which pending uploads
/// its resume step takes, the totals its summary and metrics show, the record of its runs,
/// and the sweep of the staging area.
@Suite struct RescanJournalTests {
    let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)

    func volume(_ key: String) -> VolumeIdentity {
        VolumeIdentity(key: key, rootPath: "/media/\(key)", mountPoint: nil, pathInFileSystem: "/", fsType: nil, device: nil)
    }

    func openJournal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        for key in ["uuid:A", "uuid:B"] { try await journal.noteVolume(volume(key)) }
        return (dir, journal)
    }

    /// Stages a file of `size` bytes on a volume and plans its upload.
    @discardableResult
    func stageAndClaim(_ journal: Journal, _ key: String, _ path: String, digest: UInt64, size: Int64 = 100) async throws -> UploadRecord {
        let staged = StagedFile(
            file: ScannedFile(path: CardPath(path), size: size, mtime: 1), fingerprint: Fingerprint(high: digest, low: digest),
            deduplicated: false, verified: false)
        try await journal.record([.staged(staged)], volumeKey: key)
        let claim = UploadClaim(
            path: staged.file.path, fingerprint: staged.fingerprint, size: size, target: target, key: "k/\(path)",
            headers: [], partSize: nil)
        switch try await journal.claim([claim], volumeKey: key)[0] {
        case .planned(let record), .upload(let record), .alreadyInBucket(let record), .copy(let record, _): return record
        }
    }

    @Test func theLastCardIsKeptAndEveryCardCounted() async throws {
        let (_, journal) = try await openJournal()
        #expect(try await journal.totals().lastCard == nil)
        var first = CardRunRecord(endedAt: Date(timeIntervalSince1970: 1_800_000_000), exitStatus: 0, seconds: 3.5)
        (first.staged, first.stagedBytes, first.uploaded, first.uploadedBytes) = (5, 500, 5, 500)
        try await journal.noteCardRun(first)
        var second = CardRunRecord(endedAt: Date(timeIntervalSince1970: 1_800_000_100), exitStatus: 74, seconds: 1.25)
        (second.staged, second.stagedBytes, second.failed) = (2, 20, 3)
        try await journal.noteCardRun(second)
        let totals = try await journal.totals()
        #expect(totals.lastCard == second)
        #expect(totals.cardsTotal == 2)
    }

    @Test func theResumeStepLeavesTheUploadsOfTheCardsAboutToBeIngestedToThem() async throws {
        let (_, journal) = try await openJournal()
        let onA = try await stageAndClaim(journal, "uuid:A", "a.jpg", digest: 1)
        let onB = try await stageAndClaim(journal, "uuid:B", "b.jpg", digest: 2)
        let shared = try await stageAndClaim(journal, "uuid:B", "same.jpg", digest: 3)
        let copyOnA = try await stageAndClaim(journal, "uuid:A", "same-on-a.jpg", digest: 3)

        #expect(try await journal.pendingUploads(exceptOfVolumes: []).map(\.id) == [onA.id, onB.id, shared.id, copyOnA.id])
        #expect(
            try await journal.pendingUploads(exceptOfVolumes: ["uuid:A"]).map(\.id) == [onB.id, shared.id],
            "card A's copy of a content B brought is A's; the content's upload is B's")
        #expect(try await journal.pendingUploads(exceptOfVolumes: ["uuid:A", "uuid:B"]).isEmpty)
    }

    @Test func aFailedRescanKeepsTheTimeOfTheLastSuccess() async throws {
        let (_, journal) = try await openJournal()
        #expect(try await journal.totals().lastRescanAt == nil)
        let night1 = Date(timeIntervalSince1970: 1_800_000_000)
        let night2 = night1.addingTimeInterval(86_400)
        try await journal.noteRescan(endedAt: night1, exitStatus: .success)
        try await journal.noteRescan(endedAt: night2, exitStatus: .unavailable)
        let totals = try await journal.totals()
        #expect(totals.lastRescanAt == night2)
        #expect(totals.lastRescanExitStatus == ExitStatus.unavailable.rawValue)
        #expect(totals.lastRescanSuccessAt == night1)
    }

    @Test func orphanSweepsAddUpTheirAbortsAndOnlyACompleteOneDefersTheNext() async throws {
        let (_, journal) = try await openJournal()
        #expect(try await journal.lastCompleteOrphanSweep() == nil)
        #expect(try await journal.totals().lastOrphanSweepAt == nil)
        let night1 = Date(timeIntervalSince1970: 1_800_000_000)
        let night2 = night1.addingTimeInterval(86_400)
        try await journal.noteOrphanSweep(OrphanSweepRecord(aborted: 3, young: 1, failures: 0), at: night1)
        try await journal.noteOrphanSweep(OrphanSweepRecord(aborted: 2, young: 0, failures: 1), at: night2)
        #expect(try await journal.lastCompleteOrphanSweep() == night1, "a sweep that missed a destination is not complete")
        let totals = try await journal.totals()
        #expect(totals.lastOrphanSweepAt == night2)
        #expect(totals.lastOrphanSweep == OrphanSweepRecord(aborted: 2, young: 0, failures: 1))
        #expect(totals.orphansAbortedTotal == 5)
    }

    @Test func totalsCountFilesByStateTheFailedOnesAndWhatStagingHolds() async throws {
        let (_, journal) = try await openJournal()
        let uploaded = try await stageAndClaim(journal, "uuid:A", "done.jpg", digest: 1, size: 1000)
        let completed = Date(timeIntervalSince1970: 1_800_000_000)
        try await journal.completeUpload(id: uploaded.id, object: nil, at: completed)
        let waiting = try await stageAndClaim(journal, "uuid:A", "waiting.jpg", digest: 2, size: 200)
        try await journal.noteFailure("HTTP 503", ofUpload: waiting.id)
        let unreadable = ScannedFile(path: CardPath("bad.jpg"), size: 30, mtime: 1)
        try await journal.record(
            [.failed(unreadable, StageFailure(kind: .ioError(SystemError(call: "read", errno: .ioError))))], volumeKey: "uuid:B")

        let totals = try await journal.totals()
        #expect(totals.files[.uploaded] == .init(count: 1, bytes: 1000))
        #expect(totals.files[.staged] == .init(count: 1, bytes: 200))
        #expect(totals.files[.pending] == .init(count: 1, bytes: 30))
        #expect(totals.stagedEver == .init(count: 2, bytes: 1200))
        #expect(totals.notUploaded == .init(count: 2, bytes: 230))
        #expect(totals.failedFiles == .init(count: 1, bytes: 30))
        #expect(totals.pendingUploads == .init(count: 1, bytes: 200))
        #expect(totals.failedUploads == .init(count: 1, bytes: 200))
        #expect(totals.stagedCopies == .init(count: 2, bytes: 1200), "no copy was removed yet")
        #expect(totals.lastUploadAt == completed)
        #expect(try await journal.files(byStateOfVolume: "uuid:B") == [.pending: .init(count: 1, bytes: 30)])
    }

    @Test func aSweepRemovesVerifiedCopiesPastRetentionAndPartialsOfDeadProcesses() async throws {
        let (dir, journal) = try await openJournal()
        let area = try StagingArea(root: dir.path + "/staging")
        let now = Date()
        var copies: [String: String] = [:]
        for (name, digest, age) in [("old", UInt64(1), 7200.0), ("recent", 2, 60), ("unsent", 3, -1)] {
            let record = try await stageAndClaim(journal, "uuid:A", "\(name).jpg", digest: digest)
            let path = area.path(for: Fingerprint(high: digest, low: digest))
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("copy".utf8).write(to: URL(fileURLWithPath: path))
            copies[name] = path
            if age >= 0 { try await journal.completeUpload(id: record.id, object: nil, at: now.addingTimeInterval(-age)) }
        }
        let dead = deadPID()
        let abandoned = area.partialDirectory + "/\(dead)-1.partial"
        let ours = area.partialDirectory + "/\(getpid())-2.partial"
        for partial in [abandoned, ours] { try Data("half".utf8).write(to: URL(fileURLWithPath: partial)) }

        let sweep = try await area.sweep(journal: journal, retention: .seconds(3600))

        #expect(sweep == { var s = StagingSweep(); s.copiesRemoved = 1; s.partialsRemoved = 1; return s }())
        #expect(!FileManager.default.fileExists(atPath: copies["old"]!), "verified two hours ago, retention one hour")
        #expect(FileManager.default.fileExists(atPath: copies["recent"]!), "verified a minute ago")
        #expect(FileManager.default.fileExists(atPath: copies["unsent"]!), "its upload is still pending")
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: ours), "a live process's copy in progress")
        #expect(try await journal.totals().stagedCopies.count == 2)
    }

    /// A process id no process has: that of a child that has exited and been reaped.
    func deadPID() -> Int32 {
        let child = try? ChildProcess("/bin/true", [])
        _ = try? child?.wait()
        return child?.pid ?? Int32.max
    }
}
