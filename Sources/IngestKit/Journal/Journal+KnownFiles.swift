import Foundation
import GRDB

/// What the journal says of one file a scan found.
public struct KnownFile: Sendable, Equatable {
    public var size: Int64
    public var mtime: Int64
    /// As ``FileRecord/inode``.
    public var inode: Int64?
    public var state: FileState
    /// The destination of its upload (`endpoint`, a newline, `bucket`); nil: none planned.
    public var destination: String? = nil

    /// How ``destination`` names `target`.
    public static func destination(of target: S3Destination) -> String { "\(target.endpoint)\n\(target.bucket)" }
}

extension Journal {
    /// What the journal holds of `paths` of a volume, by path: one query on the (volume,
    /// path) index for a batch of files a scan found. A scan asks it a batch at a time, so a
    /// rescan of a card of 100,000 files holds a batch of them, not the card's whole record.
    ///
    /// It blocks: for the scan's own thread, never the concurrency pool.
    public func knownFiles(ofVolume key: String, paths: [CardPath]) throws(JournalError) -> [CardPath: KnownFile] {
        guard !paths.isEmpty else { return [:] }
        do {
            return try database.read { db in
                let marks = Array(repeating: "?", count: paths.count).joined(separator: ", ")
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT f.path, f.size, f.mtime, f.state, f.inode, u.endpoint || char(10) || u.bucket
                        FROM file f LEFT JOIN upload u ON u.id = f.uploadID
                        WHERE f.volumeKey = ? AND f.path IN (\(marks))
                        """)
                var known: [CardPath: KnownFile] = [:]
                let arguments = StatementArguments([key]) + StatementArguments(paths.map { Data($0.bytes) })
                let rows = try Row.fetchCursor(statement, arguments: arguments)
                while let row = try rows.next() {
                    let path: Data = row[0]
                    guard let state = FileState(rawValue: row[3]) else { continue }
                    known[CardPath(bytes: Array(path))] = KnownFile(
                        size: row[1], mtime: row[2], inode: row[4], state: state, destination: row[5])
                }
                return known
            }
        } catch {
            throw JournalError(path: path, operation: .read, reason: "\(error)")
        }
    }
}
