import Foundation
import GRDB

extension S3AddressingStyle: DatabaseValueConvertible {}
extension UploadStateMachine.Phase: DatabaseValueConvertible {}
extension PartDigestAlgorithm: DatabaseValueConvertible {}

/// One object to upload. A content (fingerprint) is sent to a bucket once, by the upload of
/// the first file that brought it (``copyKey`` empty); every other file carrying it gets its
/// own object, a server-side copy of that one (``copyKey`` its key), so that each file of a
/// card is at its own key and no byte of a known content is sent twice.
///
/// Its id is derived from the target, the fingerprint and, for a copy, its key, so two
/// runs arrive at the same upload rather than two objects.
public struct UploadRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord, JournalRecord {
    public static let databaseTableName = "upload"
    /// The logical upload id people type (`ingest abort ID`): 15 hex digits (12 when an
    /// older version planned it).
    public var id: String
    public var endpoint: String
    public var bucket: String
    public var region: String
    public var addressing: S3AddressingStyle
    public var key: String
    public var fingerprint: String
    public var size: Int64
    /// The plan's part size; nil for a single `PutObject`.
    public var partSize: Int64?
    /// The digest every part is sent with; fixed per upload, since the whole-object check
    /// combines the parts' digests.
    public var checksum: PartDigestAlgorithm
    public var phase: UploadStateMachine.Phase
    /// The server's multipart upload id, once created.
    public var uploadID: String?
    public var restartCount: Int
    /// Metadata and tagging headers (JSON), fixed when the upload was planned: a resume or a
    /// restart sends exactly what the first attempt sent.
    public var headers: String
    /// The first file that brought this content, for people reading `ingest status`.
    public var volumeKey: String?
    public var sourcePath: Data?
    /// The object's ETag once completed.
    public var etag: String?
    /// Why the last attempt failed; cleared when it completes.
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var completedAt: Date?
    /// Runs in a row whose attempt at this upload failed.
    public var failures: Int = 0
    /// Failed `upload.quarantine_after` runs in a row: shown by `status`, counted by the
    /// metrics and in the exit status of every run that meets it, until it succeeds or is
    /// aborted or forgotten. It is still tried.
    public var quarantined: Bool = false
    /// The parts' CRC32Cs computed from the card's bytes as the stager read them (little-endian
    /// `UInt32`s, at ``partSize``), when it did: the upload, taken from the journal later,
    /// sends the card's checksums without keeping them in memory until then.
    public var cardChecksums: Data? = nil
    /// Empty for the upload that sends the content's bytes. Otherwise the key this file's
    /// object was planned at (``key`` moves to the alternative key if that one is taken): the
    /// object is made by a server-side copy of the content's upload once that is verified
    /// (``ObjectUploader/copy(from:)``), and found again by this key when the file is
    /// claimed again.
    public var copyKey: String = ""

    /// A server-side copy of its content's upload, not an upload of bytes.
    public var isCopy: Bool { !copyKey.isEmpty }

    public var target: S3Destination {
        S3Destination(endpoint: endpoint, bucket: bucket, region: region, addressing: addressing)
    }

    public var sourceDisplay: String {
        sourcePath.map { CardPath(bytes: Array($0)).display } ?? key
    }

    /// The upload's fingerprint, as recorded (the journal only ever stores valid ones).
    public var contentFingerprint: Fingerprint? { Fingerprint(hex: fingerprint) }

    public var requestHeaders: [SigV4Header] { Self.decode(headers: headers) }

    static func encode(headers: [SigV4Header]) -> String {
        StringArraysJSON.encode(headers.map { [$0.name, $0.value] })
    }

    /// Headers as ``encode(headers:)`` wrote them; a pair that is not one is left out.
    static func decode(headers: String) -> [SigV4Header] {
        (StringArraysJSON.decode(headers) ?? []).compactMap { $0.count == 2 ? SigV4Header($0[0], $0[1]) : nil }
    }

    /// The logical id of the upload of `fingerprint` to `target`: 15 hex digits (60 bits) of a
    /// hash of both, short enough to type and to lock as a number (``StateDirectory/lockUpload(_:)``).
    /// `attempt` (0 first) gives another id for the same upload, when an id is taken by
    /// another content.
    /// A copy's id (``copyKey``) hashes its key too.
    public static func logicalID(target: S3Destination, fingerprint: Fingerprint, copyKey: String = "", attempt: Int = 0) -> String {
        let text = "\(target.endpoint)\n\(target.bucket)\n\(fingerprint.hex)" + (copyKey.isEmpty ? "" : "\ncopy\n\(copyKey)")
            + (attempt == 0 ? "" : "\n\(attempt)")
        return String(Fingerprint.of(Array(text.utf8)).hex.prefix(15))
    }

    /// ``cardChecksums`` as the uploader takes them; nil when there are none, or they are
    /// not a whole number of checksums.
    public var partChecksums: PartChecksums? {
        guard let data = cardChecksums, !data.isEmpty, data.count % 4 == 0 else { return nil }
        let values = stride(from: 0, to: data.count, by: 4).map { offset in
            data[data.startIndex + offset..<data.startIndex + offset + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        return PartChecksums(partSize: partSize, crc32c: values)
    }

    static func encode(checksums: PartChecksums?) -> Data? {
        guard let checksums, !checksums.crc32c.isEmpty else { return nil }
        var data = Data(capacity: checksums.crc32c.count * 4)
        for value in checksums.crc32c { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    /// Not yet verified in the bucket, and not given up by the user: what `resume` finishes.
    public var isPending: Bool { phase != .completed && phase != .aborted }
}

extension UploadRecord {
    /// Read column by column rather than through `Decodable`: a card's run reads every
    /// record at least twice (its page of the queue, then afresh when it starts), and GRDB's
    /// keyed decoding container took a visible share of a card of small files' CPU time. Dates as
    /// every journal record reads them (``JournalRecord``).
    public init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        endpoint = try row.decode(forColumn: "endpoint")
        bucket = try row.decode(forColumn: "bucket")
        region = try row.decode(forColumn: "region")
        addressing = try row.decode(forColumn: "addressing")
        key = try row.decode(forColumn: "key")
        fingerprint = try row.decode(forColumn: "fingerprint")
        size = try row.decode(forColumn: "size")
        partSize = try row.decode(forColumn: "partSize")
        checksum = try row.decode(forColumn: "checksum")
        phase = try row.decode(forColumn: "phase")
        uploadID = try row.decode(forColumn: "uploadID")
        restartCount = try row.decode(forColumn: "restartCount")
        headers = try row.decode(forColumn: "headers")
        volumeKey = try row.decode(forColumn: "volumeKey")
        sourcePath = try row.decode(forColumn: "sourcePath")
        etag = try row.decode(forColumn: "etag")
        lastError = try row.decode(forColumn: "lastError")
        createdAt = try row.decode(JournalDate.self, forColumn: "createdAt").date
        updatedAt = try row.decode(JournalDate.self, forColumn: "updatedAt").date
        completedAt = try row.decode(JournalDate?.self, forColumn: "completedAt")?.date
        failures = try row.decode(forColumn: "failures")
        quarantined = try row.decode(forColumn: "quarantined")
        cardChecksums = try row.decode(forColumn: "cardChecksums")
        copyKey = try row.decode(forColumn: "copyKey")
    }

    /// Written column by column, for the same reason; the columns ``init(row:)`` reads.
    public func encode(to container: inout PersistenceContainer) throws {
        for (column, value) in zip(Self.columns, columnValues) { container[column] = value }
    }

    /// Inserts the record with one cached statement (GRDB's generic insert built a persistence
    /// container and its statement's text each time: a visible share of the CPU time of a
    /// card of small files), unless an upload of its content to its bucket is there already: then
    /// nothing changes, and the database's `changesCount` is 0.
    ///
    /// An id is 60 bits of a hash: two contents may, rarely, get one. The second then takes
    /// the next of its own ids (``logicalID(target:fingerprint:attempt:)``), so an id never
    /// names two contents, and a file never rides on another content's upload.
    mutating func insertUnlessPlanned(_ db: Database) throws {
        for attempt in 1...Self.idAttempts {
            do {
                try db.cachedStatement(sql: Self.insertUnlessPlannedSQL).execute(arguments: StatementArguments(columnValues))
                return
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY && attempt < Self.idAttempts {
                guard let content = contentFingerprint else { throw error }
                id = Self.logicalID(target: target, fingerprint: content, copyKey: copyKey, attempt: attempt)
            }
        }
    }

    private static let idAttempts = 8

    /// The columns written, in the order of ``columnValues``.
    static let columns = [
        "id", "endpoint", "bucket", "region", "addressing", "key", "fingerprint", "size", "partSize", "checksum", "phase",
        "uploadID", "restartCount", "headers", "volumeKey", "sourcePath", "etag", "lastError", "createdAt", "updatedAt",
        "completedAt", "failures", "quarantined", "cardChecksums", "copyKey",
    ]
    /// Built once: the claim runs it for every file of a card.
    private static let insertUnlessPlannedSQL =
        "INSERT INTO upload (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
        + " ON CONFLICT(fingerprint, endpoint, bucket, copyKey) DO NOTHING"

    private var columnValues: [(any DatabaseValueConvertible)?] {
        [
            id, endpoint, bucket, region, addressing, key, fingerprint, size, partSize, checksum, phase,
            uploadID, restartCount, headers, volumeKey, sourcePath, etag, lastError, JournalDate(createdAt), JournalDate(updatedAt),
            completedAt.map(JournalDate.init), failures, quarantined, cardChecksums, copyKey,
        ]
    }
}

/// A part the server acknowledged, committed before anything depends on it.
public struct UploadPartRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord, JournalRecord {
    public static let databaseTableName = "uploadPart"
    public var upload: String
    public var number: Int
    public var etag: String
    public var size: Int64
    public var digest: String?

    var acknowledged: UploadStateMachine.AcknowledgedPart {
        .init(number: number, etag: etag, size: size, digest: digest)
    }
}

/// A multipart upload whose parts were all sent while its file was staged (the pipeline's
/// `PartStreamer`), for the file's claim to adopt.
public struct StreamedParts: Sendable, Equatable {
    /// The server's upload id.
    public var uploadID: String
    /// What `CreateMultipartUpload` was sent with: every label but the fingerprint.
    public var headers: [SigV4Header]
    /// The parts acknowledged: every part when the stream ended, those acknowledged before
    /// a kill when the stream is adopted after one (the upload sends the rest).
    public var parts: [UploadStateMachine.AcknowledgedPart]
    /// The journal's record of the stream (``StreamRecord``), which the claim deletes.
    public var streamID: Int64?

    public init(uploadID: String, headers: [SigV4Header], parts: [UploadStateMachine.AcknowledgedPart], streamID: Int64? = nil) {
        self.uploadID = uploadID
        self.headers = headers
        self.parts = parts
        self.streamID = streamID
    }
}

/// A staged file's content, planned for upload: the pipeline builds one per staged file.
public struct UploadClaim: Sendable, Equatable {
    public var path: CardPath
    public var fingerprint: Fingerprint
    public var size: Int64
    public var target: S3Destination
    public var key: String
    public var headers: [SigV4Header]
    /// nil: a single `PutObject`.
    public var partSize: Int64?
    public var checksum: PartDigestAlgorithm
    /// The parts' CRC32Cs from the card's bytes, when the stager computed them for this cut:
    /// journalled with a new upload (``UploadRecord/cardChecksums``).
    public var cardChecksums: PartChecksums?
    /// The upload its parts went to as the file was staged: a new upload adopts it, at
    /// once in phase `uploading` with every part; otherwise the caller aborts it.
    public var streamed: StreamedParts?

    public init(
        path: CardPath, fingerprint: Fingerprint, size: Int64, target: S3Destination, key: String,
        headers: [SigV4Header], partSize: Int64?, checksum: PartDigestAlgorithm = .crc32c, cardChecksums: PartChecksums? = nil
    ) {
        self.checksum = checksum
        self.cardChecksums = cardChecksums
        self.path = path
        self.fingerprint = fingerprint
        self.size = size
        self.target = target
        self.key = key
        self.headers = headers
        self.partSize = partSize
    }
}

/// What the journal made of a claim.
public enum ClaimResult: Sendable, Equatable {
    /// A new upload, planned by this claim (adopting its streamed parts, if any).
    case planned(UploadRecord)
    /// Upload this: pending from before (then it resumes), or planned by another file.
    case upload(UploadRecord)
    /// The bucket already holds this file's object, verified: the file is recorded as
    /// uploaded, and the object is looked at before that is believed.
    case alreadyInBucket(UploadRecord)
    /// A new copy, planned by this claim: the file's content is planned already, by the
    /// upload `of` (pending or verified), and this file's object is copied from it.
    case copy(UploadRecord, of: UploadRecord)
}

extension Journal {
    /// Links staged files to their uploads, in one transaction: a file claimed again joins
    /// the upload planned for it before (completed: the file is uploaded at once); a file
    /// whose content another file planned for the same bucket gets a copy of that upload;
    /// otherwise a new upload is planned.
    public func claim(_ claims: [UploadClaim], volumeKey: String, at date: Date = Date()) async throws(JournalError) -> [ClaimResult] {
        guard !claims.isEmpty else { return [] }
        return try await writing(durable: false) { db in
            try claims.map { claim in try Self.claim(db, claim, volumeKey: volumeKey, at: date) }
        }
    }

    /// ``record(_:volumeKey:quarantineAfter:at:)`` of a batch of outcomes and ``claim(_:volumeKey:at:)``
    /// of the uploads of its staged files, in one transaction: a card's run journals each
    /// batch this way, one commit where there were two, and the file rows and index pages
    /// both touch are written once. A kill leaves the batch unrecorded or recorded with its
    /// uploads, never staged without them.
    public func record(
        _ outcomes: [StageOutcome], claiming claims: [UploadClaim], volumeKey: String, quarantineAfter: Int = .max,
        at date: Date = Date()
    ) async throws(JournalError) -> [ClaimResult] {
        guard !outcomes.isEmpty else { return [] }
        return try await writing(durable: false) { db in
            try Self.record(db, outcomes, volumeKey: volumeKey, quarantineAfter: quarantineAfter, at: date)
            return try claims.map { claim in try Self.claim(db, claim, volumeKey: volumeKey, at: date) }
        }
    }

    private static func claim(_ db: Database, _ claim: UploadClaim, volumeKey: String, at date: Date) throws -> ClaimResult {
        // The stream's parts become the upload's below, or the caller aborts its upload: either
        // way it is no longer a stream to adopt.
        if let stream = claim.streamed?.streamID {
            try db.cachedStatement(sql: "DELETE FROM stream WHERE id = ?").execute(arguments: [stream])
        }
        let target = claim.target
        let pathBytes = Data(claim.path.bytes)
        let streamed = claim.streamed
        var record = UploadRecord(
            id: UploadRecord.logicalID(target: target, fingerprint: claim.fingerprint), endpoint: target.endpoint,
            bucket: target.bucket, region: target.region, addressing: target.addressing, key: claim.key,
            fingerprint: claim.fingerprint.hex, size: claim.size, partSize: claim.partSize, checksum: claim.checksum,
            phase: streamed == nil ? .created : .uploading, uploadID: streamed?.uploadID, restartCount: 0,
            headers: UploadRecord.encode(headers: streamed?.headers ?? claim.headers), volumeKey: volumeKey,
            sourcePath: pathBytes, etag: nil, lastError: nil, createdAt: date, updatedAt: date, completedAt: nil,
            cardChecksums: UploadRecord.encode(checksums: claim.cardChecksums.flatMap { $0.partSize == claim.partSize ? $0 : nil }))
        // A new content is inserted without a look first (a statement a file less); a content
        // some file planned already, found by what it is (endpoint, bucket, fingerprint) and
        // never by its id, keeps its upload.
        try record.insertUnlessPlanned(db)
        if db.changesCount == 0 {
            guard
                let existing = try UploadRecord.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ''"),
                    arguments: [claim.fingerprint.hex, target.endpoint, target.bucket])
            else { throw DatabaseError(resultCode: .SQLITE_INTERNAL, message: "upload of \(claim.fingerprint.hex) neither inserted nor there") }
            // The file that brought the content, claimed again (a later run, or a restage).
            if existing.volumeKey == volumeKey, existing.sourcePath == pathBytes {
                return try join(db, existing, claim, volumeKey: volumeKey, at: date)
            }
            // Another file of the same bytes: its own object, copied from the content's.
            var copy = record
            copy.copyKey = claim.key
            copy.id = UploadRecord.logicalID(target: target, fingerprint: claim.fingerprint, copyKey: claim.key)
            copy.phase = .created
            copy.uploadID = nil
            copy.headers = UploadRecord.encode(headers: claim.headers)
            copy.cardChecksums = nil
            copy.partSize = nil
            try copy.insertUnlessPlanned(db)
            if db.changesCount == 0 {
                guard
                    let planned = try UploadRecord.fetchOne(
                        db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ?"),
                        arguments: [claim.fingerprint.hex, target.endpoint, target.bucket, claim.key])
                else { throw DatabaseError(resultCode: .SQLITE_INTERNAL, message: "copy to \(claim.key) neither inserted nor there") }
                return try join(db, planned, claim, volumeKey: volumeKey, at: date)
            }
            try link(db, claim, to: copy.id, volumeKey: volumeKey, at: date)
            return .copy(copy, of: existing)
        }
        let id = record.id
        for part in streamed?.parts ?? [] {
            try db.cachedStatement(sql: "INSERT INTO uploadPart (upload, number, etag, size, digest) VALUES (?, ?, ?, ?, ?)")
                .execute(arguments: [id, part.number, part.etag, part.size, part.digest])
        }
        try link(db, claim, to: id, volumeKey: volumeKey, at: date)
        return .planned(record)
    }

    /// The file joins an upload planned before: done at once if it is verified, else waiting for it.
    private static func join(_ db: Database, _ existing: UploadRecord, _ claim: UploadClaim, volumeKey: String, at date: Date)
        throws -> ClaimResult
    {
        let done = existing.phase == .completed
        try db.cachedStatement(sql: "UPDATE file SET uploadID = ?, state = ?, updatedAt = ? WHERE volumeKey = ? AND path = ?")
            .execute(arguments: [
                existing.id, done ? FileState.uploaded : FileState.staged, JournalDate(date), volumeKey, Data(claim.path.bytes),
            ])
        return done ? .alreadyInBucket(existing) : .upload(existing)
    }

    /// The file's upload is `id`, new: its failures are forgotten.
    private static func link(_ db: Database, _ claim: UploadClaim, to id: String, volumeKey: String, at date: Date) throws {
        try db.cachedStatement(sql: """
            UPDATE file SET uploadID = ?, updatedAt = ?, lastError = NULL, failures = 0, quarantined = 0
            WHERE volumeKey = ? AND path = ?
            """).execute(arguments: [id, JournalDate(date), volumeKey, Data(claim.path.bytes)])
    }

    /// Files of a volume that are staged but linked to no upload (staged with `--no-upload`,
    /// by a run killed while a streamed file waited for its stream's end, or by a version
    /// that journalled uploads apart from the staging of their files), after the file
    /// `after` (its id), at most `limit`, in the order they were first journalled: a run
    /// plans them a page at a time, from the index of files by upload.
    public func stagedFilesWithoutUpload(
        ofVolume key: String, after: Int64 = 0, limit: Int = -1
    ) async throws(JournalError) -> [FileRecord] {
        try await reading { db in
            try FileRecord.fetchAll(
                db.cachedStatement(sql: """
                    SELECT * FROM file INDEXED BY file_by_upload
                    WHERE uploadID IS NULL AND id > ? AND volumeKey = ? AND state = 'staged' ORDER BY id LIMIT ?
                    """),
                arguments: [after, key, limit])
        }
    }

    /// Pending uploads carrying files of this volume that its run does not take from
    /// ``pendingUploadPage(ofVolume:after:limit:)``: those planned by another volume's file
    /// (shared content, by a version before copies), those planned for it but never started
    /// at a destination other than `target` (which follow the run to its own), and another
    /// volume's pending uploads of contents this volume's pending copies are made from.
    ///
    /// Asked from the pending uploads' side (their partial index, then each one's files by
    /// `file_by_upload`): from the card's side it looked up the upload of every file the
    /// card ever had, a random read of the upload table each, at every insertion and rescan:
    /// a cost that grew with the card, not with what is pending.
    public func pendingUploadsBesidesPages(ofVolume key: String, target: S3Destination) async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.fetchAll(
                db,
                sql: """
                    SELECT * FROM upload INDEXED BY upload_pending_by_volume WHERE phase NOT IN ('completed', 'aborted')
                    AND EXISTS (SELECT 1 FROM file WHERE file.uploadID = upload.id AND file.volumeKey = ?1)
                    AND (volumeKey IS NOT ?1 OR (phase = 'created'
                      AND NOT (endpoint = ?2 AND bucket = ?3 AND region = ?4 AND addressing = ?5)))
                    UNION
                    SELECT s.* FROM upload c INDEXED BY upload_pending_by_volume
                    JOIN upload s ON s.fingerprint = c.fingerprint AND s.endpoint = c.endpoint AND s.bucket = c.bucket
                      AND s.copyKey = ''
                    WHERE c.volumeKey = ?1 AND c.phase NOT IN ('completed', 'aborted') AND c.copyKey != ''
                    AND s.phase NOT IN ('completed', 'aborted') AND s.volumeKey IS NOT ?1
                    ORDER BY createdAt
                    """, arguments: [key, target.endpoint, target.bucket, target.region, target.addressing])
        }
    }

    /// The volume's pending uploads planned for its own files after `position`, at most
    /// `limit`, in the order they were planned, each with its position: a card's run reads
    /// its upload queue a page at a time (``UploadRunner/follow(volume:)``), from the
    /// partial index of pending uploads, so however far staging runs ahead of the uploads
    /// the queue holds no more than a page in memory.
    public func pendingUploadPage(
        ofVolume key: String, after position: Int64, limit: Int
    ) async throws(JournalError) -> [(position: Int64, record: UploadRecord)] {
        try await reading { db in
            // Each row read as the cursor passes it: a copied row (`Row.fetchAll`) finds a
            // column by comparing every name lower-cased, a visible share of a run of small
            // files.
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: """
                    SELECT rowid AS position, * FROM upload INDEXED BY upload_pending_by_volume
                    WHERE volumeKey = ? AND phase NOT IN ('completed', 'aborted') AND rowid > ?
                    ORDER BY rowid LIMIT ?
                    """),
                arguments: [key, position, limit])
            var page: [(position: Int64, record: UploadRecord)] = []
            while let row = try rows.next() { page.append((row["position"], try UploadRecord(row: row))) }
            return page
        }
    }

    /// The position of the upload planned last, 0 with none: what a run plans from now on
    /// comes after it.
    public func lastUploadPosition() async throws(JournalError) -> Int64 {
        try await reading { db in try Int64.fetchOne(db, sql: "SELECT MAX(rowid) FROM upload") ?? 0 }
    }

    /// Every pending upload (not completed, not aborted), in the order planned: a content's
    /// upload comes before its copies.
    public func pendingUploads() async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.filter(!["completed", "aborted"].contains(Column("phase"))).order(Column.rowID).fetchAll(db)
        }
    }

    /// The upload that sends the bytes a copy is made from; nil when there is none any more
    /// (its staged copy was found wrong, and its file waits for the card).
    public func contentUpload(of copy: UploadRecord) async throws(JournalError) -> UploadRecord? {
        try await reading { db in
            try UploadRecord.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM upload WHERE fingerprint = ? AND endpoint = ? AND bucket = ? AND copyKey = ''"),
                arguments: [copy.fingerprint, copy.endpoint, copy.bucket])
        }
    }

    /// One upload and its acknowledged parts; nil when the journal has no such id.
    public func upload(id: String) async throws(JournalError) -> (UploadRecord, [UploadPartRecord])? {
        // Once per upload run: statements cached, so none is compiled (and authorized) per file.
        try await reading { db in
            guard let record = try UploadRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM upload WHERE id = ?"), arguments: [id])
            else { return nil }
            let parts = try UploadPartRecord.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM uploadPart WHERE upload = ? ORDER BY number"), arguments: [id])
            return (record, parts)
        }
    }

    /// Uploads whose id starts with `prefix` (people type a few digits).
    public func uploads(idPrefix prefix: String) async throws(JournalError) -> [UploadRecord] {
        try await reading { db in
            try UploadRecord.filter(Column("id").like(prefix + "%")).fetchAll(db)
        }
    }

    /// Commits what the state machine says the upload is now. Parts are written as a
    /// difference: `added` are new acknowledgements, `removed` parts no longer count
    /// (reconciliation dropped them, or a restart cleared them).
    public func persist(
        _ snapshot: UploadStateMachine.Snapshot, added: [UploadStateMachine.AcknowledgedPart], removed: [Int],
        lastError: String?, at date: Date = Date()
    ) async throws(JournalError) {
        try await writing { db in
            let id = snapshot.logicalUploadID
            try db.cachedStatement(sql: """
                UPDATE upload SET phase = ?, uploadID = ?, restartCount = ?, lastError = ?, updatedAt = ? WHERE id = ?
                """).execute(arguments: [snapshot.phase, snapshot.uploadID, snapshot.restartCount, lastError, JournalDate(date), id])
            for number in removed {
                try db.cachedStatement(sql: "DELETE FROM uploadPart WHERE upload = ? AND number = ?")
                    .execute(arguments: [id, number])
            }
            for part in added {
                try db.cachedStatement(sql: """
                    INSERT INTO uploadPart (upload, number, etag, size, digest) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(upload, number) DO UPDATE SET etag = excluded.etag, size = excluded.size, digest = excluded.digest
                    """).execute(arguments: [id, part.number, part.etag, part.size, part.digest])
            }
        }
    }

    /// Records why this run's attempt at an upload failed (its phase stays what it was), and
    /// counts the failure: at `quarantineAfter` failed runs in a row the upload is
    /// quarantined. Returns whether it is quarantined now.
    @discardableResult
    public func noteFailure(
        _ message: String, ofUpload id: String, quarantineAfter: Int = .max, at date: Date = Date()
    ) async throws(JournalError) -> Bool {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE upload SET lastError = ?, failures = failures + 1, quarantined = failures + 1 >= ?,
                    updatedAt = ? WHERE id = ?
                    """, arguments: [message, quarantineAfter, JournalDate(date), id])
            return try Bool.fetchOne(db, sql: "SELECT quarantined FROM upload WHERE id = ?", arguments: [id]) ?? false
        }
    }

    /// A staged file of a volume cannot become an object as configured (a key or labels
    /// beyond S3's limits): quarantined at once, with the reason, until a run plans it.
    public func noteNotUploadable(path: CardPath, volumeKey: String, reason: String, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE file SET lastError = ?, failures = failures + 1, quarantined = 1, updatedAt = ?
                    WHERE volumeKey = ? AND path = ?
                    """, arguments: [reason, JournalDate(date), volumeKey, Data(path.bytes)])
        }
    }

    /// The object is in the bucket and verified: the upload is completed, its parts are no
    /// longer needed, and every file carrying this content is uploaded.
    ///
    /// With `releasingStagedCopy`, the same transaction answers whether the content's staged
    /// copy may go now (no other file or upload still waits for it): one journal write per
    /// small file, where a separate look cost a read and a write more. The caller deletes
    /// the copy, then records it with ``noteStagedCopiesRemoved(_:at:)``.
    ///
    /// Completions that come while another is being written are written together, in one
    /// transaction (``GroupCommit``); each returns once its own is committed, not synced:
    /// the caller deletes the staged copy only after a ``sync()``.
    @discardableResult
    public func completeUpload(
        id: String, etag: String?, releasingStagedCopy: Bool = false, at date: Date = Date()
    ) async throws(JournalError) -> Fingerprint? {
        try await completions.submit(Completion(id: id, etag: etag, releasingStagedCopy: releasingStagedCopy, date: date)) {
            batch throws(JournalError) in
            try await self.writing(durable: false) { db in try batch.map { try Self.complete($0, in: db) } }
        }
    }

    /// One upload's completion, as ``completeUpload(id:etag:releasingStagedCopy:at:)`` writes it.
    struct Completion: Sendable {
        var id: String
        var etag: String?
        var releasingStagedCopy: Bool
        var date: Date
    }

    private static func complete(_ completion: Completion, in db: Database) throws -> Fingerprint? {
        let (id, date) = (completion.id, JournalDate(completion.date))
        // One statement writes the completion and reads what the rest needs of the upload.
        guard
            let upload = try Row.fetchOne(
                db.cachedStatement(sql: """
                    UPDATE upload SET phase = 'completed', etag = COALESCE(?, etag), lastError = NULL, uploadID = NULL,
                    failures = 0, quarantined = 0, updatedAt = ?, completedAt = ? WHERE id = ?
                    RETURNING fingerprint, partSize
                    """), arguments: [completion.etag, date, date, id])
        else { return nil }
        // Only a multipart upload has parts journalled.
        if upload["partSize"] as Int64? != nil {
            try db.cachedStatement(sql: "DELETE FROM uploadPart WHERE upload = ?").execute(arguments: [id])
        }
        try db.cachedStatement(sql: """
            UPDATE file SET state = 'uploaded', lastError = NULL, failures = 0, quarantined = 0, updatedAt = ?
            WHERE uploadID = ?
            """).execute(arguments: [date, id])
        guard completion.releasingStagedCopy, let hex = upload["fingerprint"] as String? else { return nil }
        return try String.fetchOne(
            db.cachedStatement(sql: Self.removableCopies(only: true)), arguments: [date, hex]
        ).flatMap(Fingerprint.init(hex:))
    }

    /// Starts an upload again from nothing, to `key`: its object is not where the journal
    /// said (missing, or another content at the key), or its key turned out to hold other
    /// bytes. The server's multipart upload, if any, was aborted by the caller; its parts
    /// are forgotten, and every file carrying this content waits for it again.
    public func restartUpload(id: String, key: String, at date: Date = Date()) async throws(JournalError) -> UploadRecord? {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE upload SET key = ?, phase = 'created', uploadID = NULL, etag = NULL, completedAt = NULL,
                    updatedAt = ? WHERE id = ?
                    """, arguments: [key, JournalDate(date), id])
            try db.execute(sql: "DELETE FROM uploadPart WHERE upload = ?", arguments: [id])
            try db.execute(
                sql: "UPDATE file SET state = 'staged', updatedAt = ? WHERE uploadID = ? AND state = 'uploaded'",
                arguments: [JournalDate(date), id])
            return try UploadRecord.fetchOne(db, key: id)
        }
    }

    /// The staged copy of an upload is gone or no longer matches its fingerprint: its files
    /// go back to pending, so the next ingest of the card copies them again, and the upload
    /// is removed (the caller aborted it on the server first).
    public func restage(uploadID id: String, reason: String, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: """
                    UPDATE file SET state = 'pending', fingerprint = NULL, uploadID = NULL, lastError = ?, updatedAt = ?
                    WHERE uploadID = ?
                    """, arguments: [reason, JournalDate(date), id])
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [id])
        }
    }

    /// Removes an upload from the journal (after `abort`, or for `forget`). Its files stay
    /// staged with no upload: the next ingest of the card plans a new one.
    public func removeUpload(id: String, note: String, at date: Date = Date()) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: "UPDATE file SET lastError = ?, updatedAt = ? WHERE uploadID = ? AND state != 'uploaded'",
                arguments: [note, JournalDate(date), id])
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [id])
        }
    }

    /// Staged copies whose content is verified in the bucket since before `cutoff`, that no
    /// file still waits for: they may be deleted.
    public func stagedCopiesToRemove(completedBefore cutoff: Date) async throws(JournalError) -> [Fingerprint] {
        try await reading { db in
            try String.fetchAll(db, sql: Self.removableCopies(only: false), arguments: [JournalDate(cutoff)])
                .compactMap(Fingerprint.init(hex:))
        }
    }

    /// The staged copies that may go: verified in the bucket at `?1` or before, and waited
    /// for by no file or unfinished upload. With `only`, the one copy of content `?2`, by
    /// its key (after each upload); without, all of them (the rescan's sweep). Every
    /// subquery looks up by content (`+u.phase` keeps SQLite from choosing the phase index,
    /// which holds every completed upload).
    private static func removableCopies(only: Bool) -> String {
        """
        SELECT s.fingerprint FROM stagedObject s
        WHERE \(only ? "s.fingerprint = ?2 AND " : "")s.removedAt IS NULL
        AND EXISTS (SELECT 1 FROM upload u WHERE u.fingerprint = s.fingerprint AND +u.phase = 'completed'
                    AND u.completedAt <= ?1)
        AND NOT EXISTS (SELECT 1 FROM upload u WHERE u.fingerprint = s.fingerprint
                        AND +u.phase NOT IN ('completed', 'aborted'))
        AND NOT EXISTS (SELECT 1 FROM file f WHERE f.fingerprint = s.fingerprint AND f.state != 'uploaded')
        """
    }

    /// Records that these staged copies were deleted.
    public func noteStagedCopiesRemoved(_ fingerprints: [Fingerprint], at date: Date = Date()) async throws(JournalError) {
        guard !fingerprints.isEmpty else { return }
        try await writing(durable: false) { db in
            for fingerprint in fingerprints {
                try db.cachedStatement(sql: "UPDATE stagedObject SET removedAt = ? WHERE fingerprint = ?")
                    .execute(arguments: [JournalDate(date), fingerprint.hex])
            }
        }
    }

    /// Every destination the journal has uploads for, in the order first used: where
    /// `ingest rescan` looks for multipart uploads no journal knows.
    public func uploadTargets() async throws(JournalError) -> [S3Destination] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT endpoint, bucket, region, addressing FROM upload
                    GROUP BY endpoint, bucket ORDER BY MIN(createdAt)
                    """
            ).compactMap { row in
                guard let addressing = S3AddressingStyle(rawValue: row[3]) else { return nil }
                return S3Destination(endpoint: row[0], bucket: row[1], region: row[2], addressing: addressing)
            }
        }
    }

    /// The server's multipart upload ids the journal holds for uploads to this bucket: the
    /// uploads a run started and has not finished (completed uploads forget theirs), and the
    /// streams of files being copied (``StreamRecord``).
    public func multipartUploadIDs(endpoint: String, bucket: String) async throws(JournalError) -> Set<String> {
        try await reading { db in
            Set(try String.fetchAll(
                db,
                sql: """
                    SELECT uploadID FROM upload WHERE endpoint = ?1 AND bucket = ?2 AND uploadID IS NOT NULL
                    UNION SELECT uploadID FROM stream WHERE endpoint = ?1 AND bucket = ?2
                    """,
                arguments: [endpoint, bucket]))
        }
    }

    /// Recently failed or pending uploads, for `ingest status`.
    public func uploadSummary() async throws(JournalError) -> UploadSummary {
        try await reading { db in
            var byPhase: [UploadStateMachine.Phase: JournalSummary.Tally] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT phase, COUNT(*), COALESCE(SUM(size), 0) FROM upload GROUP BY phase") {
                if let phase = UploadStateMachine.Phase(rawValue: row[0]) { byPhase[phase] = .init(count: row[1], bytes: row[2]) }
            }
            let pending = try UploadRecord.filter(!["completed", "aborted"].contains(Column("phase")))
                .order(Column("updatedAt").desc).limit(50).fetchAll(db)
            return UploadSummary(byPhase: byPhase, pending: pending)
        }
    }
}

/// Uploads by phase, and the pending ones, for `ingest status`.
public struct UploadSummary: Sendable, Equatable {
    public var byPhase: [UploadStateMachine.Phase: JournalSummary.Tally]
    /// Pending uploads, most recently updated first (at most 50).
    public var pending: [UploadRecord]
    public static let empty = UploadSummary(byPhase: [:], pending: [])
}
