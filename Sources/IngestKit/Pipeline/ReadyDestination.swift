/// A destination checked and ready: its store, whether it honours conditional writes, and
/// whether it keeps CRC32C checksums.
struct ReadyDestination: Sendable {
    /// The destination's store (named `client` as the uploader's own field is).
    let client: any ObjectStore
    let conditionalWrites: Bool
    /// False where the probe's write came back without the CRC32C it carried (Ceph RGW
    /// before Squid): such a server neither checks a part's CRC32C nor reports the object's,
    /// so uploads not yet begun there go with MD5 digests (`Content-MD5`), which it checks,
    /// and are proven by their MD5 ETags; nothing is streamed there.
    var keepsChecksums = true
    /// What the run found of the destination before its first upload
    /// (``UploadService/identify(_:sink:)``); nil for one not configured in this process (a
    /// pending upload's journalled destination).
    var identity: DestinationIdentity? = nil

    /// No configured gateway, nor the bucket id they show, is known to the journal: the cards
    /// this station ingested before went elsewhere.
    var isNewDestination: Bool { identity?.isNew ?? false }
}
