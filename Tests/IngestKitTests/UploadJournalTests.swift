import Foundation
import GRDB
import Synchronization
import Testing

@testable import IngestKit

/// The journal's side of uploads: one upload per content and bucket, parts committed as a
/// difference, completion reaching every file of that content.
@Suite struct UploadJournalTests {
    let volume = VolumeIdentity(
        key: "uuid:1234-ABCD", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat",
        device: nil)
    let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)

    func stage(_ journal: Journal, _ path: String, digest: UInt64) async throws -> StagedFile {
        let staged = StagedFile(
            file: ScannedFile(path: CardPath(path), size: 40 << 20, mtime: 1),
            fingerprint: Fingerprint(high: digest, low: digest), deduplicated: false, verified: false)
        try await journal.record([.staged(staged)], volumeKey: volume.key)
        return staged
    }

    func claim(_ staged: StagedFile, target: S3Destination? = nil) -> UploadClaim {
        UploadClaim(
            path: staged.file.path, fingerprint: staged.fingerprint, size: staged.file.size, target: target ?? self.target,
            key: "station/\(staged.file.path.display)", headers: [SigV4Header("x-amz-meta-xxh128", staged.fingerprint.hex)],
            partSize: 8 << 20)
    }

    /// `count` files, `DCIM/1.jpg`…, each staged with a content of its own and planned.
    func plannedUploads(_ journal: Journal, count: Int) async throws -> [UploadRecord] {
        var records: [UploadRecord] = []
        for n in 1...count {
            let staged = try await stage(journal, "DCIM/\(n).jpg", digest: UInt64(n))
            guard case .planned(let record) = try await journal.claim([claim(staged)], volumeKey: volume.key).first else {
                throw JournalError(path: "test", operation: .write, reason: "no upload planned for \(n)")
            }
            records.append(record)
        }
        return records
    }

    func openJournal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        return (dir, journal)
    }

    @Test func twoFilesWithOneContentGetOneUploadAndOneCopyEachFileUploadedWhenItsOwnObjectIs() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "DCIM/a.jpg", digest: 7)
        let b = try await stage(journal, "BACKUP/a-copy.jpg", digest: 7)
        let results = try await journal.claim([claim(a), claim(b)], volumeKey: volume.key)
        guard case .planned(let first) = results[0], case let .copy(second, of: source) = results[1] else {
            Issue.record("expected one upload planned and one copy of it, got \(results)")
            return
        }
        #expect(source.id == first.id && second.id != first.id)
        #expect(first.key == "station/DCIM/a.jpg" && !first.isCopy)
        #expect(second.key == "station/BACKUP/a-copy.jpg" && second.copyKey == second.key && second.fingerprint == first.fingerprint)
        #expect(first.requestHeaders == [SigV4Header("x-amz-meta-xxh128", a.fingerprint.hex)])
        #expect(try await journal.pendingUploads().map(\.id) == [first.id, second.id], "the content before its copy")

        try await journal.completeUpload(id: first.id, object: StoredObject(etag: "\"abc-5\"", size: 1))
        var files = try await journal.files(ofVolume: volume.key)
        #expect(files[a.file.path]?.state == .uploaded && files[b.file.path]?.state == .staged)
        try await journal.completeUpload(id: second.id, object: StoredObject(etag: "\"abc-5\"", size: 1))
        files = try await journal.files(ofVolume: volume.key)
        #expect(files.values.map(\.state) == [.uploaded, .uploaded])
        #expect(try await journal.pendingUploads().isEmpty)
    }

    /// A file that changed on the card after its upload was planned is no longer that
    /// upload's: when the old content's upload completes, the file is not counted as
    /// uploaded, whether reading its new content failed (it stays pending) or the new content
    /// was staged without an upload yet (`--no-upload`: the next run plans it).
    @Test func aFileThatChangedAfterItsUploadWasPlannedIsNotCountedUploadedWhenThatUploadCompletes() async throws {
        for newContentStaged in [false, true] {
            let (_, journal) = try await openJournal()
            let before = try await stage(journal, "LOGS/run.log", digest: 1)
            guard case .planned(let old) = try await journal.claim([claim(before)], volumeKey: volume.key).first else {
                Issue.record("no upload planned")
                return
            }
            let grown = ScannedFile(path: CardPath("LOGS/run.log"), size: 41 << 20, mtime: 2)
            let outcome: StageOutcome = newContentStaged
                ? .staged(StagedFile(file: grown, fingerprint: Fingerprint(high: 2, low: 2), deduplicated: false, verified: false))
                : .failed(grown, StageFailure(kind: .changedWhileCopying))
            try await journal.record([outcome], volumeKey: volume.key)

            try await journal.completeUpload(id: old.id, object: nil)

            let file = try #require(try await journal.files(ofVolume: volume.key)[CardPath("LOGS/run.log")])
            #expect(file.state == (newContentStaged ? .staged : .pending), "new content staged: \(newContentStaged)")
            #expect(file.uploadID == nil, "new content staged: \(newContentStaged)")
            #expect(file.size == 41 << 20)
            if newContentStaged {
                let unplanned = try await journal.stagedFilesWithoutUpload(ofVolume: volume.key)
                #expect(unplanned.map(\.cardPath) == [CardPath("LOGS/run.log")])
            }
        }
    }

    @Test func theJournalNamesItsDestinationsAndTheServerIdsOfItsUnfinishedUploads() async throws {
        let (_, journal) = try await openJournal()
        let elsewhere = S3Destination(endpoint: "https://s3.example.net", bucket: "archive", region: "eu-west-1", addressing: .virtualHost)
        let a = try await stage(journal, "a.jpg", digest: 1)
        let b = try await stage(journal, "b.jpg", digest: 2)
        let c = try await stage(journal, "c.jpg", digest: 3)
        let claimed = try await journal.claim([claim(a), claim(b), claim(c, target: elsewhere)], volumeKey: volume.key)
        let records = claimed.compactMap { result -> UploadRecord? in
            if case .planned(let record) = result { return record }
            return nil
        }
        try #require(records.count == 3)
        #expect(try await journal.uploadTargets() == [target, elsewhere])

        func started(_ record: UploadRecord, serverID: String) async throws {
            let plan = try PartPlan.plan(fileSize: record.size, preferredPartSize: 8 << 20)
            let snapshot = UploadStateMachine.Snapshot(
                logicalUploadID: record.id, file: "/staging/\(record.fingerprint)", fingerprint: record.contentFingerprint!,
                plan: plan, phase: .initiated, uploadID: serverID, parts: [], restartCount: 0, failure: nil)
            try await journal.persist(snapshot, added: [], removed: [], lastError: nil)
        }
        try await started(records[0], serverID: "server-a")
        try await started(records[1], serverID: "server-b")
        try await started(records[2], serverID: "server-c")
        #expect(try await journal.multipartUploadIDs(endpoint: target.endpoint, bucket: target.bucket) == ["server-a", "server-b"])
        try await journal.completeUpload(id: records[0].id, object: StoredObject(etag: "\"e-1\"", size: 1))
        #expect(
            try await journal.multipartUploadIDs(endpoint: target.endpoint, bucket: target.bucket) == ["server-b"],
            "a completed upload forgets its server id")
        #expect(try await journal.multipartUploadIDs(endpoint: elsewhere.endpoint, bucket: elsewhere.bucket) == ["server-c"])
    }

    /// An upload is found by what it uploads (endpoint, bucket, fingerprint), never by its
    /// id: one an older version planned under a 12-digit id is joined, not planned twice.
    @Test func anUploadPlannedUnderAnOlderIdIsJoinedByItsContent() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "DCIM/a.jpg", digest: 11)
        var older = try await plannedElsewhere(claim(a))
        older.id = "0123456789ab"
        try await journal.database.write { [older] db in try older.insert(db) }

        guard case .upload(let joined) = try await journal.claim([claim(a)], volumeKey: volume.key)[0] else {
            Issue.record("expected the older upload joined")
            return
        }
        #expect(joined.id == older.id)
        #expect(try await journal.pendingUploads().map(\.id) == [older.id])
        try await journal.completeUpload(id: older.id, object: nil)
        #expect(try await journal.files(ofVolume: volume.key)[CardPath("DCIM/a.jpg")]?.state == .uploaded)
    }

    /// Ids are 60 bits of a hash, so two contents may get one. The second takes another id
    /// of its own: no file ever rides on, or completes with, another content's upload.
    @Test func aContentWhoseIdIsTakenByAnotherContentGetsAnotherIdAndAnUploadOfItsOwn() async throws {
        let (_, journal) = try await openJournal()
        let b = try await stage(journal, "DCIM/b.jpg", digest: 12)
        let taken = UploadRecord.logicalID(target: target, fingerprint: b.fingerprint)
        var other = try await plannedElsewhere(claim(StagedFile(
            file: ScannedFile(path: CardPath("DCIM/other.jpg"), size: 1, mtime: 1),
            fingerprint: Fingerprint(high: 99, low: 99), deduplicated: false, verified: false)))
        other.id = taken
        try await journal.database.write { [other] db in try other.insert(db) }

        guard case .planned(let record) = try await journal.claim([claim(b)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload of b's own")
            return
        }
        #expect(record.id == UploadRecord.logicalID(target: target, fingerprint: b.fingerprint, attempt: 1))
        #expect(record.id.count == 15 && taken.count == 15)
        #expect(record.fingerprint == b.fingerprint.hex)
        #expect(try await journal.upload(id: taken)?.0.fingerprint == other.fingerprint, "the other content's upload is untouched")
        try await journal.completeUpload(id: record.id, object: nil)
        #expect(try await journal.files(ofVolume: volume.key)[CardPath("DCIM/b.jpg")]?.state == .uploaded)
        #expect(try await journal.upload(id: taken)?.0.phase == .created)
    }

    /// Version 9 rebuilt the upload table around one index by content. A journal written
    /// before keeps every upload, each one's place in the queue, its parts and the files
    /// riding on it, and finds an upload by content through the new index.
    @Test func aJournalFromBeforeTheIndexByContentKeepsItsUploadsTheirQueueOrderPartsAndFiles() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        var records: [UploadRecord] = []
        for n in 1...3 {
            records.append(try await plannedElsewhere(claim(StagedFile(
                file: ScannedFile(path: CardPath("DCIM/\(n).jpg"), size: 40 << 20, mtime: 1),
                fingerprint: Fingerprint(high: UInt64(20 + n), low: UInt64(20 + n)), deduplicated: false, verified: false))))
        }
        do {
            let older = try DatabaseQueue(path: path)
            try Journal.migrator.migrate(older, upTo: "v8: the journal as the upload queue")
            try await older.write { [records, volume] db in
                try VolumeRecord(volume, seen: Date()).insert(db)
                for record in records {
                    // The columns of version 8: none for copies, nor the object's identity, yet.
                    let later: Set<String> = ["copyKey", "objectChecksum", "versionID", "etagLearned"]
                    let values = try record.databaseDictionary.filter { !later.contains($0.key) }
                    try db.execute(
                        sql: "INSERT INTO upload (\(values.keys.map { "\"\($0)\"" }.joined(separator: ", "))) VALUES "
                            + "(\(values.keys.map { _ in "?" }.joined(separator: ", ")))",
                        arguments: StatementArguments(Array(values.values)))
                }
                try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [records[0].id])  // a gap in the queue
                try db.execute(
                    sql: "INSERT INTO uploadPart (upload, number, etag, size, digest) VALUES (?, 1, 'e1', 8388608, 'd1')",
                    arguments: [records[2].id])
                try db.execute(
                    sql: """
                        INSERT INTO file (volumeKey, path, size, mtime, state, updatedAt, uploadID)
                        VALUES (?, ?, 41943040, 1, 'staged', ?, ?)
                        """, arguments: [volume.key, Data("DCIM/3.jpg".utf8), JournalDate(Date()), records[2].id])
            }
            try older.close()
        }

        let journal = try Journal(path: path)
        let page = try await journal.pendingUploadPage(ofVolume: volume.key, after: 0, limit: 10)
        #expect(page.map(\.position) == [2, 3])
        #expect(page.map(\.record.id) == [records[1].id, records[2].id])
        #expect(try await journal.upload(id: records[2].id)?.1.map(\.number) == [1])
        let (indexes, dangling) = try journal.database.read { db in
            (try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'upload' ORDER BY name"),
             try Row.fetchAll(db, sql: "PRAGMA foreign_key_check"))
        }
        #expect(indexes == [
            "sqlite_autoindex_upload_1", "upload_by_content", "upload_by_phase_completion", "upload_pending_by_volume",
            "upload_quarantined",
        ])
        #expect(dangling.isEmpty)

        let again = try await stage(journal, "BACKUP/2.jpg", digest: 22)
        guard case let .copy(_, of: source) = try await journal.claim([claim(again)], volumeKey: volume.key)[0] else {
            Issue.record("expected a copy of that content's upload")
            return
        }
        #expect(source.id == records[1].id)
        try await journal.completeUpload(id: records[2].id, object: nil)
        #expect(try await journal.files(ofVolume: volume.key)[CardPath("DCIM/3.jpg")]?.state == .uploaded)
        #expect(try await journal.upload(id: records[2].id)?.1.isEmpty == true)
    }

    /// The upload `claim` plans in a journal of its own: a record to insert by hand.
    func plannedElsewhere(_ claim: UploadClaim) async throws -> UploadRecord {
        let (_, scratch) = try await openJournal()
        _ = try await stage(scratch, claim.path.display, digest: claim.fingerprint.high)
        guard case .planned(let record) = try await scratch.claim([claim], volumeKey: volume.key)[0] else {
            throw JournalError(path: "scratch", operation: .write, reason: "no upload planned")
        }
        return record
    }

    @Test func aFileOfContentVerifiedInTheBucketGetsACopyOfItNotANewUpload() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "a.jpg", digest: 3)
        guard case .planned(let record) = try await journal.claim([claim(a)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload")
            return
        }
        try await journal.completeUpload(id: record.id, object: nil)

        let later = try await stage(journal, "b.jpg", digest: 3)
        let result = try await journal.claim([claim(later)], volumeKey: volume.key)
        let source = try #require(try await journal.upload(id: record.id)?.0)
        guard case let .copy(copy, of: of) = result.first, of == source, copy.isCopy else {
            Issue.record("expected a copy of the verified upload, got \(result)")
            return
        }
        #expect(try await journal.files(ofVolume: volume.key)[CardPath("b.jpg")]?.state == .staged)

        // Another bucket is another upload.
        let other = S3Destination(endpoint: target.endpoint, bucket: "archive", region: "us-east-1", addressing: .path)
        guard case .planned(let elsewhere) = try await journal.claim([claim(later, target: other)], volumeKey: volume.key)[0] else {
            Issue.record("expected a new upload to the other bucket")
            return
        }
        #expect(elsewhere.id != record.id)
    }

    @Test func partsAreCommittedAsADifferenceAndReadBackInOrder() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "clip.mp4", digest: 5)
        guard case .planned(let record) = try await journal.claim([claim(a)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload planned")
            return
        }
        let plan = PartPlan(fileSize: a.file.size, partSize: 8 << 20)
        func snapshot(_ parts: [UploadStateMachine.AcknowledgedPart], phase: UploadStateMachine.Phase) -> UploadStateMachine.Snapshot {
            .init(
                logicalUploadID: record.id, file: "/staging/x", fingerprint: a.fingerprint, plan: plan, phase: phase,
                uploadID: "U1", parts: parts, restartCount: 1, failure: nil)
        }
        let p1 = UploadStateMachine.AcknowledgedPart(number: 1, etag: "\"e1\"", size: 8 << 20, digest: "d1")
        let p3 = UploadStateMachine.AcknowledgedPart(number: 3, etag: "\"e3\"", size: 8 << 20, digest: "d3")
        try await journal.persist(snapshot([p1, p3], phase: .uploading), added: [p3, p1], removed: [], lastError: nil)
        try await journal.persist(snapshot([p3], phase: .uploading), added: [], removed: [1], lastError: "UploadPart 2: SlowDown")

        let (stored, parts) = try #require(try await journal.upload(id: record.id))
        #expect(stored.phase == .uploading)
        #expect(stored.uploadID == "U1")
        #expect(stored.restartCount == 1)
        #expect(stored.lastError == "UploadPart 2: SlowDown")
        #expect(parts.map(\.number) == [3])
        #expect(parts.first?.digest == "d3")
        #expect(try await journal.uploads(idPrefix: String(record.id.prefix(4))).map(\.id) == [record.id])

        try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"e-2\"", size: 1))
        let (completed, left) = try #require(try await journal.upload(id: record.id))
        #expect(completed.phase == .completed)
        #expect(left.isEmpty, "a completed upload's parts are forgotten")
    }

    /// What each upload's end asks of the journal (complete it, then decide its staged
    /// copy's fate) finds its rows by index: no statement scans a table, so the work per
    /// file stays the same however many files the journal holds. Checked with SQLite's own
    /// query plans of the statements the journal really ran.
    @Test func theJournalWritesAtAnUploadsEndScanNoTable() async throws {
        let (_, journal) = try await openJournal()
        let records = try await plannedUploads(journal, count: 40)
        try await journal.completeUpload(id: records[0].id, object: nil)
        let statements = Mutex<[String]>([])
        try await journal.database.write { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { statements.withLock { $0.append(statement.expandedSQL) } }
            }
        }
        let removable = try await journal.completeUpload(
            id: records[1].id, object: StoredObject(etag: "\"e\"", size: 1), releasingStagedCopy: true)
        #expect(removable == records[1].contentFingerprint)
        try await journal.noteStagedCopiesRemoved([try #require(removable)])
        try await journal.database.write { db in db.trace(options: .statement, nil) }

        let ran = statements.withLock { $0 }.filter { $0.range(of: #"^\s*(SELECT|UPDATE|DELETE|INSERT)"#, options: .regularExpression) != nil }
        #expect(ran.count >= 4)
        for sql in ran {
            let plan = try await journal.database.read { db in try String.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [], adapter: ColumnMapping(["detail": "detail"])) }
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(sql) → \(plan)")
        }
    }

    /// What a card's run asks of the journal besides its own pages, at its start (the pending
    /// uploads its files ride on: another card's upload of the same content, its own never
    /// started at another destination) and at its end (what of it is quarantined), is found
    /// from the pending or quarantined rows, never by reading every file the card has had and
    /// each one's upload (0.5 s a question for a card of 100,000 files, at every insertion
    /// and rescan). Checked with SQLite's query plans of the statements really run.
    @Test func aRunsQuestionsBesidesItsPagesReadThePendingAndQuarantinedRowsNotEveryFileOfTheCard() async throws {
        let (_, journal) = try await openJournal()
        let records = try await plannedUploads(journal, count: 30)
        for record in records.dropFirst(2) { try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"e\"", size: 1)) }
        let other = VolumeIdentity(
            key: "uuid:5678-EF01", rootPath: "/media/b", mountPoint: "/media/b", pathInFileSystem: "/", fsType: "ext4",
            device: nil)
        try await journal.noteVolume(other)
        let twin = StagedFile(
            file: ScannedFile(path: CardPath("DCIM/twin.jpg"), size: 40 << 20, mtime: 1),
            fingerprint: Fingerprint(high: 1, low: 1), deduplicated: false, verified: false)
        try await journal.record([.staged(twin)], volumeKey: other.key)
        _ = try await journal.claim([claim(twin)], volumeKey: other.key)
        try await journal.database.write { db in
            try db.execute(sql: "UPDATE upload SET quarantined = 1 WHERE id = ?", arguments: [records[1].id])
        }

        let statements = Mutex<[String]>([])
        try await journal.database.write { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { statements.withLock { $0.append(statement.expandedSQL) } }
            }
        }
        #expect(try await journal.pendingUploadsBesidesPages(ofVolume: other.key, target: target).map(\.id) == [records[0].id])
        #expect(try await journal.pendingUploadsBesidesPages(ofVolume: volume.key, target: target).isEmpty)
        let elsewhere = S3Destination(endpoint: target.endpoint, bucket: "other", region: target.region, addressing: .path)
        #expect(try await Set(journal.pendingUploadsBesidesPages(ofVolume: volume.key, target: elsewhere).map(\.id)) == Set(records.prefix(2).map(\.id)))
        #expect(try await journal.quarantinedCount(ofVolume: volume.key) == 1)
        #expect(try await journal.quarantinedCount(ofVolume: other.key) == 0)
        #expect(try await journal.quarantine(ofVolume: volume.key).uploads.map(\.id) == [records[1].id])
        try await journal.database.write { db in db.trace(options: .statement, nil) }

        let ran = statements.withLock { $0 }.filter { $0.hasPrefix("SELECT") }
        #expect(ran.count >= 7)
        for sql in ran {
            let plan = try await journal.database.read { db in try String.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [], adapter: ColumnMapping(["detail": "detail"])) }
            // The partial index of pending uploads holds none of the card's finished ones.
            #expect(
                !plan.contains { $0.hasSuffix("(volumeKey=?)") && !$0.contains("upload_pending_by_volume") },
                "every file of a card: \(sql) → \(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN file") || $0 == "SCAN upload" }, "\(sql) → \(plan)")
        }
    }

    /// ``UploadRecord`` is written and read column by column, by hand: every stored property
    /// is a column of the table, each written once, and a record with every field set comes
    /// back from the journal equal.
    @Test func anUploadRecordWithEveryFieldSetComesBackFromTheJournalAsItWent() async throws {
        let (_, journal) = try await openJournal()
        let staged = try await stage(journal, "DCIM/full.jpg", digest: 11)
        guard case .planned(var record) = try await journal.claim([claim(staged)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload planned")
            return
        }
        record.phase = .initiated
        record.uploadID = "server-upload-1"
        record.restartCount = 2
        record.sourcePath = Data([0x44, 0xFF, 0x2F, 0x00, 0x61])
        record.etag = "\"etag-3\""
        record.objectChecksum = "AAAAAA==-2"
        record.versionID = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo"
        record.etagLearned = true
        record.lastError = "a message"
        record.createdAt = Date(timeIntervalSince1970: 1_700_000_000.123)
        record.updatedAt = Date(timeIntervalSince1970: 1_700_000_100.456)
        record.completedAt = Date(timeIntervalSince1970: 1_700_000_200.789)
        record.failures = 3
        record.quarantined = true
        record.cardChecksums = Data([1, 2, 3, 4, 5, 6, 7, 8])
        let stored = record
        try await journal.database.write { db in try stored.update(db) }
        #expect(try await journal.upload(id: record.id)?.0 == record)

        let properties = Set(Mirror(reflecting: record).children.compactMap(\.label))
        #expect(Set(try record.databaseDictionary.keys) == properties)
        let columns = try await journal.database.read { db in try db.columns(in: "upload").map(\.name) }
        #expect(Set(columns) == properties)
    }

    /// Uploads that end at once are completed in shared transactions (``GroupCommit``):
    /// each caller still gets its own upload completed, its own files uploaded, and its own
    /// staged copy offered, and a copy another upload still waits for is offered to none.
    @Test func uploadsCompletedAtOnceEachCompleteTheirOwnFilesAndReleaseTheirOwnCopy() async throws {
        let (_, journal) = try await openJournal()
        let records = try await plannedUploads(journal, count: 48)
        // A second bucket's upload of content 1: its copy is not to go while that one waits.
        let elsewhere = S3Destination(endpoint: target.endpoint, bucket: "archive", region: "us-east-1", addressing: .path)
        let again = try await stage(journal, "copy/1.jpg", digest: 1)
        guard case .planned = try await journal.claim([claim(again, target: elsewhere)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload to the other bucket")
            return
        }
        let released = try await withThrowingTaskGroup(of: (String, Fingerprint?).self) { group in
            for record in records {
                group.addTask { (record.id, try await journal.completeUpload(id: record.id, object: nil, releasingStagedCopy: true)) }
            }
            var released: [String: Fingerprint?] = [:]
            for try await (id, fingerprint) in group { released[id] = fingerprint }
            return released
        }
        for record in records {
            let expected = record.fingerprint == again.fingerprint.hex ? nil : record.contentFingerprint
            #expect(released[record.id] == expected, "upload \(record.id)")
            #expect(try await journal.upload(id: record.id)?.0.phase == .completed)
        }
        let files = try await journal.files(ofVolume: volume.key)
        #expect(files.filter { $0.key.display.hasPrefix("DCIM/") }.values.allSatisfy { $0.state == .uploaded })
        #expect(files[CardPath("copy/1.jpg")]?.state == .staged)
    }

    @Test func aStagedCopyThatNoLongerMatchesSendsItsFilesBackToPending() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "a.jpg", digest: 9)
        guard case .planned(let record) = try await journal.claim([claim(a)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload planned")
            return
        }
        try await journal.restage(uploadID: record.id, reason: "staged copy damaged")
        let file = try #require(try await journal.files(ofVolume: volume.key)[a.file.path])
        #expect(file.state == .pending)
        #expect(file.uploadID == nil)
        #expect(file.lastError == "staged copy damaged")
        #expect(try await journal.upload(id: record.id) == nil)
    }

    @Test func onlyStagedCopiesOfVerifiedContentNoFileWaitsForAreOfferedForRemoval() async throws {
        let (_, journal) = try await openJournal()
        let done = try await stage(journal, "done.jpg", digest: 1)
        let waiting = try await stage(journal, "waiting.jpg", digest: 2)
        let results = try await journal.claim([claim(done), claim(waiting)], volumeKey: volume.key)
        guard case .planned(let finished) = results[0], case .planned(let unfinished) = results[1] else {
            Issue.record("expected two uploads planned, got \(results)")
            return
        }
        let released = try await journal.completeUpload(
            id: finished.id, object: nil, releasingStagedCopy: true, at: Date(timeIntervalSinceNow: -3600))
        #expect(released == done.fingerprint, "no file waits for it: it may go at once")

        #expect(try await journal.stagedCopiesToRemove(completedBefore: Date(timeIntervalSinceNow: -7200)).isEmpty,
                "retention keeps copies verified after the cutoff")
        let removable = try await journal.stagedCopiesToRemove(completedBefore: Date())
        #expect(removable == [done.fingerprint])
        try await journal.noteStagedCopiesRemoved(removable)
        #expect(try await journal.stagedCopiesToRemove(completedBefore: Date()).isEmpty)
        #expect(try await journal.completeUpload(id: unfinished.id, object: nil, releasingStagedCopy: false) == nil)
    }

    /// A card's run journals each batch of staged files with the uploads planned for them in
    /// one commit, and a failure anywhere in it leaves none of the batch behind: never a file
    /// recorded as staged with no upload.
    @Test func aBatchIsRecordedWithItsUploadsInOneCommitOrNotAtAll() async throws {
        let (_, journal) = try await openJournal()
        let staged = (1...3).map { n in
            StagedFile(
                file: ScannedFile(path: CardPath("DCIM/\(n).jpg"), size: 40 << 20, mtime: 1),
                fingerprint: Fingerprint(high: UInt64(n), low: 9), deduplicated: false, verified: false)
        }
        let statements = Mutex<[String]>([])
        try await journal.database.write { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { statements.withLock { $0.append(statement.sql) } }
            }
        }
        let results = try await journal.record(
            staged.map { .staged($0) }, claiming: staged.map { claim($0) }, volumeKey: volume.key)
        try await journal.database.write { db in db.trace(options: .statement, nil) }
        // The journal's own transactions (GRDB's, around the tracing, end in "TRANSACTION").
        #expect(statements.withLock { $0 }.filter { ["BEGIN IMMEDIATE", "COMMIT"].contains($0) } == ["BEGIN IMMEDIATE", "COMMIT"])
        let planned = results.compactMap { if case .planned(let record) = $0 { record } else { nil } }
        #expect(planned.map(\.contentFingerprint) == staged.map(\.fingerprint))
        let files = try await journal.files(ofVolume: volume.key)
        for (file, record) in zip(staged, planned) { #expect(files[file.file.path]?.uploadID == record.id) }
        #expect(try await journal.stagedFilesWithoutUpload(ofVolume: volume.key).isEmpty)

        // The next batch's upload is refused inside the transaction: its files stay unrecorded.
        try await journal.database.write { db in
            try db.execute(sql: "CREATE TEMP TRIGGER refuse BEFORE INSERT ON upload BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let next = StagedFile(
            file: ScannedFile(path: CardPath("DCIM/4.jpg"), size: 40 << 20, mtime: 1),
            fingerprint: Fingerprint(high: 4, low: 9), deduplicated: false, verified: false)
        await #expect(throws: JournalError.self) {
            try await journal.record([.staged(next)], claiming: [claim(next)], volumeKey: volume.key)
        }
        #expect(try await journal.files(ofVolume: volume.key)[next.file.path] == nil)
        #expect(try await journal.stagedFilesWithoutUpload(ofVolume: volume.key).isEmpty)
    }

    @Test func removingAnUploadLeavesItsFilesStagedWithNoUploadForTheNextRun() async throws {
        let (_, journal) = try await openJournal()
        let a = try await stage(journal, "a.jpg", digest: 4)
        guard case .planned(let record) = try await journal.claim([claim(a)], volumeKey: volume.key)[0] else {
            Issue.record("expected an upload planned")
            return
        }
        try await journal.removeUpload(id: record.id, note: "aborted")
        #expect(try await journal.upload(id: record.id) == nil)
        let unplanned = try await journal.stagedFilesWithoutUpload(ofVolume: volume.key)
        #expect(unplanned.map(\.cardPath) == [a.file.path])
        #expect(unplanned.first?.lastError == "aborted")
    }
}
