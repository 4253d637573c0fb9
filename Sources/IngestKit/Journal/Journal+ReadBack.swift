import Foundation
import GRDB

/// A verified object the nightly read-back may read: a file of a recent card, its upload
/// completed, and when its object was last read back.
public struct ReadBackCandidate: Sendable, Equatable {
    public var uploadID: String
    public var key: String
    public var size: Int64
    /// The fingerprint the bytes must hash to (the card's file, as staged).
    public var fingerprint: String
    public var target: S3Destination
    /// The card it came from, and one of its files that the object holds.
    public var volumeKey: String
    public var cardName: String
    public var path: CardPath
    /// When its bytes were last read back and matched; nil: never.
    public var readBackAt: Date?

    public init(
        uploadID: String, key: String, size: Int64, fingerprint: String, target: S3Destination, volumeKey: String,
        cardName: String, path: CardPath, readBackAt: Date?
    ) {
        self.uploadID = uploadID
        self.key = key
        self.size = size
        self.fingerprint = fingerprint
        self.target = target
        self.volumeKey = volumeKey
        self.cardName = cardName
        self.path = path
        self.readBackAt = readBackAt
    }
}

/// Which objects one night's read-back takes: offered in rotation order (never read back
/// first, then read back longest ago, then the oldest uploads), it takes them while their
/// bytes fit the budget and stops at the first that does not, so that an object is never
/// passed over for smaller ones behind it and successive nights cover every object. An
/// object larger than the whole budget, when it comes first, is taken alone: read on its
/// night, over the budget, rather than never.
public struct ReadBackSelection: Sendable {
    public let budget: Int64
    public private(set) var picked: [ReadBackCandidate] = []
    public private(set) var bytes: Int64 = 0
    /// No further candidate is taken.
    public private(set) var isFull: Bool

    public init(budget: Int64) {
        self.budget = budget
        isFull = budget <= 0
    }

    /// Offers the next candidate in rotation order; returns whether it was taken.
    @discardableResult
    public mutating func offer(_ candidate: ReadBackCandidate) -> Bool {
        guard !isFull else { return false }
        if picked.isEmpty, candidate.size > budget {
            picked.append(candidate)
            bytes = candidate.size
            isFull = true
            return true
        }
        guard bytes.addingSaturating(candidate.size) <= budget else {
            isFull = true
            return false
        }
        picked.append(candidate)
        bytes += candidate.size
        isFull = bytes >= budget
        return true
    }
}

extension Journal {
    /// The objects of the cards seen since `date` that one night's read-back of `budget`
    /// bytes takes (``ReadBackSelection``): verified files' completed uploads, each once,
    /// never read back first, then read back longest ago, then completed longest ago. The
    /// rows are read as a cursor and the reading stops when the budget is full, so the
    /// memory is that of the objects taken.
    public func readBackCandidates(seenSince date: Date, budget: Int64) async throws(JournalError) -> [ReadBackCandidate] {
        guard budget > 0 else { return [] }
        return try await reading { db in
            var selection = ReadBackSelection(budget: budget)
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT u.id, u.key, u.size, u.fingerprint, u.endpoint, u.bucket, u.region, u.addressing, r.readAt,
                      f.volumeKey, v.name, f.path
                    FROM upload u JOIN file f ON f.uploadID = u.id JOIN volume v ON v.key = f.volumeKey
                      LEFT JOIN readBack r ON r.upload = u.id
                    WHERE u.phase = 'completed' AND f.state = 'uploaded' AND v.lastSeen >= ?
                    GROUP BY u.id
                    ORDER BY r.readAt IS NOT NULL, r.readAt, u.completedAt, u.id
                    """,
                arguments: [JournalDate(date)])
            while !selection.isFull, let row = try rows.next() {
                guard let addressing = S3AddressingStyle(rawValue: row[7]) else { continue }
                selection.offer(ReadBackCandidate(
                    uploadID: row[0], key: row[1], size: row[2], fingerprint: row[3],
                    target: S3Destination(endpoint: row[4], bucket: row[5], region: row[6], addressing: addressing),
                    volumeKey: row[9], cardName: row[10], path: CardPath(bytes: Array(row[11] as Data)),
                    readBackAt: (row[8] as JournalDate?)?.date))
            }
            return selection.picked
        }
    }

    /// The object of the upload was read back now, and its bytes hashed to its fingerprint.
    public func noteReadBack(ofUpload id: String, at date: Date = Date()) async throws(JournalError) {
        try await writing(durable: false) { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO readBack (upload, readAt) VALUES (?, ?)", arguments: [id, JournalDate(date)])
        }
    }
}
