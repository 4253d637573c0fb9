import Foundation
import Testing

@testable import IngestKit

/// The journal's side of what proves an object: its identity recorded with its completion,
/// learned (and marked so) only for an older journal's uploads, objects proven foreign, and a
/// card's files judged against the destination of the run.
@Suite struct ObjectIdentityJournalTests {
    let volume = VolumeIdentity(
        key: "uuid:5150-CAFE", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat",
        device: nil)
    let media = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "media", region: "us-east-1", addressing: .path)
    let media2 = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "media2", region: "us-east-1", addressing: .path)
    let path = CardPath("DCIM/IMG_0001.JPG")

    /// A journal with one file staged and planned for `target`, and its upload.
    func planned(to target: S3Destination) async throws -> (TemporaryDirectory, Journal, UploadRecord) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        let staged = StagedFile(
            file: ScannedFile(path: path, size: 6, mtime: 1), fingerprint: Fingerprint(high: 1, low: 2), deduplicated: false,
            verified: false)
        try await journal.record([.staged(staged)], volumeKey: volume.key)
        let record = try await claim(staged, to: target, in: journal)
        return (dir, journal, record)
    }

    func claim(_ staged: StagedFile, to target: S3Destination, in journal: Journal) async throws -> UploadRecord {
        let claim = UploadClaim(
            path: staged.file.path, fingerprint: staged.fingerprint, size: 6, target: target, key: "card/DCIM/IMG_0001.JPG",
            headers: [], partSize: nil)
        switch try await journal.claim([claim], volumeKey: volume.key).first {
        case .planned(let record), .upload(let record), .alreadyInBucket(let record): return record
        default: throw CocoaError(.featureUnsupported)
        }
    }

    @Test func theCompletionRecordsTheObjectsIdentityAndARestartForgetsIt() async throws {
        let (_, journal, record) = try await planned(to: media)
        let object = StoredObject(etag: "\"e1\"", size: 6, checksum: "c1==", versionID: "v1")
        try await journal.completeUpload(id: record.id, object: object)
        var stored = try #require(try await journal.upload(id: record.id)).0
        #expect(stored.recordedObject == object)
        #expect(!stored.etagLearned)
        let onRecord = try await journal.objectsOnRecord(ofVolume: volume.key)
        #expect(onRecord.map(\.etag) == ["\"e1\""])

        stored = try #require(try await journal.restartUpload(id: record.id, key: record.key))
        #expect(stored.recordedObject == nil && stored.objectChecksum == nil && stored.versionID == nil)
    }

    @Test func anETagIsLearnedOnlyWhereTheCompletionRecordedNoneAndIsMarkedSo() async throws {
        let (_, journal, record) = try await planned(to: media)
        try await journal.completeUpload(id: record.id, object: nil)
        try await journal.learnObjectETag("\"learned\"", ofUpload: record.id)
        var stored = try #require(try await journal.upload(id: record.id)).0
        #expect(stored.etag == "\"learned\"" && stored.etagLearned)

        // A recorded ETag is never replaced by what a later look finds.
        try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"proven\"", size: 6))
        try await journal.learnObjectETag("\"other\"", ofUpload: record.id)
        stored = try #require(try await journal.upload(id: record.id)).0
        #expect(stored.etag == "\"proven\"" && !stored.etagLearned)
    }

    @Test func anObjectProvenForeignIsKnownByItsKeyETagAndDestination() async throws {
        let (_, journal, record) = try await planned(to: media)
        try await journal.noteForeignObject(key: record.key, etag: "\"f00\"", target: media)
        #expect(try await journal.isForeign(key: record.key, etag: "f00", target: media), "quotes or none")
        #expect(try await !journal.isForeign(key: record.key, etag: "\"f01\"", target: media))
        #expect(try await !journal.isForeign(key: record.key, etag: "\"f00\"", target: media2))
        #expect(try await !journal.isForeign(key: "other", etag: "\"f00\"", target: media))
    }

    @Test func aFileIngestedToAnotherBucketIsStagedAgainForTheRunsBucketAndListedByItsHistoryThere() async throws {
        let (_, journal, record) = try await planned(to: media)
        try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"e\"", size: 6))
        let file = ScannedFile(path: path, size: 6, mtime: 1)
        #expect(try KnownFiles.journal(journal, volumeKey: volume.key, target: media).toStage([file], comparingInodes: false) == [false])
        #expect(try KnownFiles.journal(journal, volumeKey: volume.key, target: media2).toStage([file], comparingInodes: false) == [true])
        #expect(try KnownFiles.journal(journal, volumeKey: volume.key).toStage([file], comparingInodes: false) == [false], "scan only")

        // Staged again and claimed for media2: a new upload of its own, and back to media the old one.
        let staged = StagedFile(file: file, fingerprint: Fingerprint(high: 1, low: 2), deduplicated: false, verified: false)
        try await journal.record([.staged(staged)], volumeKey: volume.key)
        let second = try await claim(staged, to: media2, in: journal)
        #expect(second.id != record.id && second.bucket == "media2" && second.phase == .created)
        #expect(try KnownFiles.journal(journal, volumeKey: volume.key, target: media2).toStage([file], comparingInodes: false) == [false])
        try await journal.record([.staged(staged)], volumeKey: volume.key)
        let back = try await claim(staged, to: media, in: journal)
        #expect(back.id == record.id && back.phase == .completed, "its object in media is known, to be looked at")
    }

    @Test func aCardNotHereWithFilesOnlyItCanBringIsNamedUntilItComesBack() async throws {
        let (_, journal, record) = try await planned(to: media)
        let now = Date()
        #expect(try await journal.cardsAwaitingThemselves(seenSince: now.addingTimeInterval(-86_400), except: []).isEmpty)

        // Its object vanished and its staged copy is gone: the file waits for the card.
        try await journal.restage(uploadID: record.id, reason: "card/DCIM/IMG_0001.JPG: missing from the bucket (not listed)")
        let awaiting = try await journal.cardsAwaitingThemselves(seenSince: now.addingTimeInterval(-86_400), except: [])
        #expect(awaiting.map(\.volumeKey) == [volume.key])
        #expect(awaiting.first?.files == 1 && awaiting.first?.firstPath == path)
        #expect(awaiting.first?.reason?.contains("missing from the bucket") == true)
        #expect(awaiting.first?.command == "ingest /media/card")
        #expect(try await journal.cardsAwaitingThemselves(seenSince: now.addingTimeInterval(-86_400), except: [volume.key]).isEmpty)
        #expect(try await journal.cardsAwaitingThemselves(seenSince: now.addingTimeInterval(60), except: []).isEmpty, "outside the window")
    }
}
