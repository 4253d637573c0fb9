/// What a destination can do beyond writing an object (whole, or in parts it then completes),
/// reading it back and abandoning an unfinished upload: the callers consult these before an
/// operation only some destinations have, instead of assuming S3, which has them all.
public struct StoreCapabilities: OptionSet, Sendable {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// It lists what it holds under a prefix: its objects
    /// (``ObjectStore/listObjects(prefix:page:)``) and its unfinished uploads
    /// (``ObjectStore/listUploads(prefix:keeping:)``). The bucket check, the orphan sweep and
    /// `ingest ls` need it; without it they pass the destination by.
    public static let listing = StoreCapabilities(rawValue: 1 << 0)
    /// It keeps tags on an object (``ObjectStore/getObjectTagging(key:)``), where the
    /// fingerprint of an object whose parts went out while its file was read is recorded.
    public static let tagging = StoreCapabilities(rawValue: 1 << 1)
    /// It makes an object from another it holds, the bytes never crossing the network
    /// (``ObjectStore/copyObject(key:from:sourceETag:headers:)``): a file whose content is
    /// there already gets its own object so. Without it, that file counts as the upload of its
    /// content already made (dedupe by content per destination), and nothing is sent.
    public static let serverSideCopy = StoreCapabilities(rawValue: 1 << 2)
    /// It keeps documents of ingest's own beside the objects
    /// (``ObjectStore/putDocument(key:bytes:headers:)``, ``ObjectStore/getDocument(key:)``),
    /// where a card's ASC MHL history goes. Without it, the history is kept on the station only.
    public static let documents = StoreCapabilities(rawValue: 1 << 3)
    /// It takes an upload's parts in any order, several at once. Without it (a tus upload
    /// is one byte stream, appended at its offset) the parts go one at a time, in order.
    public static let partsInAnyOrder = StoreCapabilities(rawValue: 1 << 4)

    /// It reads an object's bytes back, a range at a time
    /// (``ObjectStore/getObject(key:range:ifMatch:)``): `verify-card --read-back` and the
    /// nightly read-back prove an object by its bytes. Without it (a tus server writes, and
    /// reads nothing back) they prove what the object's `HEAD` shows.
    public static let rangedReads = StoreCapabilities(rawValue: 1 << 5)

    /// What an S3 bucket can do: everything.
    public static let all: StoreCapabilities = [.listing, .tagging, .serverSideCopy, .documents, .partsInAnyOrder, .rangedReads]
}
