import Foundation
import GRDB

/// A file's journal record, with its upload.
struct CardJournalEntry: Sendable {
    var size: Int64
    var mtime: Int64
    var fingerprint: String?
    var state: FileState
    var lastError: String?
    /// Its object was verified, then found missing or changed while its staged copy was gone.
    var objectLost: String? = nil
    var uploadID: String?
    var upload: UploadRecord?
}

extension Journal {
    /// What the journal holds of `paths` of a volume, each file with the upload that carries
    /// it: two queries on the (volume, path) index and the upload's id, for a batch of files
    /// the check's walk found (as ``knownFiles(ofVolume:paths:)`` is for a scan). The check
    /// asks a batch at a time, so a card of 100,000 files never holds the journal's record
    /// of all of them.
    ///
    /// It blocks: for the check's own thread, never the concurrency pool.
    func verificationEntries(ofVolume key: String, paths: [CardPath]) throws(JournalError) -> [CardPath: CardJournalEntry] {
        guard !paths.isEmpty else { return [:] }
        do {
            return try database.read { db in
                let marks = Array(repeating: "?", count: paths.count).joined(separator: ", ")
                let statement = try db.cachedStatement(sql: """
                    SELECT path, size, mtime, fingerprint, state, lastError, uploadID, objectLost FROM file
                    WHERE volumeKey = ? AND path IN (\(marks))
                    """)
                var entries: [CardPath: CardJournalEntry] = [:]
                var uploadIDs: Set<String> = []
                let arguments = StatementArguments([key]) + StatementArguments(paths.map { Data($0.bytes) })
                let rows = try Row.fetchCursor(statement, arguments: arguments)
                while let row = try rows.next() {
                    let path: Data = row[0]
                    guard let state = FileState(rawValue: row[4]) else { continue }
                    let uploadID: String? = row[6]
                    if let uploadID { uploadIDs.insert(uploadID) }
                    entries[CardPath(bytes: Array(path))] = CardJournalEntry(
                        size: row[1], mtime: row[2], fingerprint: row[3], state: state, lastError: row[5], objectLost: row[7],
                        uploadID: uploadID)
                }
                guard !uploadIDs.isEmpty else { return entries }
                let ids = Array(uploadIDs)
                let uploads = try UploadRecord.fetchAll(
                    db.makeStatement(sql: "SELECT * FROM upload WHERE id IN (\(Array(repeating: "?", count: ids.count).joined(separator: ", ")))"),
                    arguments: StatementArguments(ids))
                let byID = Dictionary(uploads.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
                for (path, entry) in entries {
                    if let id = entry.uploadID { entries[path]?.upload = byID[id] }
                }
                return entries
            }
        } catch {
            throw JournalError(path: path, operation: .read, reason: "\(error)")
        }
    }
}
