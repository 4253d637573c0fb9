/// How far a destination follows a listing of its unfinished uploads before it stops, so that
/// a server answering truncated page after truncated page is not followed forever, and what
/// is kept stays bounded whatever it sends.
public struct ListingBound: Sendable, Equatable {
    /// Pages asked for, at most.
    public var pages: Int
    /// Uploads kept, at most.
    public var kept: Int

    public init(pages: Int, kept: Int) {
        self.pages = pages
        self.kept = kept
    }
}
