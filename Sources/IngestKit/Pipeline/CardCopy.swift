import Logging

/// A card's copying under way (``CardRun``): its stager, on a thread of its own, copying the
/// files a second walk of the card finds; its outcomes waiting (512 at most) for the run to
/// journal them; the task that runs it.
///
/// The streams its large files go to are given when it starts: the run knows them by then
/// (``CardRunMachine``), so the card reader never waits to learn whether a file streams.
struct CardCopy: Sendable {
    let stager: Stager
    let outcomes: Batches<StageOutcome>
    let task: Task<Result<Void, IngestError>, Never>

    /// Starts copying the files of `volume` that `known` says are to stage into `area`, once
    /// its leftovers of an interrupted run are cleared, subject to `stop`; large files go to
    /// `streams` as they are copied.
    static func start(
        _ volume: VolumeIdentity, known: KnownFiles, rules: ScanRules, area: StagingArea, settings: StageSettings,
        streams: (any CopyStreams)?, stop: IngestStop, logger: Logger
    ) -> CardCopy {
        let abandoned = area.removeAbandonedPartials()
        if abandoned > 0 { logger.info("removed partial copies left by an interrupted run", metadata: ["count": "\(abandoned)"]) }
        let unfreed = area.freeLeftovers()
        if unfreed > 0 { logger.info("deleting copies an interrupted run let go but did not delete", metadata: ["count": "\(unfreed)"]) }
        let stager = Stager(area: area, settings: settings, streams: streams)
        stop.attach(stager)
        let outcomes = Batches<StageOutcome>()
        let task = Task { () async -> Result<Void, IngestError> in
            defer { outcomes.finish() }
            do throws(IngestError) {
                try await onDedicatedThread("ingest-stage") { () throws(IngestError) in
                    let files = FilesToStage(volume: volume, rules: rules, known: known)
                    do throws(IngestError) {
                        try stager.run(root: volume.rootPath, files: files, volumeName: volume.displayName) { outcomes.add($0) }
                    } catch {
                        files.close()
                        throw error
                    }
                    if let walkFailed = files.close() { throw walkFailed }
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        return CardCopy(stager: stager, outcomes: outcomes, task: task)
    }

    /// Stops the copying, drops what it has not reported, and waits for its threads to let go
    /// of the card. Again, or once it ended, nothing more.
    func cancel() async {
        stager.cancel()
        outcomes.discard()
        _ = await task.value
    }
}
