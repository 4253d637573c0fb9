import Foundation
import Logging

/// Runs the pipeline for one volume: identify, lock, scan, stage, journal, upload.
///
/// Each file is journalled as soon as its copy is safe and, in the same breath, its upload
/// is planned and queued: uploading starts while the rest of the card is still copied. The
/// run itself, once the volume is locked, is a ``CardRun``.
public struct Ingestor: Sendable {
    public let config: Config
    public let state: StateDirectory
    public let journal: Journal
    public let logger: Logger
    /// nil: stage only (`--no-upload`).
    public let upload: UploadRequest?
    /// How long to wait for a volume another process is ingesting, instead of failing with
    /// `.volumeBusy` at once: a card given by its own device (``DeviceIngest``) whose file
    /// system has the UUID of one being ingested elsewhere is a second card (a clone), not
    /// a second trigger, and must be ingested too.
    public var volumeWait: Duration = .zero
    /// A known card's objects are looked for in the bucket before its scan
    /// (``UploadService/checkCard(_:)``); off where the caller checked them already (a rescan
    /// checks every card of its window first).
    public var checksKnownCards = true

    public init(config: Config, state: StateDirectory, journal: Journal, logger: Logger, upload: UploadRequest? = nil) {
        self.config = config
        self.state = state
        self.journal = journal
        self.logger = logger
        self.upload = upload
    }

    /// Ingests the volume at `path`: everything new is staged and journalled, and uploaded
    /// through one runner of the upload service, made once the card is scanned (or, for a
    /// new card whose large files stream, before its copy starts) and finished on every
    /// path. Per-file failures are reported and counted; what stops the whole run is the
    /// outcome's error. A `stop` request ends the run early without an error:
    /// ``RunSummary/stoppedBy`` says why.
    ///
    /// Every command that ingests a card comes here, so this is where a card ends
    /// (``CardDone``): once the volume's lock is released, the metrics file is rewritten and
    /// the `on_card_done` hook is run, neither of which changes the outcome.
    public func ingest(path: String, sink: some EventSink, stop: IngestStop = IngestStop()) async -> IngestOutcome {
        var outcome = IngestOutcome()
        do throws(IngestError) {
            try await ingest(path: path, sink: sink, stop: stop, into: &outcome)
        } catch {
            outcome.error = error
        }
        await CardDone(config: config, journal: journal, logger: logger).finish(outcome)
        return outcome
    }

    /// A card path that holds the state directory would ingest the journal, its locks and the
    /// staging area (never safe to erase, and every run finding new bytes): refused (78) before
    /// anything is read.
    func refuseIfItHoldsTheStateDirectory(_ root: String) throws(IngestError) {
        let resolved = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().path }
        let (card, stateDirectory) = (resolved(root), resolved(state.path))
        guard stateDirectory == card || stateDirectory.hasPrefix(card == "/" ? "/" : card + "/") else { return }
        throw .config(
            file: nil, key: "state_dir",
            problem: "the card path \(root) holds the state directory \(stateDirectory): its journal, locks and "
                + "staged copies would be ingested as the card. Ingest the card's own mount point, or keep the state "
                + "directory elsewhere (state_dir, --state-dir, INGEST_STATE_DIR)")
    }

    private func ingest(
        path: String, sink: some EventSink, stop: IngestStop, into outcome: inout IngestOutcome
    ) async throws(IngestError) {
        let started = Date()
        // The run's own labels first: a problem with them (a `device` from --tag, labels too
        // large for S3's metadata) would recur on every card, so none is touched, nothing staged.
        if let upload {
            do { _ = try UploadPlanner.labelPolicy(config: config, request: upload) } catch {
                throw .runLabels(error.description)
            }
        }
        let volume = try VolumeIdentity.identify(path: path)
        try refuseIfItHoldsTheStateDirectory(volume.rootPath)
        outcome.volume = volume
        sink.emit(.volume(volume))
        let lock = try await lockVolume(volume, stop: stop)
        defer { lock.release() }
        let firstSeen: Bool
        do { firstSeen = try await journal.noteVolume(volume) } catch { throw .journal(error) }
        var run = CardRun(ingestor: self, volume: volume, sink: sink, stop: stop, started: started)
        try await run.run(firstSeen: firstSeen, into: &outcome)
    }

    /// The volume's lock; when another process holds it, tried again each second for up to
    /// ``volumeWait`` (and while no stop is asked for).
    private func lockVolume(_ volume: VolumeIdentity, stop: IngestStop) async throws(IngestError) -> VolumeLock {
        let deadline = ContinuousClock.now + volumeWait
        var said = false
        while true {
            do { return try state.lockVolume(volume) } catch {
                guard case .volumeBusy = error, ContinuousClock.now < deadline, stop.reason == nil else { throw error }
                if !said {
                    logger.notice(
                        "another ingest holds a card with this identity (a cloned card?): waiting for it",
                        metadata: ["volume": "\(volume.key)"])
                    said = true
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// The stager's settings: a run that uploads reads the card direct, and takes the parts'
    /// checksums from that read.
    func stageSettings(uploading: Bool) -> StageSettings {
        var settings = config.staging
        // Uploads set the pace of a run that uploads: the card is read direct, for less CPU.
        settings.directReads = uploading
        if uploading, config.upload.checksum == .crc32c {
            // The parts' checksums come from this read of the card: the upload need not
            // read a copy twice, and the server checks the card's bytes.
            settings.partChecksums = config.upload.cut
        }
        return settings
    }
}
