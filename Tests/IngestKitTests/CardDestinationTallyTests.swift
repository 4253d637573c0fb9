import Foundation
import GRDB
import Testing

@testable import IngestKit

/// A card's verdict per destination: a card ingested into one bucket and then another keeps
/// both uploads of each file (`formerUpload`, journal v17), and each bucket's tally counts only
/// its own, so a loss in one never shows as safe through the other.
@Suite struct CardDestinationTallyTests {
    let volume = VolumeIdentity(
        key: "uuid:5150-CAFE", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat",
        device: nil)
    let media = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "media", region: "us-east-1", addressing: .path)
    let media2 = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "media2", region: "us-east-1", addressing: .path)
    let other = S3Destination(endpoint: "http://127.0.0.1:9333", bucket: "media", region: "us-east-1", addressing: .path)
    let paths = [CardPath("DCIM/IMG_0001.JPG"), CardPath("DCIM/IMG_0002.JPG")]

    func staged(_ index: Int, size: Int64 = 6, mtime: Int64 = 1, fingerprint: UInt64? = nil) -> StagedFile {
        StagedFile(
            file: ScannedFile(path: paths[index], size: size, mtime: mtime),
            fingerprint: Fingerprint(high: 1, low: fingerprint ?? UInt64(index + 1)), deduplicated: false, verified: false)
    }

    /// Stages and claims `files` for `target`, completing their uploads unless `completing` is false.
    @discardableResult
    func ingest(_ files: [StagedFile], into target: S3Destination, journal: Journal, completing: Bool = true) async throws
        -> [UploadRecord]
    {
        try await journal.record(files.map { .staged($0) }, volumeKey: volume.key)
        let claims = files.map { file in
            UploadClaim(
                path: file.file.path, fingerprint: file.fingerprint, size: file.file.size, target: target,
                key: "card/" + file.file.path.display, headers: [], partSize: nil)
        }
        var records: [UploadRecord] = []
        for result in try await journal.claim(claims, volumeKey: volume.key) {
            switch result {
            case .planned(let record), .upload(let record), .alreadyInBucket(let record): records.append(record)
            case .copy(let record, _): records.append(record)
            }
        }
        if completing {
            for record in records where record.phase != .completed {
                try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"\(record.id)\"", size: record.size))
            }
        }
        return records
    }

    func journal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        return (dir, journal)
    }

    func tallies(_ journal: Journal) async throws -> [String: CardStanding] {
        let tallies = try await journal.cardTallies(volumeKey: volume.key)
        return Dictionary(uniqueKeysWithValues: tallies.map { ("\($0.destination?.endpoint ?? "-") \($0.destination?.bucket ?? "-")", CardStanding(tally: $0)) })
    }

    @Test func aCardIngestedIntoTwoBucketsHasAVerdictInEachFromItsOwnUploadsThere() async throws {
        let (_, journal) = try await journal()
        let files = [staged(0), staged(1)]
        try await ingest(files, into: media, journal: journal)
        // Into media2, one file planned, not sent yet: media2 is not safe, media still is.
        try await ingest([files[0]], into: media2, journal: journal, completing: false)
        var standings = try await tallies(journal)
        #expect(Set(standings.keys) == ["http://127.0.0.1:8333 media", "http://127.0.0.1:8333 media2"])
        #expect(standings["http://127.0.0.1:8333 media"]?.safeToErase == true)
        let waiting = try #require(standings["http://127.0.0.1:8333 media2"])
        #expect(!waiting.safeToErase)
        #expect(waiting.tally.notUploaded == 2, "one file's upload there is pending, the other was never planned there")
        #expect(waiting.tally.files == 2)

        try await ingest(files, into: media2, journal: journal)
        standings = try await tallies(journal)
        #expect(standings.values.allSatisfy { $0.safeToErase }, "\(standings.mapValues(\.reasons))")
        #expect(try await journal.cardTallies(volumeKey: volume.key).first?.destination?.bucket == "media2", "where its files link")

        // Each bucket's objects are on record for the bucket check.
        let onRecord = try await journal.objectsOnRecord(ofVolume: volume.key)
        #expect(Set(onRecord.map(\.target.bucket)) == ["media", "media2"])
        #expect(onRecord.count == 4)
    }

    @Test func anObjectLostInTheNewBucketLeavesTheOldOneSafeAndTheNewOneNot() async throws {
        let (_, journal) = try await journal()
        let files = [staged(0), staged(1)]
        try await ingest(files, into: media, journal: journal)
        let second = try await ingest(files, into: media2, journal: journal)

        try await journal.restage(uploadID: second[0].id, reason: "card/DCIM/IMG_0001.JPG: missing from the bucket", objectLost: true)
        let standings = try await tallies(journal)
        #expect(standings["http://127.0.0.1:8333 media"]?.safeToErase == true)
        let lost = try #require(standings["http://127.0.0.1:8333 media2"])
        #expect(!lost.safeToErase)
        #expect(lost.tally.objectsLost == 1)
        #expect(lost.reasons.first?.contains("missing from the bucket") == true, "\(lost.reasons)")
        #expect(try await journal.judgeCard(volume.key, in: media2)?.safeToErase == false)
        #expect(try await journal.judgeCard(volume.key, in: media)?.safeToErase == true)

        // Ingested into media2 again: its object there is its own again.
        try await ingest([files[0]], into: media2, journal: journal)
        #expect(try await tallies(journal).values.allSatisfy { $0.safeToErase })
    }

    @Test func anObjectLostInTheOldBucketLeavesTheNewOneSafeAndTheOldOneNot() async throws {
        let (_, journal) = try await journal()
        let files = [staged(0), staged(1)]
        let first = try await ingest(files, into: media, journal: journal)
        try await ingest(files, into: other, journal: journal)

        // The bucket check of the old destination finds its object changed, the staged copy gone.
        try await journal.unlist(paths[1], ofVolume: volume.key, upload: first[1].id)
        try await journal.restage(uploadID: first[1].id, reason: "card/DCIM/IMG_0002.JPG: changed in the bucket", objectLost: true)
        let standings = try await tallies(journal)
        #expect(standings["http://127.0.0.1:9333 media"]?.safeToErase == true, "\(standings.mapValues(\.reasons))")
        let old = try #require(standings["http://127.0.0.1:8333 media"])
        #expect(!old.safeToErase && old.tally.objectsLost == 1)
        #expect(try await journal.judgeCard(volume.key, in: other)?.safeToErase == true)

        // A restart of an old destination's upload (its staged copy still there) holds that destination back only.
        _ = try await journal.restartUpload(id: first[0].id, key: first[0].key)
        let restarted = try await tallies(journal)
        #expect(restarted["http://127.0.0.1:8333 media"]?.tally.notUploaded == 1)
        #expect(restarted["http://127.0.0.1:9333 media"]?.safeToErase == true)
    }

    @Test func aFileChangedOnTheCardIsHeldByNoBucketThatHasItsEarlierContent() async throws {
        let (_, journal) = try await journal()
        try await ingest([staged(0), staged(1)], into: media, journal: journal)
        try await ingest([staged(0), staged(1)], into: media2, journal: journal)
        // The first file changed and was ingested again into media2 only.
        try await ingest([staged(0, size: 7, mtime: 2, fingerprint: 9)], into: media2, journal: journal)
        let standings = try await tallies(journal)
        #expect(standings["http://127.0.0.1:8333 media2"]?.safeToErase == true)
        let old = try #require(standings["http://127.0.0.1:8333 media"])
        #expect(!old.safeToErase && old.tally.notUploaded == 1, "its earlier content in media is not the card's file")
    }

    /// A journal from before v17 kept only the upload each file links (media2 here); the one
    /// its file brought to media before is found by its source path and content, and media's
    /// verdict is shown again.
    @Test func anOlderJournalsEarlierDestinationIsFoundByTheUploadItsFileBroughtThere() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        do {
            let older = try DatabaseQueue(path: path)
            try Journal.migrator.migrate(older, upTo: "v16: objects read back")
            try await older.write { [volume, paths] db in
                try VolumeRecord(volume, seen: Date()).insert(db)
                let now = JournalDate(Date())
                try db.execute(sql: "INSERT INTO stagedObject (fingerprint, size, stagedAt) VALUES ('f1', 6, ?)", arguments: [now])
                for (id, bucket) in [("up-media", "media"), ("up-media2", "media2")] {
                    try db.execute(
                        sql: """
                            INSERT INTO upload (id, endpoint, bucket, region, addressing, key, fingerprint, size, checksum, phase,
                              restartCount, headers, volumeKey, sourcePath, etag, createdAt, updatedAt, completedAt)
                            VALUES (?, 'http://127.0.0.1:8333', ?, 'us-east-1', 'path', 'card/IMG_0001.JPG', 'f1', 6, 'crc32c',
                              'completed', 0, '[]', ?, ?, '"e"', ?, ?, ?)
                            """, arguments: [id, bucket, volume.key, Data(paths[0].bytes), now, now, now])
                }
                try db.execute(
                    sql: """
                        INSERT INTO file (volumeKey, path, size, mtime, fingerprint, state, updatedAt, uploadID)
                        VALUES (?, ?, 6, 1, 'f1', 'uploaded', ?, 'up-media2')
                        """, arguments: [volume.key, Data(paths[0].bytes), now])
            }
        }
        let journal = try Journal(path: path)
        let standings = try await tallies(journal)
        #expect(Set(standings.keys) == ["http://127.0.0.1:8333 media", "http://127.0.0.1:8333 media2"])
        #expect(standings.values.allSatisfy { $0.safeToErase }, "\(standings.mapValues(\.reasons))")
        #expect(try await journal.objectsOnRecord(ofVolume: volume.key).map(\.uploadID).sorted() == ["up-media", "up-media2"])
    }

    @Test func aCardNeverSentToADestinationIsNotSafeThere() async throws {
        let (_, journal) = try await journal()
        try await ingest([staged(0)], into: media, journal: journal)
        let elsewhere = try #require(try await journal.judgeCard(volume.key, in: media2))
        #expect(!elsewhere.safeToErase && elsewhere.tally.notUploaded == 1)
        #expect(try await journal.cardTallies(volumeKey: volume.key).count == 1, "status shows where it went, not every bucket")
    }
}
