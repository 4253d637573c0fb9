import Logging
import Synchronization

/// What uploading needs once per process, whatever the command: the stores of its
/// destinations from one factory (for S3, one libcurl transport and one credentials
/// provider, so `credential_process` runs once while its credentials are valid), one bound
/// on the bodies and bytes on the wire, and each destination checked once (that it is
/// there, then whether it honours conditional writes) and stopped for good after a failure
/// that concerns it. Everything above it reaches a destination as an ``ObjectStore``.
///
/// `ingest PATH`, `--device`, `resume`, `watch` and `rescan` each make one when they start
/// and hand out an ``UploadRunner`` per run of uploads (a card, or the pending uploads of a
/// resume); `rescan` with ten cards and `watch` with a card an hour share it across all of
/// them. A runner is finished by the run that made it; the service holds no task of its own,
/// so it needs no finishing.
public final class UploadService: Sendable {
    let journal: Journal
    let stateDirectory: StateDirectory
    let staging: StagingArea
    let settings: UploadSettings
    let logger: Logger
    let destinations: Destinations
    /// Where the destinations' stores come from (``identify(_:sink:)`` asks it too).
    let stores: StoreFactory
    /// What each destination's store can do (``StoreFactory/capabilities``).
    let capabilities: @Sendable (S3Destination) -> StoreCapabilities
    /// Bodies and bytes on the wire, over every runner of the process.
    let limiter: TransferLimiter
    let hooks = FaultHooks()
    /// This process's mark in the state directory (``StateDirectory/markRun()``), held while
    /// the service lives.
    private let runMark: RunMark
    /// Processes found gone without ending their runs, until ``recover(sink:)`` tells of them.
    let uncleanStopsToTell: Atomic<Int>

    /// - Parameters:
    ///   - events: hears what concerns a destination rather than a run (a server that does
    ///     not honour conditional writes, credentials being refreshed).
    ///   - stores: makes the store of each destination (``StoreFactory/network(credentials:tusHeaders:transport:logger:)``).
    ///   - keyPrefix: the configuration's `s3.prefix`, where the probe of conditional writes
    ///     (``ObjectStore/probeConditionalWrites(key:)``) leaves its empty object.
    public init(
        journal: Journal, state: StateDirectory, settings: UploadSettings, stores: StoreFactory, events: any EventSink,
        logger: Logger, keyPrefix: String
    ) throws(IngestError) {
        self.journal = journal
        stateDirectory = state
        staging = try StagingArea(root: state.stagingPath)
        runMark = try state.markRun()
        uncleanStopsToTell = Atomic(runMark.uncleanStops)
        self.settings = settings
        self.logger = logger
        capabilities = stores.capabilities
        self.stores = stores
        destinations = Destinations(
            stores: stores, sink: events, logger: logger, probeKey: KeyTemplate.probeKey(prefix: keyPrefix))
        limiter = TransferLimiter(
            maxRequests: settings.partsInFlight, maxBytes: Self.bytesInFlight(settings),
            smallBody: Int64(BodyReadAhead.defaultBlockSize))
    }

    /// How long a body may take on the wire under a rate cap, at most: the cap then bounds the
    /// bytes in flight to what it sends in this time.
    static let bodyTimeUnderCap: Duration = .seconds(4)

    /// The bytes on the wire at once: `[upload] bytes_in_flight`, and under a rate cap what it
    /// sends in ``bodyTimeUnderCap``. Eight large parts sharing a low cap each took tens of
    /// seconds to be acknowledged, so progress stood still, a kill lost that much sending and
    /// a stop waited for them; with the cap's 4 s worth in flight (one part alone, when a
    /// part is larger) a part ends every few seconds, and the cap is still filled.
    static func bytesInFlight(_ settings: UploadSettings) -> Int64 {
        guard let rate = settings.maxRate else { return settings.bytesInFlight }
        let capWorth = Int64(Double(rate.bytesPerSecond) * bodyTimeUnderCap.inSeconds)
        return max(1, min(settings.bytesInFlight, capWorth))
    }

    /// A new run of uploads reporting to `sink`, with its own file slots, totals and stop
    /// request. The caller finishes it (``UploadRunner/finish()``).
    public func runner(sink: any EventSink) -> UploadRunner {
        UploadRunner(service: self, sink: sink)
    }
}
