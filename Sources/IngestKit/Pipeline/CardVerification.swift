import Foundation
import Logging

/// `ingest verify-card`: the strong check before a card is formatted. Every file on the card
/// is read again and fingerprinted (XXH3-128), and must match the journal's record of it
/// (same size and time, same fingerprint) and an object in the bucket (the file's own, by its
/// upload's key and destination as the journal recorded them) of the same size whose
/// recorded fingerprint is the one just computed. Anything else is a problem
/// (``CardVerificationProblem``); the card is safe to erase only when there is none.
///
/// It changes nothing: not the card, not the journal (which it may read while an ingest runs),
/// not the bucket. The walk is the ingest's (``Scanner``, the same ``ScanRules``), so a file
/// left out by the rules is no problem, and a folder the ingest could not enter (too deep,
/// unreadable) is one (`lost`).
///
/// One thread walks the card, asks the journal about a batch of ``batch`` files at a time,
/// and reads each file once, direct where the file system allows (past the page cache, so the
/// card's bytes are what is read), at card speed; the object checks (`HEAD`, and
/// `GetObjectTagging` for a file whose fingerprint is in its tag) run a few at once
/// (``headsInFlight``) behind it, so they never hold the reading up for long. Memory stays
/// flat whatever the card: at most ``batch`` files wait between the two, and no list of the
/// card or of the journal is held. A second walk only counts the files, for the progress.
public struct CardVerification: Sendable {
    /// The journal to compare with; nil when none exists yet (then no file is known).
    public let journal: Journal?
    public let rules: ScanRules
    public let logger: Logger
    /// Object checks in flight at once.
    public var headsInFlight = 8
    /// With `--read-back`: each object that passes the checks of its `HEAD` is read back
    /// whole (ranged `GetObject`) and its bytes fingerprinted (``CardVerification+ReadBack``);
    /// nil: the labels are trusted.
    public var readBack: ObjectReadBack?
    /// The store of each destination the journal names, made once per destination.
    let store: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore

    /// Files looked up in the journal in one query, and how far the reading may run ahead of
    /// the object checks.
    static let batch = 512
    /// The size of each read from the card.
    static let blockSize = 1 << 20

    /// - Parameter store: the store of a destination the journal recorded
    ///   (``StoreFactory/store``, credentials as every command reads them); its error ends
    ///   the check.
    public init(
        journal: Journal?, rules: ScanRules, logger: Logger,
        store: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    ) {
        self.journal = journal
        self.rules = rules
        self.logger = logger
        self.store = store
    }

    /// Verifies the card (or directory) at `path`, identified as an ingest identifies it.
    /// A card the journal does not know, or a mount point with nothing mounted, is refused
    /// (``known(_:path:)``) before a file is read.
    public func verify(
        path: String, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async throws(IngestError) -> CardVerificationSummary {
        let volume = try VolumeIdentity.identify(path: path)
        try await known(volume, path: path)
        return await verify(volume: volume, progress: progress, stop: stop, report: report)
    }

    /// Where cards are mounted: a directory below one of these that is not a mount of its
    /// own is where a card is not.
    static let mountPlaces = ["/media/", "/mnt/", "/run/media/"]

    /// The volume is a card this station ingested (the journal saw it, even with no file),
    /// and, where its path is a place cards are mounted, a card is mounted there. An empty
    /// directory, or a card that was never ingested here, holds nothing known to be anywhere:
    /// a verdict of "safe" on it would have someone format a card that was never ingested.
    func known(_ volume: VolumeIdentity, path: String) async throws(IngestError) {
        if Self.mountPlaces.contains(where: { volume.rootPath.hasPrefix($0) }),
            !Self.mountPlaces.contains(where: { (volume.mountPoint ?? "/").hasPrefix($0) })
        {
            throw .cardUnknown(
                path: path, reason: "not mounted (no card's file system is mounted there; \(volume.rootPath) is a "
                    + "directory of \(volume.mountPoint ?? "the system disk"))",
                remedy: "Mount the card (or give its device: ingest verify-card --device /dev/sdX1) and check again.")
        }
        let seen: Date?
        do { seen = try await journal?.firstSeen(ofVolume: volume.key) } catch { throw .upload(.journal(error)) }
        guard seen != nil else {
            throw .cardUnknown(
                path: path, reason: "a card never ingested here (the journal\(journal.map { " \($0.path)" } ?? "") does not know "
                    + "\(volume.key))",
                remedy: "Ingest it first (ingest \(path)); a folder of a card is checked by the card's mount point, and "
                    + "another station's journal is checked there.")
        }
    }

    /// Verifies the card whose block device is `node`, taken as `ingest --device` takes it
    /// (``DeviceIngest/attach(device:)``: checked, its device's lock held, mounted read-only
    /// if nothing has mounted it) and, when it was mounted here, unmounted afterwards.
    public func verify(
        device node: String, devices: DeviceIngest, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async throws(IngestError) -> CardVerificationSummary {
        let (mount, lock) = try devices.attach(device: node)
        defer { lock.release() }
        let outcome: Result<CardVerificationSummary, IngestError>
        do throws(IngestError) {
            outcome = .success(try await verify(path: mount.path, progress: progress, stop: stop, report: report))
        } catch {
            outcome = .failure(error)
        }
        if let problem = mount.release() {
            logger.warning(
                "could not unmount the card; unmount it by hand", metadata: ["mount_point": "\(mount.path)", "error": "\(problem)"])
        }
        return try outcome.get()
    }

    /// Verifies `volume`. What stops the check before its end (the card gone, the journal or
    /// the destination unusable) is the summary's ``CardVerificationSummary/failure``, with
    /// the problems found until then reported and counted.
    public func verify(
        volume: VolumeIdentity, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async -> CardVerificationSummary {
        let started = ContinuousClock.now
        report(.volume(volume))
        let batches = Batches<CardFinding>(limit: Self.batch)
        // Raised when the check ends early, or is over: both walks stop.
        let halt = StopFlag()
        let ended: @Sendable () -> Bool = { halt.isRaised || stop.isRaised }
        async let counted: Void = onDedicatedThread("ingest-count") { count(volume, progress: progress, until: ended) }
        async let walked: IngestError? = onDedicatedThread("ingest-verify") { () -> IngestError? in
            defer { batches.finish() }
            do throws(IngestError) {
                try read(volume, into: batches, progress: progress, until: ended)
                return nil
            } catch {
                return error
            }
        }
        var summary = CardVerificationSummary(volume: volume)
        summary.readBack = readBack != nil
        let failure = await judge(batches, into: &summary, progress: progress, stop: stop, report: report)
        if failure != nil {
            halt.raise()
            batches.discard()
        }
        let walkFailure = await walked
        // Nothing of the card is held open once the check returns (a card mounted for it is
        // unmounted next).
        halt.raise()
        await counted
        summary.failure = failure ?? walkFailure
        summary.stopped = stop.isRaised
        summary.seconds = (ContinuousClock.now - started).inSeconds
        logger.info(
            "verified card",
            metadata: [
                "volume": "\(volume.key)", "files": "\(summary.files)", "problems": "\(summary.problems)",
                "safe_to_erase": "\(summary.safeToErase)", "read_back_bytes": "\(summary.readBackBytes)",
            ])
        return summary
    }
}
