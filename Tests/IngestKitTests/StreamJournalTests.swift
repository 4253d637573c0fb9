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

/// A resume keeps a journalled part only when its digest is the staged copy's for its range.
@Suite struct ResumedPartsTests {
    /// A machine resumed from three journalled parts of 8 MiB, part 2 sent from other bytes.
    static func resumed() throws -> UploadStateMachine {
        let plan = try PartPlan.recorded(fileSize: 24 << 20, partSize: 8 << 20)
        let parts = [1, 2, 3].map { number in
            UploadStateMachine.AcknowledgedPart(
                number: number, etag: "e\(number)", size: 8 << 20,
                digest: PartDigest(crc32c: number == 2 ? 99 : UInt32(11 * number)).journalText)
        }
        return UploadStateMachine(resuming: .init(
            logicalUploadID: "u", file: "/staging/f", fingerprint: Fingerprint(high: 1, low: 2), plan: plan, phase: .uploading,
            uploadID: "U1", parts: parts, restartCount: 0, failure: nil))
    }

    @Test func aJournalledPartSentFromOtherBytesThanTheStagedCopyIsSentAgain() throws {
        var machine = try Self.resumed()
        #expect(machine.start(.resumed) == [.checkStagedCopy])
        let actions = machine.stagedCopyChecked(PartChecksums(partSize: 8 << 20, crc32c: [11, 22, 33]))
        #expect(actions == [.listParts(uploadID: "U1")])
        #expect(machine.acknowledgedParts.map(\.number) == [1, 3])
    }

    @Test func withNoChecksumsToCompareWithEveryJournalledPartIsKept() throws {
        var machine = try Self.resumed()
        _ = machine.start(.resumed)
        _ = machine.stagedCopyChecked(nil)
        #expect(machine.acknowledgedParts.map(\.number) == [1, 2, 3], "nothing to compare with: kept")
    }
}
