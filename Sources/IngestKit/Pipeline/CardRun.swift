import Foundation
import Logging

/// One card's run once its volume is locked and noted (``Ingestor``): it holds the run's
/// ``CardRunMachine``, tells it what happened, and performs the actions it returns: scan,
/// read the labels, start the uploads and the copy, journal the copy's outcomes and queue
/// their uploads, wait for the streams and the uploads, judge the card, report.
///
/// What the run holds between steps (the scan's plan, the planner, the runner, the copy and
/// its streams) lives here; what to do next is only the machine's to say.
struct CardRun<Sink: EventSink> {
    let ingestor: Ingestor
    let volume: VolumeIdentity
    let sink: Sink
    let stop: IngestStop
    let started: Date
    let known: KnownFiles
    var machine: CardRunMachine
    var summary: RunSummary
    /// Once the labels are read and good.
    var planner: UploadPlanner?
    /// Once the uploads started.
    var runner: UploadRunner?
    var copy: CardCopy?
    /// The streams the copy's large files go to, when they stream.
    var streamer: PartStreamer?
    var streamedClaims = StreamedClaims()

    var config: Config { ingestor.config }
    var journal: Journal { ingestor.journal }
    var logger: Logger { ingestor.logger }
    var upload: UploadRequest? { ingestor.upload }

    init(ingestor: Ingestor, volume: VolumeIdentity, sink: Sink, stop: IngestStop, started: Date) {
        self.ingestor = ingestor
        self.volume = volume
        self.sink = sink
        self.stop = stop
        self.started = started
        known = KnownFiles.journal(ingestor.journal, volumeKey: volume.key, target: ingestor.upload?.target)
        // Large files' parts go out as they are copied, with the CRC32Cs of that read, where
        // the destination can tag the object with the fingerprint known only at the end.
        let streaming =
            ingestor.stageSettings(uploading: true).partChecksums != nil && ingestor.config.upload.streamParts
            && (ingestor.upload.map { $0.service.capabilities($0.target).contains(.tagging) } ?? false)
        machine = CardRunMachine(uploading: ingestor.upload != nil, streaming: streaming)
        summary = RunSummary(volume: volume.displayName)
    }

    /// Runs the card to its end: its summary in `outcome` (unless the run failed before it
    /// scanned the card), and throws what stopped it or what it found wrong.
    mutating func run(firstSeen: Bool, into outcome: inout IngestOutcome) async throws(IngestError) {
        var actions = tell(.volumeNoted(firstSeen: firstSeen))
        while true {
            var next: CardRunMachine.Event?
            performing: for action in actions {
                switch action {
                case let .report(error, stoppedBy):
                    report(stoppedBy: stoppedBy, error: error)
                    outcome.summary = summary
                    if let error { throw error }
                    return
                case .fail(let error):
                    throw error
                default:
                    do throws(IngestError) { next = try await perform(action) } catch {
                        next = .failed(error)
                        break performing
                    }
                }
            }
            guard let next else { preconditionFailure("CardRunMachine: \(actions) ends with no step") }
            actions = tell(next)
        }
    }

    /// Tells the machine `event`, after a stop asked for since the last event. Asked between
    /// steps: ``IngestStop`` cancels the stager and stops the runner itself, at once; the
    /// machine needs the stop only where the run decides what comes next.
    private mutating func tell(_ event: CardRunMachine.Event) -> [CardRunMachine.Action] {
        var actions: [CardRunMachine.Action] = []
        if let reason = stop.reason, reason != machine.stop { actions = machine.handle(.stopRequested(reason)) }
        return actions + machine.handle(event)
    }

    /// Performs `action`; its end, for a step.
    private mutating func perform(_ action: CardRunMachine.Action) async throws(IngestError) -> CardRunMachine.Event? {
        switch action {
        case .readLabels:
            do throws(IngestError) {
                planner = try await readLabels()
                return .labelsRead(problem: nil)
            } catch {
                return .labelsRead(problem: error)
            }
        case .startUploads:
            try await startUploads()
            return .uploadsStarted
        case let .startCopying(forUpload, streams):
            try startCopying(forUpload: forUpload, streams: streams)
            return nil
        case .scan:
            return .scanned(filesToStage: try await scan())
        case .queuePending:
            do { return .pendingQueued(unplanned: try await queuePendingUploads()) } catch { throw .journal(error) }
        case .queueUnplanned:
            do { try await queueUnplanned() } catch { throw .journal(error) }
            return nil
        case .journalCopies:
            do { try await journalCopies() } catch { throw .journal(error) }
            return .copied
        case .awaitStreams:
            try await awaitStreams()
            return .streamsEnded
        case .abandonCopy:
            await abandonCopy()
            return nil
        case .noteCopyingEnded:
            // Every file the scan found is journalled (staged, or failed and pending).
            do { try await journal.noteCopying(ofVolume: volume.key, unfinished: false) } catch { throw .journal(error) }
            return .copyingNoted
        case .finishUploads:
            guard let runner else { preconditionFailure("CardRun: uploads finished that never started") }
            (summary.uploads, summary.uploadError) = await runner.finish()
            return .uploadsFinished
        case .sync:
            // What the summary, the exit status and the card's end report rests on the records.
            do {
                try await journal.sync()
                summary.quarantined = try await journal.quarantinedCount(ofVolume: volume.key)
            } catch { throw .journal(error) }
            return .synced
        case .writeHistory:
            await writeHistory()
            return nil
        case .judge:
            // The card's verdict after the run in its destination, from the journal (its scan is this run's).
            do {
                if let standing = try await journal.judgeCard(volume.key, in: upload?.target) {
                    summary.safeToErase = standing.safeToErase
                    summary.notSafeBecause = standing.reasons
                }
            } catch { throw .journal(error) }
            return .judged
        case .report, .fail:
            preconditionFailure("CardRun: \(action) is the run's end, not a step")
        }
    }

    // MARK: the steps

    /// Scans the card, tells what it found, and journals what the card's history and its
    /// verdict rest on; whether it has files to stage.
    private mutating func scan() async throws(IngestError) -> Bool {
        // A known card's objects are looked for first: one missing or changed is sent again
        // (from the card, when its staged copy is gone: the scan below stages it again).
        if let service = upload?.service, ingestor.checksKnownCards {
            let checked = await service.checkCard(volume.key)
            summary.bucketProblems = checked.problems.map(\.text)
        }
        let plan = try await ScanPlan.make(volume: volume, rules: config.scan, known: known)
        for (path, reason) in plan.notableSkips { sink.emit(.skipped(path, reason)) }
        for notice in plan.notices { sink.emit(.notice(notice.0, code: notice.code, message: notice.message)) }
        sink.emit(.scanned(plan.totals))
        logger.info(
            "scanned volume",
            metadata: ["volume": "\(volume.key)", "to_stage": "\(plan.totals.toStage)", "known": "\(plan.totals.known)"])
        summary.scan = plan.totals
        do {
            try await journal.noteLostSkips(plan.lostSkips, ofVolume: volume.key)
            try await journal.noteCopying(ofVolume: volume.key, unfinished: true)
            // The card's folder is known before any of its files is: a run killed after its
            // last object leaves `resume` what it needs to write the card's history.
            if upload != nil {
                let folder = UploadPlanner.cardFolder(
                    config: config, volume: volume, cardDate: try await journal.firstSeen(ofVolume: volume.key))
                try await journal.noteCardFolder(folder, ofVolume: volume.key)
            }
        } catch { throw .journal(error) }
        return plan.totals.toStage > 0
    }

    /// The planner of this card's uploads, with the card's scene file: card data, read on a
    /// thread of its own as card files are.
    private func readLabels() async throws(IngestError) -> UploadPlanner {
        guard let upload else { preconditionFailure("CardRun: labels read for a run that uploads nothing") }
        let root = volume.rootPath
        let sceneFile: SceneFile?
        do {
            sceneFile = try await onDedicatedThread("ingest-scene") { () throws(LabelError) -> SceneFile? in
                try SceneFile.read(cardRoot: root)
            }
        } catch { throw .labels(error.description) }
        let cardDate: Date?
        do { cardDate = try await journal.firstSeen(ofVolume: volume.key) } catch { throw .journal(error) }
        return try UploadPlanner(config: config, request: upload, volume: volume, sceneFile: sceneFile, cardDate: cardDate)
    }

    /// What a process that stopped uncleanly left is taken up before anything is planned;
    /// then the run's runner, which ``IngestStop/shutdown()`` stops. From here on the run
    /// waits for its uploads, whatever happens.
    private mutating func startUploads() async throws(IngestError) {
        guard let upload else { preconditionFailure("CardRun: uploads started for a run that uploads nothing") }
        try await upload.service.recover(sink: sink)
        let runner = upload.service.runner(sink: sink)
        stop.attach(runner)
        self.runner = runner
    }

    /// Starts the copy, into the upload service's staging area when the run uploads; its
    /// large files stream when `streams` (the planner and the runner known).
    private mutating func startCopying(forUpload: Bool, streams: Bool) throws(IngestError) {
        let area: StagingArea
        if let shared = upload?.service.staging { area = shared } else { area = try StagingArea(root: ingestor.state.stagingPath) }
        if streams, let runner, let planner { streamer = runner.partStreamer(planner: planner) }
        copy = CardCopy.start(
            volume, known: known, rules: config.scan, area: area, settings: ingestor.stageSettings(uploading: forUpload),
            streams: streamer, stop: stop, logger: logger)
    }

    /// Journals the copy's outcomes as they arrive, in batches of whatever piled up during
    /// the last commit (the stager waits when a full batch waits for the journal), with the
    /// uploads of the files staged when the card's labels are known.
    private mutating func journalCopies() async throws(JournalError) {
        guard let copy else { preconditionFailure("CardRun: outcomes journalled of no copy") }
        sink.emit(.stagingStarted(copy.stager))
        while let batch = await copy.outcomes.next() {
            do throws(JournalError) {
                if let planner, let runner {
                    try await journalBatch(batch, planner: planner, runner: runner)
                } else {
                    try await journal.record(batch, volumeKey: volume.key, quarantineAfter: config.upload.quarantineAfter)
                }
            } catch {
                sink.emit(.stagingEnded)
                throw error
            }
            for outcome in batch {
                switch outcome {
                case .staged(let staged):
                    summary.staged += 1
                    summary.stagedBytes = summary.stagedBytes.addingSaturating(staged.file.size)
                    if staged.deduplicated { summary.deduplicated += 1 }
                    sink.emit(.staged(staged))
                case let .failed(file, failure):
                    summary.failed += 1
                    logger.warning("file not staged", metadata: ["path": "\(file.path.display)", "reason": "\(failure)"])
                    sink.emit(.failed(file, failure))
                }
            }
        }
        // Copying ends with the last outcome, before the claims still waiting for streams.
        sink.emit(.stagingEnded)
    }

    /// The claims of streamed files, then the streams left, then the copy's own end (what
    /// stopped the stager, or the walk).
    private mutating func awaitStreams() async throws(IngestError) {
        do throws(JournalError) { try await streamedClaims.settle() } catch {
            await streamer?.finish()
            throw .journal(error)
        }
        await streamer?.finish()
        try await copy?.task.value.get()
    }

    /// Ends the copy where it is: its outcomes not journalled are dropped (found again by
    /// the next scan), the claims of streamed files end, and streams without a claim abort.
    private mutating func abandonCopy() async {
        await copy?.cancel()
        try? await streamedClaims.settle()
        await streamer?.finish()
    }

    /// Writes the card's ASC MHL history to its folder in the bucket, once every file of it is
    /// verified (``UploadService/writeCustody(ofVolume:creator:)``). A history that cannot be
    /// written fails the run (it stays journalled for the next run, `resume` or `rescan`).
    private mutating func writeHistory() async {
        guard let upload else { preconditionFailure("CardRun: history written for a run that uploads nothing") }
        let started = ContinuousClock.now
        let outcome = await upload.service.writeCustody(
            ofVolume: volume.key, creator: CustodyCreator(config: config, scene: upload.scene))
        summary.historySeconds = (ContinuousClock.now - started).inSeconds
        summary.historyGenerations = outcome.uploaded.count
        if let error = outcome.error, summary.uploadError == nil { summary.uploadError = error }
    }

    /// Tells the run's summary.
    private mutating func report(stoppedBy: String?, error: IngestError?) {
        summary.stoppedBy = stoppedBy
        summary.stopSignal = stop.signal
        summary.errorStatus = error?.exitStatus
        summary.seconds = Date().timeIntervalSince(started)
        sink.emit(.finished(summary))
    }
}
