import Foundation
import Testing

@testable import IngestKit

/// Every failure is counted: a file or an upload that fails `quarantine_after` runs in a
/// row is quarantined, a success clears it, and `forget` gives a file up for good.
@Suite struct QuarantineJournalTests {
    let volume = VolumeIdentity(
        key: "uuid:1234-ABCD", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat",
        device: nil)
    let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)
    let file = ScannedFile(path: CardPath("DCIM/broken.jpg"), size: 1000, mtime: 1)

    func openJournal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        return (dir, journal)
    }

    func staged(_ path: String, digest: UInt64) -> StagedFile {
        StagedFile(
            file: ScannedFile(path: CardPath(path), size: 1000, mtime: 1), fingerprint: Fingerprint(high: digest, low: digest),
            deduplicated: false, verified: false)
    }

    func record(_ journal: Journal, _ path: CardPath) async throws -> FileRecord {
        try #require(try await journal.files(ofVolume: volume.key)[path])
    }

    @Test func aFileThatFailsThreeRunsInARowIsQuarantinedAndAStagedCopyClearsIt() async throws {
        let (_, journal) = try await openJournal()
        let failure = StageOutcome.failed(file, StageFailure(kind: .vanished))
        for run in 1...2 {
            try await journal.record([failure], volumeKey: volume.key, quarantineAfter: 3)
            let found = try await record(journal, file.path)
            #expect(found.failures == run && !found.quarantined)
        }
        try await journal.record([failure], volumeKey: volume.key, quarantineAfter: 3)
        #expect(try await record(journal, file.path).quarantined)
        #expect(try await journal.quarantinedCount(ofVolume: volume.key) == 1)
        #expect(try await journal.quarantinedCount(ofVolume: "uuid:other") == 0)
        let listed = try await journal.quarantine()
        #expect(listed.files.map(\.cardPath) == [file.path])
        #expect(QuarantinedFileID.row(QuarantinedFileID.text(listed.files[0])) == listed.files[0].id)

        var copy = staged("DCIM/broken.jpg", digest: 9)
        copy.file = file
        try await journal.record([.staged(copy)], volumeKey: volume.key, quarantineAfter: 3)
        let cleared = try await record(journal, file.path)
        #expect(cleared.failures == 0 && !cleared.quarantined && cleared.state == .staged)
    }

    @Test func anUploadIsQuarantinedAfterItsFailedRunsAndCompletionClearsIt() async throws {
        let (_, journal) = try await openJournal()
        let copy = staged("a.jpg", digest: 4)
        try await journal.record([.staged(copy)], volumeKey: volume.key)
        let claim = UploadClaim(
            path: copy.file.path, fingerprint: copy.fingerprint, size: copy.file.size, target: target, key: "k/a.jpg",
            headers: [], partSize: nil)
        guard case .planned(let upload) = try await journal.claim([claim], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload")
            return
        }
        #expect(try await journal.noteFailure("HTTP 500", ofUpload: upload.id, quarantineAfter: 2) == false)
        #expect(try await journal.noteFailure("HTTP 500", ofUpload: upload.id, quarantineAfter: 2) == true)
        let summary = try await journal.quarantine(ofVolume: volume.key)
        #expect(summary.uploads.map(\.id) == [upload.id])
        #expect(summary.uploads.first?.failures == 2)
        #expect(summary.stagedBytes == 1000, "the copy only the quarantined upload holds")
        #expect(try await journal.totals().quarantinedUploads.count == 1)

        try await journal.completeUpload(id: upload.id, object: nil)
        #expect(try await journal.quarantine().count == 0)
        #expect(try await journal.quarantinedCount(ofVolume: volume.key) == 0)
    }

    @Test func aFileThatCanNeverBeAnObjectIsQuarantinedAtOnceAndPlanningItClearsIt() async throws {
        let (_, journal) = try await openJournal()
        let copy = staged("very/long/name.jpg", digest: 5)
        try await journal.record([.staged(copy)], volumeKey: volume.key)
        try await journal.noteNotUploadable(path: copy.file.path, volumeKey: volume.key, reason: "key too long")
        let found = try await record(journal, copy.file.path)
        #expect(found.quarantined && found.lastError == "key too long")

        let claim = UploadClaim(
            path: copy.file.path, fingerprint: copy.fingerprint, size: copy.file.size, target: target, key: "short",
            headers: [], partSize: nil)
        _ = try await journal.claim([claim], volumeKey: volume.key)
        let planned = try await record(journal, copy.file.path)
        #expect(!planned.quarantined && planned.lastError == nil && planned.failures == 0)
    }

    @Test func forgettingAFileFreesItsCopyUnlessAnotherFileStillNeedsIt() async throws {
        let (_, journal) = try await openJournal()
        let alone = staged("alone.jpg", digest: 1)
        let shared = staged("shared.jpg", digest: 2)
        let twin = staged("twin.jpg", digest: 2)
        try await journal.record([.staged(alone), .staged(shared), .staged(twin)], volumeKey: volume.key)
        let files = try await journal.files(ofVolume: volume.key)

        let aloneRow = try #require(files[alone.file.path]?.id)
        let sharedRow = try #require(files[shared.file.path]?.id)
        let first = try #require(try await journal.forgetFile(row: aloneRow, note: "gone"))
        #expect(first.1 == alone.fingerprint, "nothing else needs the copy")
        #expect(try await record(journal, alone.file.path).state == .forgotten)

        let second = try #require(try await journal.forgetFile(row: sharedRow, note: "gone"))
        #expect(second.1 == nil, "twin.jpg still waits for that content")
        #expect(try await journal.forgetFile(row: 9999, note: "gone") == nil)
    }

    @Test func aForgottenFileIsKnownToTheNextScanWhileItIsUnchanged() async throws {
        let (_, journal) = try await openJournal()
        let failure = StageOutcome.failed(file, StageFailure(kind: .vanished))
        try await journal.record([failure], volumeKey: volume.key, quarantineAfter: 1)
        let row = try #require(try await record(journal, file.path).id)
        _ = try await journal.forgetFile(row: row, note: "given up")
        let known = KnownFiles.journal(journal, volumeKey: volume.key)
        #expect(try known.toStage([file], comparingInodes: true) == [false])
        var touched = file
        touched.mtime = 2
        #expect(try known.toStage([touched], comparingInodes: true) == [true], "a changed file is new again")
    }
}
