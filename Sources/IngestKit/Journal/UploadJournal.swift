// The journal's uploads, as rows: one per object to make (`UploadRecord`) and one per part the
// server acknowledged. What the journal does with them is in the `UploadJournal+…` files:
// claims, queue pages, progress, lookups, staged copies.

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
    /// The object's ETag once completed, as the look that verified it found it (or, for a
    /// completion older than journal v15, learned by a later look: ``etagLearned``).
    public var etag: String?
    /// The rest of the object's identity recorded with its completion (``recordedObject``),
    /// by ``Journal/completeUpload(id:object:releasingStagedCopy:at:)``.
    public var objectChecksum: String? = nil
    public var versionID: String? = nil
    public var etagLearned = false
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

    /// What identifies its object's bytes, as recorded (``StoredObject``); nil until completed
    /// with one.
    public var recordedObject: StoredObject? {
        etag.map { StoredObject(etag: $0, size: size, checksum: objectChecksum, versionID: versionID) }
    }

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
        objectChecksum = try row.decode(forColumn: "objectChecksum")
        versionID = try row.decode(forColumn: "versionID")
        etagLearned = try row.decode(forColumn: "etagLearned")
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
        "completedAt", "failures", "quarantined", "cardChecksums", "copyKey", "objectChecksum", "versionID", "etagLearned",
    ]
    /// Built once: the claim runs it for every file of a card.
    private static let insertUnlessPlannedSQL =
        "INSERT INTO upload (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
        + " ON CONFLICT(fingerprint, endpoint, bucket, copyKey) DO NOTHING"

    private var columnValues: [(any DatabaseValueConvertible)?] {
        [
            id, endpoint, bucket, region, addressing, key, fingerprint, size, partSize, checksum, phase,
            uploadID, restartCount, headers, volumeKey, sourcePath, etag, lastError, JournalDate(createdAt), JournalDate(updatedAt),
            completedAt.map(JournalDate.init), failures, quarantined, cardChecksums, copyKey, objectChecksum, versionID,
            etagLearned,
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
