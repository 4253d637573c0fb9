import Foundation
import GRDB

/// Where a file of a card stands.
public enum FileState: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    /// Seen, not yet staged (never tried, or the last try failed: see `lastError`).
    case pending
    /// Copied into staging and fingerprinted; its upload (if any) has not been verified yet.
    case staged
    /// Its content is in the bucket, verified (uploaded now, or found there already).
    case uploaded
    /// Given up by the operator (`ingest forget`): not staged again while its size and time
    /// stay the same.
    case forgotten
}

/// A card (or plain directory) the journal has seen.
public struct VolumeRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord, JournalRecord {
    public static let databaseTableName = "volume"
    public var key: String
    /// How people know it: a whole card by its label (or device), a directory by its path.
    public var name: String
    public var rootPath: String
    public var fsUUID: String?
    public var fsLabel: String?
    public var fsType: String?
    public var deviceNode: String?
    public var serial: String?
    public var vendor: String?
    public var model: String?
    public var bus: String?
    public var firstSeen: Date
    public var lastSeen: Date

    public init(_ identity: VolumeIdentity, seen: Date) {
        key = identity.key
        name = identity.displayName
        rootPath = identity.rootPath
        fsUUID = identity.device?.fsUUID
        fsLabel = identity.device?.fsLabel
        fsType = identity.device?.fsType ?? identity.fsType
        deviceNode = identity.device?.node
        serial = identity.device?.serial
        vendor = identity.device?.vendor
        model = identity.device?.model
        bus = identity.device?.bus
        firstSeen = seen
        lastSeen = seen
    }
}

/// One file of a volume, keyed by (volume, path); the scan matches on (size, mtime).
public struct FileRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord, JournalRecord {
    public static let databaseTableName = "file"
    public var id: Int64?
    public var volumeKey: String
    /// The path's raw bytes (names need not be UTF-8).
    public var path: Data
    public var size: Int64
    /// Nanoseconds since the epoch.
    public var mtime: Int64
    /// The inode the scan saw (its bits as SQLite's signed integer); nil in records from
    /// before v13 until the file is scanned again.
    public var inode: Int64?
    public var fingerprint: String?
    public var state: FileState
    public var lastError: String?
    public var updatedAt: Date
    /// The upload that carries its content (several files with one content share one).
    public var uploadID: String?
    /// Runs in a row in which the file failed (to be staged, or to be planned as an object).
    public var failures: Int = 0
    /// Failed too often, or can never become an object as configured: shown by `status`,
    /// counted by the metrics and in every run's exit status until it succeeds or is forgotten.
    public var quarantined: Bool = false

    public var cardPath: CardPath { CardPath(bytes: Array(path)) }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// A staged copy: one per distinct content, however many files share it.
public struct StagedObjectRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord, JournalRecord {
    public static let databaseTableName = "stagedObject"
    public var fingerprint: String
    public var size: Int64
    public var stagedAt: Date
    /// When the copy was deleted after its upload verified (staging retention).
    public var removedAt: Date?
}

/// The journal: what has been seen, staged (and, later, uploaded), in SQLite.
///
/// WAL mode lets one process write while others read, and a busy timeout makes a second
/// `ingest` wait for a write lock instead of failing.
///
/// A record is on disk before any effect that depends on it: a power cut may undo commits
/// that are only in the page cache, and must never undo one whose effect (a staged copy
/// deleted or reused, a part not sent again, a request to the server that assumes it, exit
/// status 0) has happened. A write is durable by default (``writing(durable:_:)``: the
/// write-ahead log synced at its commit, which makes every commit before it durable too).
/// The writes a card makes per file are not, because nothing irreversible follows them at
/// once: a batch of staged files and their claims (a lost one is staged again, and found by
/// its content), an upload's completion (its staged copy waits for ``sync()`` before it is
/// deleted, ``StagedCopyReleases``) and the record of deleted copies (the sweep finds them
/// gone). A run syncs the journal before it reports its end; a kill never loses a commit.
public final class Journal: Sendable {
    public let path: String
    let database: DatabaseQueue
    /// Uploads' completions, written a batch at a time (``completeUpload(id:etag:releasingStagedCopy:at:)``):
    /// while completions come together, a batch gathers for 5 ms, and the files' slots go on
    /// to the next uploads meanwhile (``ObjectUploader/verified``). A card of small files so
    /// makes a fraction of the transactions, and fewer WAL writes, than one a completion.
    let completions = GroupCommit<Completion, Fingerprint?>(gathering: .milliseconds(5))

    /// Opens the journal at `path`, creating and migrating it as needed.
    public init(path: String, busyTimeout: TimeInterval = 30) throws(JournalError) {
        self.path = path
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // 2 MiB of pages: with 512 KiB, a card of small files re-read journal pages (a
            // pread each) that the indexes' random inserts had pushed out, at a cost in CPU
            // time; the larger cache costs next to no memory.
            try db.execute(sql: "PRAGMA cache_size = -2048")
        }
        // Two processes opening a new journal at once must not both create its tables: the
        // migration runs under an exclusive lock on a file beside it.
        let migrationLock: FileLock
        do { migrationLock = try FileLock.waiting(path: path + ".lock") } catch {
            throw JournalError(path: path, operation: .lock, reason: error.description)
        }
        defer { migrationLock.unlock() }
        do {
            database = try DatabaseQueue(path: path, configuration: configuration)
            try Self.migrator.migrate(database)
        } catch {
            throw JournalError(path: path, operation: .open, reason: "\(error)")
        }
    }

    /// Opens an existing journal without changing anything, for the commands that only read
    /// it (`status`, `scan`, `verify-card`); nil if there is none: nothing was ingested with
    /// this state directory yet.
    ///
    /// "None" is only what the system says of a path that is not there (`ENOENT`). A state
    /// directory this user may not enter, a file where a directory of the path should be, a
    /// directory where the journal should be, or a file SQLite cannot read as a database is an
    /// error with its remedy (``JournalError/remedy``), never taken for an empty journal: a
    /// report of zeros would tell the operator that nothing was ingested.
    public static func openForReading(path: String) throws(JournalError) -> Journal? {
        func refused(_ reason: String, _ remedy: String) -> JournalError {
            JournalError(path: path, operation: .read, reason: reason, remedy: remedy)
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.flatMap { $0.isEmpty ? "/" : $0 } ?? "."
        let elsewhere = "or name another state directory with --state-dir or INGEST_STATE_DIR"
        let info: FileStatus
        do { info = try System.status(path) } catch {
            switch error.errno {
            case .noSuchFileOrDirectory:
                return nil
            case .permissionDenied, .notPermitted:
                throw refused(
                    "\(error.reason): this user (uid \(System.effectiveUserID)) may not read \(directory)",
                    "Run ingest as the user whose state directory it is (the station's, /var/lib/ingest, is root's: "
                        + "sudo ingest …), or let this user read it, \(elsewhere).")
            case .notDirectory:
                throw refused(
                    "\(error.reason): part of \(directory) is a file, not a directory",
                    "--state-dir, INGEST_STATE_DIR and state_dir name a directory: correct the one in use.")
            default:
                throw refused(error.reason, "Check the disk that holds \(directory), \(elsewhere).")
            }
        }
        guard info.isRegularFile else {
            throw refused(
                "it is \(info.type.described), not the journal's database file",
                "Move it aside (the next ingest starts a new journal there, which knows no card), "
                    + "\(elsewhere) if this is not ingest's.")
        }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let database = try DatabaseQueue(path: path, configuration: configuration)
            // SQLite opens lazily: a first read tells a journal from a file that is not one now,
            // not halfway through a report.
            _ = try database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
            return Journal(path: path, database: database)
        } catch {
            throw refused(
                "\(error)",
                "Check that --state-dir, INGEST_STATE_DIR or state_dir names ingest's state directory and that this "
                    + "user may read and write it (the station's, /var/lib/ingest, is root's: sudo ingest …). "
                    + "Keep a damaged journal rather than deleting it: it records what was uploaded.")
        }
    }

    private init(path: String, database: DatabaseQueue) {
        self.path = path
        self.database = database
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: volumes, files, staged objects") { db in
            try db.create(table: "volume") { t in
                t.primaryKey("key", .text)
                t.column("name", .text).notNull()
                t.column("rootPath", .text).notNull()
                t.column("fsUUID", .text)
                t.column("fsLabel", .text)
                t.column("fsType", .text)
                t.column("deviceNode", .text)
                t.column("serial", .text)
                t.column("vendor", .text)
                t.column("model", .text)
                t.column("bus", .text)
                t.column("firstSeen", .datetime).notNull()
                t.column("lastSeen", .datetime).notNull()
            }
            try db.create(table: "stagedObject") { t in
                t.primaryKey("fingerprint", .text)
                t.column("size", .integer).notNull()
                t.column("stagedAt", .datetime).notNull()
            }
            try db.create(table: "file") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("volumeKey", .text).notNull().references("volume", onDelete: .cascade)
                t.column("path", .blob).notNull()
                t.column("size", .integer).notNull()
                t.column("mtime", .integer).notNull()
                t.column("fingerprint", .text).references("stagedObject", onDelete: .setNull)
                t.column("state", .text).notNull()
                t.column("lastError", .text)
                t.column("updatedAt", .datetime).notNull()
                t.uniqueKey(["volumeKey", "path"])
            }
            try db.create(index: "file_by_state", on: "file", columns: ["state"])
            try db.create(index: "file_by_fingerprint", on: "file", columns: ["fingerprint"])
        }
        migrator.registerMigration("v2: uploads and their parts") { db in
            try db.create(table: "upload") { t in
                t.primaryKey("id", .text)
                t.column("endpoint", .text).notNull()
                t.column("bucket", .text).notNull()
                t.column("region", .text).notNull()
                t.column("addressing", .text).notNull()
                t.column("key", .text).notNull()
                t.column("fingerprint", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("partSize", .integer)
                t.column("checksum", .text).notNull()
                t.column("phase", .text).notNull()
                t.column("uploadID", .text)
                t.column("restartCount", .integer).notNull()
                t.column("headers", .text).notNull()
                t.column("volumeKey", .text)
                t.column("sourcePath", .blob)
                t.column("etag", .text)
                t.column("lastError", .text)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
                t.column("completedAt", .datetime)
                t.uniqueKey(["endpoint", "bucket", "fingerprint"])
            }
            try db.create(index: "upload_by_phase", on: "upload", columns: ["phase"])
            try db.create(table: "uploadPart") { t in
                t.column("upload", .text).notNull().references("upload", onDelete: .cascade)
                t.column("number", .integer).notNull()
                t.column("etag", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("digest", .text)
                t.primaryKey(["upload", "number"])
            }
            try db.alter(table: "file") { t in
                t.add(column: "uploadID", .text).references("upload", onDelete: .setNull)
            }
            try db.alter(table: "stagedObject") { t in
                t.add(column: "removedAt", .datetime)
            }
        }
        migrator.registerMigration("v3: the last rescan") { db in
            try db.create(table: "rescan") { t in
                t.primaryKey("id", .integer)
                t.column("lastRunAt", .datetime).notNull()
                t.column("lastExitStatus", .integer).notNull()
                t.column("lastSuccessAt", .datetime)
            }
        }
        migrator.registerMigration("v4: the orphan sweep") { db in
            try db.create(table: "orphanSweep") { t in
                t.primaryKey("id", .integer)
                t.column("lastRunAt", .datetime).notNull()
                t.column("lastCompleteAt", .datetime)
                t.column("lastAborted", .integer).notNull()
                t.column("lastYoung", .integer).notNull()
                t.column("lastFailures", .integer).notNull()
                t.column("abortedTotal", .integer).notNull()
            }
        }
        migrator.registerMigration("v5: failures counted, quarantine") { db in
            for table in ["file", "upload"] {
                try db.alter(table: table) { t in
                    t.add(column: "failures", .integer).notNull().defaults(to: 0)
                    t.add(column: "quarantined", .boolean).notNull().defaults(to: false)
                }
                try db.create(index: "\(table)_quarantined", on: table, columns: ["quarantined"], condition: Column("quarantined") == true)
            }
        }
        // What each upload's end asks by content and by upload: without these, completing an
        // upload scanned every file and deciding its staged copy's fate every upload, so a
        // card of n files cost n² row reads.
        migrator.registerMigration("v6: per-file work without table scans") { db in
            try db.create(index: "file_by_upload", on: "file", columns: ["uploadID"])
            try db.create(index: "upload_by_fingerprint", on: "upload", columns: ["fingerprint"])
        }
        // The metrics file is rewritten after every card: its totals must come from indexes,
        // and read only the rows not done yet, never every file or upload of all time.
        migrator.registerMigration("v7: the last card, and totals read from indexes") { db in
            try db.drop(index: "file_by_state")
            try db.create(index: "file_by_state_size", on: "file", columns: ["state", "size"])
            try db.drop(index: "upload_by_phase")
            try db.create(index: "upload_by_phase_completion", on: "upload", columns: ["phase", "completedAt"])
            try db.create(
                index: "stagedObject_held", on: "stagedObject", columns: ["size"], condition: Column("removedAt") == nil)
            try db.create(table: "cardRun") { t in
                t.primaryKey("id", .integer)
                t.column("lastEndedAt", .datetime).notNull()
                t.column("lastExitStatus", .integer).notNull()
                t.column("lastSeconds", .double).notNull()
                t.column("lastStaged", .integer).notNull()
                t.column("lastStagedBytes", .integer).notNull()
                t.column("lastUploaded", .integer).notNull()
                t.column("lastUploadedBytes", .integer).notNull()
                t.column("lastFailed", .integer).notNull()
                t.column("cardsTotal", .integer).notNull()
            }
        }
        // The upload queue of a card's run is the journal (``Journal/pendingUploadPage(ofVolume:after:limit:)``):
        // its pending uploads are read a page at a time, in the order they were planned, with
        // the parts' CRC32Cs the stager computed from the card's bytes.
        migrator.registerMigration("v8: the journal as the upload queue") { db in
            try db.alter(table: "upload") { t in t.add(column: "cardChecksums", .blob) }
            try db.execute(sql: """
                CREATE INDEX upload_pending_by_volume ON upload(volumeKey) WHERE phase NOT IN ('completed', 'aborted')
                """)
        }
        // An upload is found by its content (endpoint, bucket, fingerprint) and, to decide a
        // staged copy's fate, by its fingerprint alone: one unique index led by the
        // fingerprint serves both, where the table's constraint and a second index each took
        // a write at a random place per upload. SQLite cannot drop a table's constraint, so
        // the table is rebuilt, keeping each row's rowid (its place in the upload queue).
        migrator.registerMigration("v9: one index of uploads by content") { db in
            let columns = try db.columns(in: "upload").map { "\"\($0.name)\"" }.joined(separator: ", ")
            try db.execute(sql: """
                CREATE TABLE upload_v9 (
                  "id" TEXT PRIMARY KEY NOT NULL, "endpoint" TEXT NOT NULL, "bucket" TEXT NOT NULL, "region" TEXT NOT NULL,
                  "addressing" TEXT NOT NULL, "key" TEXT NOT NULL, "fingerprint" TEXT NOT NULL, "size" INTEGER NOT NULL,
                  "partSize" INTEGER, "checksum" TEXT NOT NULL, "phase" TEXT NOT NULL, "uploadID" TEXT,
                  "restartCount" INTEGER NOT NULL, "headers" TEXT NOT NULL, "volumeKey" TEXT, "sourcePath" BLOB,
                  "etag" TEXT, "lastError" TEXT, "createdAt" DATETIME NOT NULL, "updatedAt" DATETIME NOT NULL,
                  "completedAt" DATETIME, "failures" INTEGER NOT NULL DEFAULT 0, "quarantined" BOOLEAN NOT NULL DEFAULT 0,
                  "cardChecksums" BLOB);
                INSERT INTO upload_v9 (rowid, \(columns)) SELECT rowid, \(columns) FROM upload;
                DROP TABLE upload;
                ALTER TABLE upload_v9 RENAME TO upload;
                CREATE UNIQUE INDEX upload_by_content ON upload(fingerprint, endpoint, bucket);
                CREATE INDEX upload_by_phase_completion ON upload(phase, completedAt);
                CREATE INDEX upload_pending_by_volume ON upload(volumeKey) WHERE phase NOT IN ('completed', 'aborted');
                CREATE INDEX upload_quarantined ON upload(quarantined) WHERE quarantined = 1;
                """)
        }
        // A large file's parts sent while it is copied belong to no upload until the file is
        // staged and claimed: each stream and its acknowledged parts are journalled as they
        // happen, so that a kill or a power cut before the claim leaves an upload to adopt
        // (``Journal/adoptableStreams()``), not parts that nothing will ever complete.
        migrator.registerMigration("v10: streams of files being copied, the sync point") { db in
            try db.execute(sql: """
                CREATE TABLE stream (
                  "id" INTEGER PRIMARY KEY NOT NULL, "volumeKey" TEXT NOT NULL, "path" BLOB NOT NULL,
                  "size" INTEGER NOT NULL, "mtime" INTEGER NOT NULL, "endpoint" TEXT NOT NULL, "bucket" TEXT NOT NULL,
                  "region" TEXT NOT NULL, "addressing" TEXT NOT NULL, "key" TEXT NOT NULL, "uploadID" TEXT NOT NULL,
                  "partSize" INTEGER NOT NULL, "headers" TEXT NOT NULL, "createdAt" DATETIME NOT NULL);
                CREATE TABLE streamPart (
                  "stream" INTEGER NOT NULL REFERENCES stream(id) ON DELETE CASCADE, "number" INTEGER NOT NULL,
                  "etag" TEXT NOT NULL, "size" INTEGER NOT NULL, "digest" TEXT, PRIMARY KEY ("stream", "number"));
                CREATE TABLE syncPoint ("id" INTEGER PRIMARY KEY NOT NULL CHECK ("id" = 1), "count" INTEGER NOT NULL);
                """)
        }
        // Every file of a card gets its own object: a content already planned for the bucket
        // is copied there by the server (``UploadRecord/copyKey``), so an upload is unique by
        // its content and its copy key, '' for the one that sends the bytes; lookups by
        // content alone still lead the index. The card's skips that lose content (a folder
        // too deep, one that cannot be read) are journalled per card, for `status` and the
        // card's verdict, each scan replacing the last's.
        migrator.registerMigration("v11: a copy per file of a known content, a card's lost skips") { db in
            try db.execute(sql: """
                ALTER TABLE upload ADD COLUMN "copyKey" TEXT NOT NULL DEFAULT '';
                DROP INDEX upload_by_content;
                CREATE UNIQUE INDEX upload_by_content ON upload(fingerprint, endpoint, bucket, copyKey);
                CREATE TABLE cardSkip (
                  "volumeKey" TEXT NOT NULL REFERENCES volume(key) ON DELETE CASCADE, "path" BLOB NOT NULL,
                  "reason" TEXT NOT NULL, "code" TEXT NOT NULL, PRIMARY KEY ("volumeKey", "path"));
                """)
        }
        // A card's chain of custody: its verdict as its last run, resume or rescan left it
        // (read by the metrics without a look at its files); each run that adds verified files of a card to the
        // bucket writes an ASC MHL generation listing them (``CustodyGeneration``), beside
        // the card's objects in its folder (``VolumeRecord/cardFolder``); each file records
        // the generation that lists it, and the files no generation lists yet are found by
        // a partial index, so a run lists only its own.
        migrator.registerMigration("v12: the cards' ASC MHL generations") { db in
            try db.execute(sql: """
                ALTER TABLE volume ADD COLUMN "cardFolder" TEXT;
                ALTER TABLE volume ADD COLUMN "safeToErase" BOOLEAN;
                ALTER TABLE volume ADD COLUMN "verdict" TEXT;
                ALTER TABLE volume ADD COLUMN "copyUnfinished" BOOLEAN NOT NULL DEFAULT 0;
                ALTER TABLE file ADD COLUMN "manifestGeneration" INTEGER;
                CREATE INDEX file_unlisted ON file(volumeKey) WHERE manifestGeneration IS NULL AND state = 'uploaded';
                CREATE TABLE custodyGeneration (
                  "volumeKey" TEXT NOT NULL REFERENCES volume(key) ON DELETE CASCADE, "number" INTEGER NOT NULL,
                  "endpoint" TEXT NOT NULL, "bucket" TEXT NOT NULL, "region" TEXT NOT NULL, "addressing" TEXT NOT NULL,
                  "folder" TEXT NOT NULL, "fileName" TEXT NOT NULL, "c4" TEXT NOT NULL, "files" INTEGER NOT NULL,
                  "createdAt" DATETIME NOT NULL, "uploadedAt" DATETIME, "chainETag" TEXT,
                  PRIMARY KEY ("volumeKey", "endpoint", "bucket", "number"));
                """)
        }
        // A file's inode as scanned: a present card's file replaced by another one of the same
        // size and modification time (a copy made with `cp -p`) is a change to its verdict.
        migrator.registerMigration("v13: a file's inode as scanned") { db in
            try db.execute(sql: #"ALTER TABLE file ADD COLUMN "inode" INTEGER"#)
        }
        // The S3 gateways of each destination (``Journal/nameDestination(_:)``): a
        // destination is named by one gateway, the `endpoint` column everywhere, and every
        // gateway listed with it is recorded under that name, so that its uploads go on
        // through whichever answers. The destinations of an older journal are their own
        // gateway. `cluster` is the bucket's identity once a gateway has shown it.
        migrator.registerMigration("v14: the gateways of each destination") { db in
            try db.execute(sql: """
                CREATE TABLE gateway (
                  "url" TEXT NOT NULL, "bucket" TEXT NOT NULL, "endpoint" TEXT NOT NULL, "cluster" TEXT,
                  PRIMARY KEY ("url", "bucket"));
                INSERT OR IGNORE INTO gateway (url, bucket, endpoint)
                  SELECT DISTINCT endpoint, bucket, endpoint FROM upload WHERE endpoint NOT LIKE 'tus+%';
                INSERT OR IGNORE INTO gateway (url, bucket, endpoint)
                  SELECT DISTINCT endpoint, bucket, endpoint FROM stream WHERE endpoint NOT LIKE 'tus+%';
                INSERT OR IGNORE INTO gateway (url, bucket, endpoint)
                  SELECT DISTINCT endpoint, bucket, endpoint FROM custodyGeneration WHERE endpoint NOT LIKE 'tus+%';
                """)
        }
        // What identifies a verified object's bytes, kept with its completion
        // (``StoredObject``): the ETag (the column of v2, until now filled only by the bucket
        // check's first look), the server's checksum and the version id where given.
        // `etagLearned`: the ETag was learned by a later look, not recorded when the object
        // was made; every ETag of an older journal is such. `foreignObject`: objects at our
        // keys proven not ours (another ETag than the one recorded); a look that finds one
        // never takes it for ours, whatever metadata it carries. `file.objectLost`: why a
        // verified file's object went missing or changed while its staged copy was gone (the
        // file waits for its card): `verify-card` says so as an object's problem.
        migrator.registerMigration("v15: the identity of each verified object, objects proven foreign") { db in
            try db.execute(sql: """
                ALTER TABLE upload ADD COLUMN "objectChecksum" TEXT;
                ALTER TABLE upload ADD COLUMN "versionID" TEXT;
                ALTER TABLE upload ADD COLUMN "etagLearned" BOOLEAN NOT NULL DEFAULT 0;
                ALTER TABLE file ADD COLUMN "objectLost" TEXT;
                UPDATE upload SET etagLearned = 1 WHERE etag IS NOT NULL;
                CREATE TABLE foreignObject (
                  "endpoint" TEXT NOT NULL, "bucket" TEXT NOT NULL, "key" TEXT NOT NULL, "etag" TEXT NOT NULL,
                  "foundAt" DATETIME NOT NULL, PRIMARY KEY ("endpoint", "bucket", "key", "etag"));
                """)
        }
        // Reading objects back (`verify-card --read-back`, `[rescan] read_back_bytes`): when
        // each upload's object was last read back and its bytes hashed to its fingerprint (no
        // row: never, or made again since), each night taking those read back longest ago
        // first. An object read back as other bytes is recorded as foreign (v15).
        migrator.registerMigration("v16: objects read back") { db in
            try db.execute(sql: """
                CREATE TABLE readBack (
                  "upload" TEXT PRIMARY KEY NOT NULL REFERENCES upload(id) ON DELETE CASCADE, "readAt" DATETIME NOT NULL);
                """)
        }
        // A card's verdict belongs to a destination (``CardTally/destination``), and a file links
        // one upload (`file.uploadID`): ingested into another bucket, it links that bucket's, and
        // its object in the first would be forgotten. `formerUpload` keeps, per file, each
        // destination it left while its content stayed: the upload there, the generation of the
        // card's history there that lists it, and why its object there was lost. Two triggers
        // keep it, so that every statement that moves a file keeps it alike: a file leaving an
        // upload for another destination (or for none, restaged) records what it left, and one
        // coming back to a destination takes its row out; a file whose content changed (size or
        // modification time, or a fingerprint no kept upload holds) keeps no row but a lost
        // object's. An older journal's earlier destinations are found by the upload each file
        // brought there (its `sourcePath`), unlisted, since no record says which generation
        // listed them.
        migrator.registerMigration("v17: file destinations") { db in
            try db.execute(sql: """
                CREATE TABLE formerUpload (
                  "file" INTEGER NOT NULL REFERENCES file(id) ON DELETE CASCADE, "endpoint" TEXT NOT NULL,
                  "bucket" TEXT NOT NULL, "upload" TEXT REFERENCES upload(id) ON DELETE SET NULL,
                  "manifestGeneration" INTEGER, "objectLost" TEXT, PRIMARY KEY ("file", "endpoint", "bucket"));
                CREATE INDEX formerUpload_by_upload ON formerUpload(upload) WHERE upload IS NOT NULL;
                INSERT OR IGNORE INTO formerUpload (file, endpoint, bucket, upload)
                  SELECT f.id, u.endpoint, u.bucket, u.id FROM upload u
                  JOIN file f ON f.volumeKey = u.volumeKey AND f.path = u.sourcePath AND f.fingerprint = u.fingerprint
                  WHERE u.phase = 'completed' AND u.id IS NOT f.uploadID
                  AND NOT EXISTS (
                    SELECT 1 FROM upload c WHERE c.id = f.uploadID AND c.endpoint = u.endpoint AND c.bucket = u.bucket);
                CREATE TRIGGER file_moves_upload AFTER UPDATE OF uploadID ON file WHEN OLD.uploadID IS NOT NEW.uploadID
                BEGIN
                  DELETE FROM formerUpload WHERE file = NEW.id
                    AND (endpoint, bucket) IN (SELECT endpoint, bucket FROM upload WHERE id = NEW.uploadID);
                  INSERT OR REPLACE INTO formerUpload (file, endpoint, bucket, upload, manifestGeneration, objectLost)
                    SELECT NEW.id, u.endpoint, u.bucket, u.id, OLD.manifestGeneration, NEW.objectLost FROM upload u
                    WHERE u.id = OLD.uploadID AND OLD.size = NEW.size AND OLD.mtime = NEW.mtime
                    AND (NEW.fingerprint IS NULL OR NEW.fingerprint = u.fingerprint)
                    AND NOT EXISTS (
                      SELECT 1 FROM upload n WHERE n.id = NEW.uploadID AND n.endpoint = u.endpoint AND n.bucket = u.bucket);
                END;
                CREATE TRIGGER file_content_changes AFTER UPDATE OF size, mtime, fingerprint ON file
                BEGIN
                  DELETE FROM formerUpload WHERE file = NEW.id AND (
                    OLD.size != NEW.size OR OLD.mtime != NEW.mtime
                    OR (NEW.fingerprint IS NOT NULL AND upload IS NOT NULL AND NOT EXISTS (
                      SELECT 1 FROM upload u WHERE u.id = formerUpload.upload AND u.fingerprint = NEW.fingerprint)));
                END;
                """)
        }
        return migrator
    }

    /// Makes every commit so far durable: one small write (the `syncPoint` row), committed
    /// with the write-ahead log synced. What a batch of non-durable writes allows (deleting
    /// the staged copies of uploads whose completions it holds, exit status 0) follows it.
    public func sync() async throws(JournalError) {
        try await writing { db in
            try db.cachedStatement(sql: """
                INSERT INTO syncPoint (id, count) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET count = count + 1
                """).execute()
        }
    }

    /// Records that a volume was seen now (inserting it the first time); true the first time,
    /// when the journal holds none of its files.
    @discardableResult
    public func noteVolume(_ identity: VolumeIdentity, at date: Date = Date()) async throws(JournalError) -> Bool {
        try await writing { db in
            var record = VolumeRecord(identity, seen: date)
            let existing = try VolumeRecord.fetchOne(db, key: identity.key)
            if let existing { record.firstSeen = existing.firstSeen }
            try record.save(db)
            return existing == nil
        }
    }

    /// When the journal first saw the volume; nil if it never did.
    public func firstSeen(ofVolume key: String) async throws(JournalError) -> Date? {
        try await reading { db in
            try JournalDate.fetchOne(db, sql: "SELECT firstSeen FROM volume WHERE key = ?", arguments: [key])?.date
        }
    }

    /// What the journal knows of a volume's files, by path, all at once. A scan never asks
    /// this (a card of 100,000 files would hold every record): it asks
    /// ``knownFiles(ofVolume:paths:)`` a batch of paths at a time.
    public func files(ofVolume key: String) async throws(JournalError) -> [CardPath: FileRecord] {
        try await reading { db in
            let records = try FileRecord.filter(Column("volumeKey") == key).fetchAll(db)
            return Dictionary(records.map { ($0.cardPath, $0) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Records what staging did, in one transaction: staged files with their staged objects,
    /// and failed files, which stay pending with the reason and one more failure counted; a
    /// file that failed `quarantineAfter` runs in a row is quarantined.
    public func record(
        _ outcomes: [StageOutcome], volumeKey: String, quarantineAfter: Int = .max, at date: Date = Date()
    ) async throws(JournalError) {
        guard !outcomes.isEmpty else { return }
        try await writing(durable: false) { db in
            try Self.record(db, outcomes, volumeKey: volumeKey, quarantineAfter: quarantineAfter, at: date)
        }
    }

    static func record(
        _ db: Database, _ outcomes: [StageOutcome], volumeKey: String, quarantineAfter: Int, at date: Date
    ) throws {
        for outcome in outcomes {
            switch outcome {
            case .staged(let staged):
                try db.cachedStatement(sql: """
                    INSERT INTO stagedObject (fingerprint, size, stagedAt) VALUES (?, ?, ?)
                    ON CONFLICT(fingerprint) DO NOTHING
                    """).execute(arguments: [staged.fingerprint.hex, staged.file.size, JournalDate(date)])
                try Self.upsertFile(
                    db, volumeKey: volumeKey, file: staged.file, fingerprint: staged.fingerprint.hex, state: .staged,
                    error: nil, quarantineAfter: quarantineAfter, at: date)
            case let .failed(file, failure):
                try Self.upsertFile(
                    db, volumeKey: volumeKey, file: file, fingerprint: nil, state: .pending, error: failure.description,
                    quarantineAfter: quarantineAfter, at: date)
            }
        }
    }

    /// Inserts or updates a file; an error counts one failure more (quarantined at
    /// `quarantineAfter` in a row), no error clears the count. A file whose content is not
    /// the one it had (changed on the card, or not read this time) leaves the upload of its
    /// old content: that upload's completion must not count the new content as uploaded.
    private static func upsertFile(
        _ db: Database, volumeKey: String, file: ScannedFile, fingerprint: String?, state: FileState, error: String?,
        quarantineAfter: Int, at date: Date
    ) throws {
        let failed = error != nil
        try db.cachedStatement(sql: """
            INSERT INTO file (volumeKey, path, size, mtime, inode, fingerprint, state, lastError, updatedAt, failures, quarantined)
            VALUES (?1, ?2, ?3, ?4, ?11, ?5, ?6, ?7, ?8, ?9, ?9 >= ?10)
            ON CONFLICT(volumeKey, path) DO UPDATE SET
              size = excluded.size, mtime = excluded.mtime, inode = COALESCE(excluded.inode, file.inode),
              fingerprint = excluded.fingerprint,
              uploadID = CASE WHEN file.fingerprint IS excluded.fingerprint THEN file.uploadID END,
              state = excluded.state, lastError = excluded.lastError, updatedAt = excluded.updatedAt,
              objectLost = CASE WHEN excluded.state = 'pending' THEN file.objectLost END,
              failures = CASE WHEN ?9 = 0 THEN 0 ELSE file.failures + 1 END,
              quarantined = CASE WHEN ?9 = 0 THEN 0 ELSE file.failures + 1 >= ?10 END
            """).execute(arguments: [
                volumeKey, Data(file.path.bytes), file.size, file.mtime, fingerprint, state, error, JournalDate(date),
                failed ? 1 : 0, quarantineAfter, file.inode.map { Int64(bitPattern: $0) },
            ])
    }

    /// Counts and bytes by state, for `ingest status`.
    public func summary() async throws(JournalError) -> JournalSummary {
        try await reading { db in
            var byState: [FileState: JournalSummary.Tally] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*), COALESCE(SUM(size), 0) FROM file GROUP BY state") {
                if let state = FileState(rawValue: row[0]) {
                    byState[state] = .init(count: row[1], bytes: row[2])
                }
            }
            // Copies deleted after their uploads verified (staging retention) are no longer held.
            let objects = try Row.fetchOne(
                db, sql: "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM stagedObject WHERE removedAt IS NULL")!
            let volumes = try VolumeRecord.order(Column("lastSeen").desc).fetchAll(db)
            let needingCard = try FileRecord.filter(Column("state") == FileState.pending).order(Column("updatedAt").desc)
                .limit(20).fetchAll(db)
            let failures = try FileRecord.filter(Column("lastError") != nil && Column("state") != FileState.pending)
                .order(Column("updatedAt").desc).limit(20).fetchAll(db)
            return JournalSummary(
                files: byState, stagedObjects: .init(count: objects[0], bytes: objects[1]), volumes: volumes,
                needingCard: needingCard, recentFailures: failures)
        }
    }
}

/// What `ingest status` shows.
public struct JournalSummary: Sendable, Equatable {
    public struct Tally: Sendable, Equatable, Codable {
        public var count: Int
        public var bytes: Int64
        public static let zero = Tally(count: 0, bytes: 0)
    }
    /// What a journal that does not exist yet holds.
    public static let empty = JournalSummary(files: [:], stagedObjects: .zero, volumes: [], needingCard: [], recentFailures: [])
    public var files: [FileState: Tally]
    /// Staged copies held in the staging area now (those deleted after their upload are not).
    public var stagedObjects: Tally
    public var volumes: [VolumeRecord]
    /// Files that need their card again, newest first (at most 20): pending, because their
    /// copy failed, or because their staged copy was lost before their object verified.
    public var needingCard: [FileRecord]
    /// Other files whose last attempt failed (staged, their upload not planned), newest
    /// first (at most 20).
    public var recentFailures: [FileRecord]
}
