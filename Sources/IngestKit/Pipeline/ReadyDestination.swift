/// A destination checked and ready: its store, and whether it honours conditional writes.
struct ReadyDestination: Sendable {
    /// The destination's store (named `client` as the uploader's own field is).
    let client: any ObjectStore
    let conditionalWrites: Bool
    /// What the run found of the destination before its first upload
    /// (``UploadService/identify(_:sink:)``); nil for one not configured in this process (a
    /// pending upload's journalled destination).
    var identity: DestinationIdentity? = nil

    /// No configured gateway, nor the bucket id they show, is known to the journal: the cards
    /// this station ingested before went elsewhere.
    var isNewDestination: Bool { identity?.isNew ?? false }
}
