/// The pages of one listing (`ListObjectsV2`, `ListMultipartUploads`, `ListParts`), kept so
/// that a server cannot keep a client listing forever: each truncated page must name a
/// marker (continuation token) not given before, and at most `limit` pages are read.
///
/// A server that says "more" with the same marker again, or goes round a circle of
/// markers, is stopped at once; one that gives new markers forever is stopped at `limit`.
struct ListingPages {
    /// The listing, as errors name it, e.g. "ListObjectsV2".
    let operation: String
    /// The most pages read.
    let limit: Int
    /// What the error past `limit` adds, e.g. what a person can do about it.
    let pastLimitNote: String
    /// Pages read so far.
    private(set) var count = 0
    /// The hashes of the markers followed. A marker is the server's text, of any size, so
    /// only its hash is held: two different markers share one with odds of 2⁻⁶⁴.
    private var seen: Set<Int> = []

    init(_ operation: String, limit: Int, pastLimitNote: String) {
        self.operation = operation
        self.limit = limit
        self.pastLimitNote = pastLimitNote
    }

    /// Counts a page read.
    mutating func read() { count += 1 }

    /// Whether `limit` pages have been read.
    var isAtLimit: Bool { count >= limit }

    /// Takes `marker` for the next page after a truncated one: an error when it was
    /// followed before, or when `limit` pages have been read.
    mutating func follow(_ marker: some Hashable, status: Int) throws(S3ClientError) {
        guard seen.insert(marker.hashValue).inserted else {
            throw .unexpectedAnswer(
                status: status,
                detail: "\(operation) gave a marker it gave before: the server lists the same pages again and again")
        }
        guard !isAtLimit else { throw pastLimit(status: status) }
    }

    /// The error for a server that still says "more" after `limit` pages.
    func pastLimit(status: Int) -> S3ClientError {
        .unexpectedAnswer(
            status: status, detail: "\(operation) still said there was more after \(limit) pages, \(pastLimitNote)")
    }
}
