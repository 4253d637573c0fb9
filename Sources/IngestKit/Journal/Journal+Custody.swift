import Foundation
import GRDB

/// One ASC MHL generation of a card's history in one bucket: written locally and journalled
/// (``Journal/recordGeneration(_:listing:)``) before it is uploaded, uploaded (manifest, then
/// chain) before it counts (``uploadedAt``).
public struct CustodyGeneration: Sendable, Equatable {
    public var volumeKey: String
    /// 1 for the card's first generation in this bucket.
    public var number: Int
    public var target: S3Destination
    /// The card's folder in the bucket (``KeyTemplate/cardPrefix(for:)``): the manifest goes
    /// to `folder + "ascmhl/" + fileName`.
    public var folder: String
    public var fileName: String
    /// The manifest's C4 id, as the chain records it.
    public var c4: String
    /// How many files it lists.
    public var files: Int
    public var createdAt: Date
    /// When the manifest and the chain naming it were both in the bucket; nil: not yet.
    public var uploadedAt: Date?
    /// The chain object's ETag as this generation left it: the next generation replaces the
    /// chain only if it is still this one (`If-Match`).
    public var chainETag: String?

    public init(
        volumeKey: String, number: Int, target: S3Destination, folder: String, fileName: String, c4: String, files: Int,
        createdAt: Date, uploadedAt: Date? = nil, chainETag: String? = nil
    ) {
        self.volumeKey = volumeKey
        self.number = number
        self.target = target
        self.folder = folder
        self.fileName = fileName
        self.c4 = c4
        self.files = files
        self.createdAt = createdAt
        self.uploadedAt = uploadedAt
        self.chainETag = chainETag
    }

    init(row: Row) throws {
        guard let addressing = S3AddressingStyle(rawValue: row["addressing"]) else {
            throw DatabaseError(resultCode: .SQLITE_MISMATCH, message: "addressing \(String(describing: row["addressing"]))")
        }
        self.init(
            volumeKey: row["volumeKey"], number: row["number"],
            target: S3Destination(endpoint: row["endpoint"], bucket: row["bucket"], region: row["region"], addressing: addressing),
            folder: row["folder"], fileName: row["fileName"], c4: row["c4"], files: row["files"],
            createdAt: try row.decode(JournalDate.self, forColumn: "createdAt").date,
            uploadedAt: try row.decode(JournalDate?.self, forColumn: "uploadedAt")?.date, chainETag: row["chainETag"])
    }

    /// The manifest's key in the bucket.
    public var manifestKey: String { folder + "ascmhl/" + fileName }
    /// The chain's key in the bucket.
    public var chainKey: String { folder + "ascmhl/ascmhl_chain.xml" }
}

/// A verified file of a card that no generation lists yet, as its manifest entry needs it.
public struct UnlistedFile: Sendable, Equatable {
    public var id: Int64
    public var path: CardPath
    public var size: Int64
    /// Nanoseconds since the epoch, as scanned.
    public var mtime: Int64
    public var fingerprint: String
    /// When its fingerprint was taken (the file was staged).
    public var hashedAt: Date
    /// Its object.
    public var key: String
    public var target: S3Destination
}

/// A file a generation lists, as another station's history is matched against it.
public struct ListedFile: Sendable, Equatable {
    public var id: Int64
    /// Its object.
    public var key: String
    public var fingerprint: String
}

/// A destination a card's files went to, as its verdict names it: the journal's name of the
/// cluster (``S3Destination/endpoint``, or a tus creation URL) and the bucket, with the
/// cluster's marker id (`.ingest/bucket-id`) where a gateway showed one.
public struct VerdictDestination: Sendable, Hashable {
    public var endpoint: String
    public var bucket: String
    public var bucketID: String?

    public init(endpoint: String, bucket: String, bucketID: String? = nil) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.bucketID = bucketID
    }

    public init(_ target: S3Destination) { self.init(endpoint: target.endpoint, bucket: target.bucket) }

    /// How people read it: `s3://cards at http://127.0.0.1:8333`, `tus https://HOST/PATH/`.
    public var displayName: String {
        if let url = S3Destination.tusCreationURL(of: endpoint) { return "tus \(url)" }
        return "s3://\(bucket) at \(endpoint)"
    }
}

/// What the journal says of one card in one destination, for its verdict (``CardStanding``):
/// a file counts as verified there only by its own upload there (the one it links, or one it
/// left for another destination: ``Journal/cardTallies(volumeKey:)``), never by another
/// destination's.
public struct CardTally: Sendable, Equatable {
    public var volume: VolumeRecord
    /// Where; nil for a card none of whose files has an upload planned anywhere.
    public var destination: VerdictDestination?
    /// Files of the card the journal knows, but those given up (`ingest forget`).
    public var files = 0
    public var bytes: Int64 = 0
    /// Not copied from the card yet (its copy failed, or was never tried).
    public var notCopied = 0
    /// Copied, their objects not verified in this destination yet (or never sent there).
    public var notUploaded = 0
    /// Verified here, then found missing or changed here while the file had left for another
    /// destination: the card must be ingested into this one again. The first one's reason.
    public var objectsLost = 0
    public var firstObjectLost: String?
    public var quarantined = 0
    /// Verified, listed by no generation in the bucket yet.
    public var unlisted = 0
    /// What its last scan could not ingest (``LostSkip``), the first few.
    public var lost: [LostSkip] = []
    public var lostCount = 0
    /// The first files of the card not copied or not uploaded yet, for the reason.
    public var firstWaiting: CardPath?
    public var generations = 0
    public var folder: String?
    /// Its last run stopped before it journalled every file its scan found.
    public var copyUnfinished = false

    public init(volume: VolumeRecord, destination: VerdictDestination? = nil) {
        self.volume = volume
        self.destination = destination
    }
}

/// A verified file's object, as the bucket check compares it with a listing.
public struct ObjectOnRecord: Sendable, Equatable {
    public var path: CardPath
    public var uploadID: String
    public var key: String
    public var size: Int64
    public var fingerprint: String
    /// The ETag of the object once a look (`HEAD`: size and recorded fingerprint) proved it
    /// ours; nil until then.
    public var etag: String?
    public var target: S3Destination
}

extension Journal {
    /// Cards seen since `date` that have a folder in the bucket: what the bucket check lists.
    public func cardsToCheck(seenSince date: Date) async throws(JournalError) -> [(volumeKey: String, folder: String)] {
        try await reading { db in
            try Row.fetchAll(
                db, sql: "SELECT key, cardFolder FROM volume WHERE cardFolder IS NOT NULL AND lastSeen >= ? ORDER BY key",
                arguments: [JournalDate(date)]
            ).map { ($0[0], $0[1]) }
        }
    }

    /// The card's verified files with their objects, in every destination they were verified
    /// in: the one each file links, and those it left for another (`formerUpload`).
    public func objectsOnRecord(ofVolume key: String) async throws(JournalError) -> [ObjectOnRecord] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT f.path, u.id, u.key, u.size, u.fingerprint, u.etag, u.endpoint, u.bucket, u.region, u.addressing
                    FROM file f JOIN upload u ON u.id = f.uploadID
                    WHERE f.volumeKey = ?1 AND f.state = 'uploaded' AND u.phase = 'completed'
                    UNION ALL
                    SELECT f.path, u.id, u.key, u.size, u.fingerprint, u.etag, u.endpoint, u.bucket, u.region, u.addressing
                    FROM file f JOIN formerUpload fu ON fu.file = f.id JOIN upload u ON u.id = fu.upload
                    WHERE f.volumeKey = ?1 AND f.state != 'forgotten' AND u.phase = 'completed'
                    """, arguments: [key]
            ).compactMap { row in
                guard let addressing = S3AddressingStyle(rawValue: row[9]) else { return nil }
                return ObjectOnRecord(
                    path: CardPath(bytes: Array(row[0] as Data)), uploadID: row[1], key: row[2], size: row[3], fingerprint: row[4],
                    etag: row[5], target: S3Destination(endpoint: row[6], bucket: row[7], region: row[8], addressing: addressing))
            }
        }
    }

    /// The file is to be listed by the next generation of the card's history in the destination
    /// of `upload` (its object there moves to another key); its listing elsewhere stands.
    public func unlist(_ path: CardPath, ofVolume key: String, upload: String) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: "UPDATE file SET manifestGeneration = NULL WHERE volumeKey = ? AND path = ? AND uploadID = ?",
                arguments: [key, Data(path.bytes), upload])
            try db.execute(sql: "UPDATE formerUpload SET manifestGeneration = NULL WHERE upload = ?", arguments: [upload])
        }
    }

    /// Records the ETag of an object whose upload's completion recorded none (a journal older
    /// than v15), learned by a look that found the object's size and fingerprint label ours:
    /// marked learned, since it was not the server's answer when the object was made.
    public func learnObjectETag(_ etag: String, ofUpload id: String) async throws(JournalError) {
        try await writing(durable: false) { db in
            try db.execute(
                sql: "UPDATE upload SET etag = ?, etagLearned = 1 WHERE id = ? AND etag IS NULL", arguments: [etag, id])
        }
    }

    /// Records that the object at `key` with this ETag is not ours: a check found it where the
    /// journal recorded another. Durable before the repair that follows counts on it. A look
    /// at the key (``isForeign(key:etag:target:)``) never takes it for ours again, whatever
    /// metadata it carries: the file goes to its alternative key.
    public func noteForeignObject(key: String, etag: String, target: S3Destination, at date: Date = Date())
        async throws(JournalError)
    {
        try await writing { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO foreignObject (endpoint, bucket, key, etag, foundAt) VALUES (?, ?, ?, ?, ?)",
                arguments: [target.endpoint, target.bucket, key, String(ETag.unquoted(etag)), JournalDate(date)])
        }
    }

    /// Whether the object at `key` with this ETag was proven not ours.
    public func isForeign(key: String, etag: String, target: S3Destination) async throws(JournalError) -> Bool {
        try await reading { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM foreignObject WHERE endpoint = ? AND bucket = ? AND key = ? AND etag = ?)",
                arguments: [target.endpoint, target.bucket, key, String(ETag.unquoted(etag))]) ?? false
        }
    }

    /// Remembers the card's folder in the bucket as this run's key template gives it (nil:
    /// the template spreads the card, which then has no history in the bucket).
    public func noteCardFolder(_ folder: String?, ofVolume key: String) async throws(JournalError) {
        try await writing(durable: false) { db in
            try db.execute(sql: "UPDATE volume SET cardFolder = ? WHERE key = ?", arguments: [folder, key])
        }
    }

    /// The card's folder in the bucket, as its last run's template gave it.
    public func cardFolder(ofVolume key: String) async throws(JournalError) -> String? {
        try await reading { db in try String.fetchOne(db, sql: "SELECT cardFolder FROM volume WHERE key = ?", arguments: [key]) }
    }

    /// Whether every file of the card is known to the journal and verified in the bucket (or
    /// given up): the condition for a new generation. A card whose last run stopped before it
    /// journalled every file its scan found is not.
    public func allVerified(ofVolume key: String) async throws(JournalError) -> Bool {
        try await reading { db in
            try Bool.fetchOne(
                db,
                sql: """
                    SELECT NOT EXISTS (SELECT 1 FROM file WHERE volumeKey = ?1 AND state IN ('pending', 'staged'))
                    AND NOT EXISTS (SELECT 1 FROM volume WHERE key = ?1 AND copyUnfinished)
                    """, arguments: [key]) ?? false
        }
    }

    /// Marks the card's copying as begun (durably, before any of its files is journalled:
    /// until it ends, the journal may not know every file of the card, and no verdict may say
    /// safe), or as ended with every file its scan found journalled.
    public func noteCopying(ofVolume key: String, unfinished: Bool) async throws(JournalError) {
        try await writing(durable: unfinished) { db in
            try db.execute(sql: "UPDATE volume SET copyUnfinished = ? WHERE key = ?", arguments: [unfinished, key])
        }
    }

    /// The card's verified files that no generation lists yet, by key: what the next
    /// generation lists. Found by the partial index of unlisted files, so a card's later run
    /// reads only its own files, not every file the card ever had.
    public func unlistedFiles(ofVolume key: String) async throws(JournalError) -> [UnlistedFile] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT f.id, f.path, f.size, f.mtime, f.fingerprint, f.updatedAt, u.key, u.endpoint, u.bucket, u.region,
                      u.addressing
                    FROM file f INDEXED BY file_unlisted JOIN upload u ON u.id = f.uploadID
                    WHERE f.volumeKey = ? AND f.manifestGeneration IS NULL AND f.state = 'uploaded' AND u.phase = 'completed'
                    ORDER BY u.key
                    """, arguments: [key]
            ).compactMap { row in
                guard let fingerprint = row[4] as String?, let addressing = S3AddressingStyle(rawValue: row[10]) else { return nil }
                return UnlistedFile(
                    id: row[0], path: CardPath(bytes: Array(row[1] as Data)), size: row[2], mtime: row[3], fingerprint: fingerprint,
                    hashedAt: try row.decode(JournalDate.self, atIndex: 5).date, key: row[6],
                    target: S3Destination(endpoint: row[7], bucket: row[8], region: row[9], addressing: addressing))
            }
        }
    }

    /// The card's generations in every bucket, in order.
    public func generations(ofVolume key: String) async throws(JournalError) -> [CustodyGeneration] {
        try await reading { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM custodyGeneration WHERE volumeKey = ? ORDER BY endpoint, bucket, number", arguments: [key]
            ).map(CustodyGeneration.init(row:))
        }
    }

    /// Generations written and journalled but not yet in their bucket, of every card: what
    /// a run, `resume` and `rescan` finish first.
    public func unuploadedGenerations() async throws(JournalError) -> [CustodyGeneration] {
        try await reading { db in
            try Row.fetchAll(db, sql: "SELECT * FROM custodyGeneration WHERE uploadedAt IS NULL ORDER BY volumeKey, number")
                .map(CustodyGeneration.init(row:))
        }
    }

    /// Cards with verified files no generation lists and nothing left to copy or upload:
    /// those whose run ended before their generation was written (a kill, a power cut).
    public func volumesAwaitingGeneration() async throws(JournalError) -> [String] {
        try await reading { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT f.volumeKey FROM file f INDEXED BY file_unlisted
                    WHERE f.manifestGeneration IS NULL AND f.state = 'uploaded'
                    AND NOT EXISTS (SELECT 1 FROM file w WHERE w.volumeKey = f.volumeKey AND w.state IN ('pending', 'staged'))
                    """)
        }
    }

    /// Journals a generation written to the state directory, with the files it lists, in
    /// one durable transaction: it is then uploaded, and a kill before that leaves it for
    /// the next process to upload, never to write again.
    public func recordGeneration(_ generation: CustodyGeneration, listing files: [Int64]) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    INSERT INTO custodyGeneration (volumeKey, number, endpoint, bucket, region, addressing, folder, fileName, c4,
                      files, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    generation.volumeKey, generation.number, generation.target.endpoint, generation.target.bucket,
                    generation.target.region, generation.target.addressing, generation.folder, generation.fileName,
                    generation.c4, generation.files, JournalDate(generation.createdAt),
                ])
            for id in files {
                try db.cachedStatement(sql: "UPDATE file SET manifestGeneration = ? WHERE id = ?").execute(arguments: [generation.number, id])
            }
        }
    }

    /// The files `generation` lists, with their objects.
    public func filesListed(by generation: CustodyGeneration) async throws(JournalError) -> [ListedFile] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT f.id, u.key, f.fingerprint FROM file f JOIN upload u ON u.id = f.uploadID
                    WHERE f.volumeKey = ? AND f.manifestGeneration = ? AND u.endpoint = ? AND u.bucket = ?
                      AND f.fingerprint IS NOT NULL
                    """,
                arguments: [generation.volumeKey, generation.number, generation.target.endpoint, generation.target.bucket]
            ).map { ListedFile(id: $0[0], key: $0[1], fingerprint: $0[2]) }
        }
    }

    /// Takes in the generations other stations wrote into the card's history in the bucket
    /// (`theirs`, uploaded) in place of `replaced`, this station's generation that one of
    /// them took the number of, in one durable transaction: `replaced` is forgotten and
    /// the files it listed are unlisted, then those `listing` maps (file id → generation
    /// number) are listed by theirs. The unlisted rest go to this station's next generation.
    public func adoptGenerations(_ theirs: [CustodyGeneration], replacing replaced: CustodyGeneration, listing: [Int64: Int])
        async throws(JournalError)
    {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE file SET manifestGeneration = NULL WHERE volumeKey = ? AND manifestGeneration = ?
                      AND uploadID IN (SELECT id FROM upload WHERE endpoint = ? AND bucket = ?)
                    """,
                arguments: [replaced.volumeKey, replaced.number, replaced.target.endpoint, replaced.target.bucket])
            try db.execute(
                sql: "DELETE FROM custodyGeneration WHERE volumeKey = ? AND endpoint = ? AND bucket = ? AND number = ?",
                arguments: [replaced.volumeKey, replaced.target.endpoint, replaced.target.bucket, replaced.number])
            for generation in theirs {
                try db.execute(
                    sql: """
                        INSERT INTO custodyGeneration (volumeKey, number, endpoint, bucket, region, addressing, folder, fileName,
                          c4, files, createdAt, uploadedAt, chainETag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        generation.volumeKey, generation.number, generation.target.endpoint, generation.target.bucket,
                        generation.target.region, generation.target.addressing, generation.folder, generation.fileName,
                        generation.c4, generation.files, JournalDate(generation.createdAt),
                        generation.uploadedAt.map(JournalDate.init), generation.chainETag,
                    ])
            }
            for (id, number) in listing {
                try db.cachedStatement(sql: "UPDATE file SET manifestGeneration = ? WHERE id = ?").execute(arguments: [number, id])
            }
        }
    }

    /// The generation's manifest and chain are in the bucket, the chain with `chainETag`.
    /// Not synced: lost, the generation is uploaded again, and both writes find their bytes
    /// there (``UploadService/writeCustody(ofVolume:creator:)``); the card's verdict, written
    /// durably next, makes it durable before anything reports it.
    public func noteGenerationUploaded(_ generation: CustodyGeneration, chainETag: String, at date: Date = Date())
        async throws(JournalError)
    {
        try await writing(durable: false) { db in
            try db.execute(
                sql: """
                    UPDATE custodyGeneration SET uploadedAt = ?, chainETag = ?
                    WHERE volumeKey = ? AND endpoint = ? AND bucket = ? AND number = ?
                    """,
                arguments: [
                    JournalDate(date), chainETag, generation.volumeKey, generation.target.endpoint, generation.target.bucket,
                    generation.number,
                ])
        }
    }

    /// Files staged with the content of an upload that is verified (completed, with its
    /// completion written) are uploaded: what the
    /// upload's completion says of every file it carries. A file linked to the upload after
    /// its completion was written (a kill between a file's claim and its run, a restage of
    /// a file whose upload had completed) was left staged, so its card was never safe to
    /// erase. Read from the index of files by state: staged files are few.
    public func settleFilesOfVerifiedUploads() async throws(JournalError) {
        try await writing(durable: false) { db in
            try db.execute(sql: """
                UPDATE file SET state = 'uploaded', lastError = NULL, failures = 0, quarantined = 0
                WHERE state = 'staged' AND uploadID IN (SELECT id FROM upload WHERE phase = 'completed' AND completedAt IS NOT NULL)
                """)
        }
    }

    /// Records a card's verdict, durably: no card is reported safe to erase before the
    /// verdict that says so is on disk. `reason`: the first reason it is not.
    public func noteVerdict(ofVolume key: String, safe: Bool, reason: String?) async throws(JournalError) {
        try await writing { db in
            try db.execute(sql: "UPDATE volume SET safeToErase = ?, verdict = ? WHERE key = ?", arguments: [safe, reason, key])
        }
    }

    /// What the journal says of every card it knows (or of `volumeKey` only), for verdicts:
    /// one tally per card and destination its files went to (the one each file links, and
    /// those it left for another with its content unchanged), the card's main destination
    /// (where most of its files link) first; one tally with no destination for a card none of
    /// whose files has an upload. One pass over each card's files per destination, grouped.
    public func cardTallies(volumeKey: String? = nil) async throws(JournalError) -> [CardTally] {
        try await reading { db in
            let volumes = try VolumeRecord.filter(volumeKey == nil || Column("key") == volumeKey)
                .order(Column("lastSeen").desc).fetchAll(db)
            return try volumes.flatMap { volume in
                let destinations = try Self.destinations(db, ofVolume: volume.key)
                guard !destinations.isEmpty else { return [try Self.tally(db, volume, in: nil)] }
                return try destinations.map { try Self.tally(db, volume, in: $0) }
            }
        }
    }

    /// The tally of the card `key` in `target`, whether or not any of its files went there
    /// (a card never sent there is not safe there); nil for a card the journal does not know.
    public func cardTally(volumeKey key: String, in target: S3Destination) async throws(JournalError) -> CardTally? {
        try await reading { db in
            guard let volume = try VolumeRecord.fetchOne(db, key: key) else { return nil }
            let known = try Self.destinations(db, ofVolume: key).first { $0.endpoint == target.endpoint && $0.bucket == target.bucket }
            return try Self.tally(db, volume, in: known ?? VerdictDestination(target))
        }
    }

    /// The destinations the card's files went to, the one most of them link first.
    private static func destinations(_ db: Database, ofVolume key: String) throws -> [VerdictDestination] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT d.endpoint, d.bucket, SUM(d.linked) AS linked,
                  (SELECT cluster FROM gateway g WHERE g.endpoint = d.endpoint AND g.bucket = d.bucket AND cluster IS NOT NULL
                   LIMIT 1)
                FROM (
                  SELECT u.endpoint, u.bucket, COUNT(*) AS linked FROM file f JOIN upload u ON u.id = f.uploadID
                  WHERE f.volumeKey = ?1 AND f.state != 'forgotten' GROUP BY 1, 2
                  UNION ALL
                  SELECT fu.endpoint, fu.bucket, 0 FROM file f JOIN formerUpload fu ON fu.file = f.id
                  WHERE f.volumeKey = ?1 AND f.state != 'forgotten' GROUP BY 1, 2
                ) d GROUP BY 1, 2 ORDER BY linked DESC, 1, 2
                """, arguments: [key]
        ).map { VerdictDestination(endpoint: $0[0], bucket: $0[1], bucketID: $0[3]) }
    }

    /// Where each file of a card stands in one destination (`?2`, `?3`; NULL: none), as
    /// ``tally(_:_:in:)`` groups them: by its own upload there, the one it links or the one it
    /// left there (`formerUpload`), never by another destination's.
    private static let placeInDestination = """
        FROM file f
        LEFT JOIN upload cu ON cu.id = f.uploadID AND cu.endpoint = ?2 AND cu.bucket = ?3
        LEFT JOIN formerUpload fu ON fu.file = f.id AND fu.endpoint = ?2 AND fu.bucket = ?3
        LEFT JOIN upload pu ON pu.id = fu.upload
        WHERE f.volumeKey = ?1 AND f.state != 'forgotten'
        """
    private static let place = """
        CASE
          WHEN cu.id IS NOT NULL THEN CASE f.state
            WHEN 'uploaded' THEN CASE WHEN f.manifestGeneration IS NULL THEN 'unlisted' ELSE 'listed' END
            WHEN 'staged' THEN 'notUploaded' ELSE 'notCopied' END
          WHEN pu.phase = 'completed' THEN CASE WHEN fu.manifestGeneration IS NULL THEN 'unlisted' ELSE 'listed' END
          WHEN fu.objectLost IS NOT NULL THEN 'lost'
          WHEN f.state = 'pending' THEN 'notCopied'
          ELSE 'notUploaded'
        END
        """

    private static func tally(_ db: Database, _ volume: VolumeRecord, in destination: VerdictDestination?) throws -> CardTally {
        var tally = CardTally(volume: volume, destination: destination)
        let arguments: StatementArguments = [volume.key, destination?.endpoint, destination?.bucket]
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT \(place), f.quarantined, COUNT(*), COALESCE(SUM(f.size), 0), MIN(fu.objectLost)
                \(placeInDestination) GROUP BY 1, 2
                """, arguments: arguments)
        for row in rows {
            let (place, quarantined, count, bytes): (String, Bool, Int, Int64) = (row[0], row[1], row[2], row[3])
            tally.files += count
            tally.bytes += bytes
            // A file held here is not held back by its trouble elsewhere.
            if quarantined, place != "listed", place != "unlisted" { tally.quarantined += count }
            switch place {
            case "notCopied": tally.notCopied += count
            case "notUploaded": tally.notUploaded += count
            case "unlisted": tally.unlisted += count
            case "lost":
                tally.objectsLost += count
                tally.firstObjectLost = tally.firstObjectLost ?? row[4]
            default: break
            }
        }
        // Listed by a generation not yet in the bucket counts as unlisted.
        let generations = try Row.fetchOne(
            db,
            sql: """
                SELECT COALESCE(SUM(CASE WHEN uploadedAt IS NULL THEN files END), 0), COUNT(uploadedAt)
                FROM custodyGeneration WHERE volumeKey = ?1 AND endpoint IS ?2 AND bucket IS ?3
                """, arguments: arguments)
        tally.unlisted += generations?[0] ?? 0
        tally.generations = generations?[1] ?? 0
        let card = try Row.fetchOne(db, sql: "SELECT cardFolder, copyUnfinished FROM volume WHERE key = ?", arguments: [volume.key])
        tally.folder = card?[0]
        tally.copyUnfinished = card?[1] ?? false
        tally.lostCount = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cardSkip WHERE volumeKey = ?", arguments: [volume.key]) ?? 0
        tally.lost = try Row.fetchAll(
            db, sql: "SELECT path, code, reason FROM cardSkip WHERE volumeKey = ? ORDER BY path LIMIT 5", arguments: [volume.key]
        ).map { LostSkip(path: CardPath(bytes: Array($0[0] as Data)), code: $0[1], reason: $0[2]) }
        if tally.notCopied + tally.notUploaded > 0 {
            tally.firstWaiting = try Data.fetchOne(
                db,
                sql: """
                    SELECT f.path \(placeInDestination) AND \(place) IN ('notCopied', 'notUploaded') ORDER BY f.path LIMIT 1
                    """, arguments: arguments
            ).map { CardPath(bytes: Array($0)) }
        }
        return tally
    }
}
