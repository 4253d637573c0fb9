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
}
