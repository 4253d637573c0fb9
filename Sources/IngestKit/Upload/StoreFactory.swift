/// Where a process's stores come from: the store of a destination, made when it is first
/// needed, and one cut of every transfer they have on the wire. ``UploadService`` asks it for
/// each destination it uploads to, and the commands that send single requests for theirs;
/// the real one is ``StoreFactory/network(credentials:tusHeaders:transport:logger:)`` (S3 and tus), and a test hands in
/// scripted stores.
public struct StoreFactory: Sendable {
    /// The store of one destination; fails when the destination's address cannot be used
    /// (the configuration's error).
    public let store: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    /// What the store of a destination can do, known before it is made: whether a card's
    /// large files may stream before they are staged (which needs ``StoreCapabilities/tagging``
    /// for the fingerprint known only at the end) is decided before the first upload.
    public let capabilities: @Sendable (S3Destination) -> StoreCapabilities
    /// Ends every transfer in flight of every store made here, and every one sent from now
    /// on, for good: the process is stopping.
    public let cutTransfers: @Sendable () -> Void

    public init(
        store: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore,
        capabilities: @escaping @Sendable (S3Destination) -> StoreCapabilities = { _ in .all },
        cutTransfers: @escaping @Sendable () -> Void
    ) {
        self.store = store
        self.capabilities = capabilities
        self.cutTransfers = cutTransfers
    }
}
