/// How one ingest ended: what it did and, when something stopped it, what. A run that stops
/// part-way still reports what it staged and uploaded.
public struct IngestOutcome: Sendable {
    /// The volume, once identified.
    public var volume: VolumeIdentity?
    /// What the run did; nil when it stopped before it scanned (no volume, busy, unreadable).
    public var summary: RunSummary?
    /// What stopped the run, if anything did.
    public var error: IngestError?

    public init(volume: VolumeIdentity? = nil, summary: RunSummary? = nil, error: IngestError? = nil) {
        self.volume = volume
        self.summary = summary
        self.error = error
    }

    /// The summary of a run that ended as it should; what stopped it otherwise.
    public func get() throws(IngestError) -> RunSummary {
        if let error { throw error }
        guard let summary else { preconditionFailure("an ingest that ended without an error reported no summary") }
        return summary
    }
}
