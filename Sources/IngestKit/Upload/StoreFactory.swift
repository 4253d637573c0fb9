/// Where a process's stores come from: the store of a destination, made when it is first
/// needed, and one cut of every transfer they have on the wire. ``UploadService`` asks it for
/// each destination it uploads to, and the commands that send single requests for theirs;
/// the S3 one is ``StoreFactory/s3(credentials:transport:logger:)``, and a test hands in
/// scripted stores.
public struct StoreFactory: Sendable {
    /// The store of one destination; fails when the destination's address cannot be used
    /// (the configuration's error).
    public let store: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    /// Ends every transfer in flight of every store made here, and every one sent from now
    /// on, for good: the process is stopping.
    public let cutTransfers: @Sendable () -> Void

    public init(
        store: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore,
        cutTransfers: @escaping @Sendable () -> Void
    ) {
        self.store = store
        self.cutTransfers = cutTransfers
    }
}
