import GRDB

/// What the journal could not do: the one error every method of ``Journal`` throws.
///
/// It names the journal's file, what was being done, and what SQLite (or the system) said,
/// so that each caller turns it into its own error in one step (``IngestError/journal(_:)``,
/// `UploadError.journal(_:)`) instead of composing a message by hand.
public struct JournalError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Operation: String, Sendable {
        /// Opening (creating and migrating) the database.
        case open
        /// Taking the lock that serialises opening a new journal.
        case lock
        case read
        case write
    }

    /// The journal's file.
    public let path: String
    public let operation: Operation
    /// SQLite's message and code, or the failed system call.
    public let reason: String
    /// What to do, where it is known better than "fix the state directory's permissions":
    /// set by ``Journal/openForReading(path:)``, which tells a journal it cannot read from
    /// none at all.
    public let remedy: String?

    public init(path: String, operation: Operation, reason: String, remedy: String? = nil) {
        self.path = path
        self.operation = operation
        self.reason = reason
        self.remedy = remedy
    }

    /// "cannot write the journal", the words every message built from it starts with.
    public var failure: String { "cannot \(operation.rawValue) the journal" }

    public var description: String { "\(failure) \(path): \(reason)" }
}

extension IngestError {
    /// A run cannot go on without its journal: each step after depends on what it records.
    public static func journal(_ error: JournalError) -> IngestError {
        if let remedy = error.remedy { return .journalUnreadable(path: error.path, reason: error.reason, remedy: remedy) }
        return .stateUnusable(path: error.path, reason: "\(error.failure): \(error.reason)")
    }
}

extension Journal {
    /// Runs `body` in a read transaction; whatever fails becomes a ``JournalError``.
    func reading<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws(JournalError) -> T {
        do { return try await database.unsafeRead { db in try Self.inTransaction(db, begin: "BEGIN DEFERRED", body) } } catch {
            throw JournalError(path: path, operation: .read, reason: "\(error)")
        }
    }

    /// Runs `body` in a write transaction; whatever fails becomes a ``JournalError``.
    ///
    /// `durable` (the default): the commit is on disk when this returns, and so is every
    /// commit before it (the write-ahead log is synced: `synchronous = FULL` for this
    /// commit). Only writes that nothing irreversible follows pass false (see ``Journal``).
    func writing<T: Sendable>(durable: Bool = true, _ body: @Sendable (Database) throws -> T) async throws(JournalError) -> T {
        do {
            return try await database.writeWithoutTransaction { db in
                guard durable else { return try Self.inTransaction(db, begin: "BEGIN IMMEDIATE", body) }
                try db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute()
                defer { try? db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }
                return try Self.inTransaction(db, begin: "BEGIN IMMEDIATE", body)
            }
        } catch {
            throw JournalError(path: path, operation: .write, reason: "\(error)")
        }
    }

    /// Runs `body` between `begin` and `COMMIT`, rolled back if anything throws. The two are
    /// cached statements: GRDB's own `read` and `write` compile theirs anew each time, and
    /// compiling one (its authorizer builds what the statement touches) cost more than the
    /// small transactions a file makes, a visible share of a card's CPU time. A write begins
    /// IMMEDIATE, so it waits out another process's write at its start (the busy timeout)
    /// rather than failing when it first writes.
    private static func inTransaction<T>(_ db: Database, begin: String, _ body: (Database) throws -> T) throws -> T {
        try db.cachedStatement(sql: begin).execute()
        do {
            let value = try body(db)
            try db.cachedStatement(sql: "COMMIT").execute()
            return value
        } catch {
            try? db.rollback()  // none left open, whatever happened (SQLite may have ended it already)
            throw error
        }
    }
}
