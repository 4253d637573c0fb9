/// A destination checked and ready: its store, and whether it honours conditional writes.
struct ReadyDestination: Sendable {
    /// The destination's store (named `client` as the uploader's own field is).
    let client: any ObjectStore
    let conditionalWrites: Bool
}
