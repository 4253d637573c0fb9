import Foundation
import Logging
import Synchronization

/// What a scan of a volume, compared with the journal, says should happen: how many files
/// to stage and how many bytes, what was skipped, what deserves a word.
///
/// It counts the files to stage but does not hold them: a card of 100,000 files would keep
/// 100,000 paths for the whole run. The stager takes them from a second walk of the card
/// (``FilesToStage``), which sorts the same way (``KnownFiles``); it costs a
/// second pass over the card's metadata, a small part of the run for a card of small files.
public struct ScanPlan: Sendable {
    public var volume: VolumeIdentity
    public var totals = ScanTotals()
    /// Skipped entries worth telling (litter and exclusions are only counted), the first
    /// ``reportLimit``.
    public var notableSkips: [(CardPath, SkipReason)] = []
    /// Of ``notableSkips``, those that lose content (``SkipReason/losesContent``): journalled
    /// with the card, for `status` and its verdict.
    public var lostSkips: [(CardPath, SkipReason)] {
        notableSkips.filter { $0.1.losesContent }
    }
    /// Files ingested that deserve a word (names that are not UTF-8, empty files), the first
    /// ``reportLimit``.
    public var notices: [(ScannedFile, code: String, message: String)] = []
    /// How many skips and notices each list keeps: a card of a million FIFOs or empty files
    /// is counted, not listed (``ScanTotals/unlisted``).
    public static let reportLimit = 1000

    /// Scans `volume` and sorts what it finds against what the journal `known`s: reads no
    /// file contents, changes nothing.
    public static func make(volume: VolumeIdentity, rules: ScanRules, known: KnownFiles) async throws(IngestError) -> ScanPlan {
        try await onDedicatedThread("ingest-scan") { () throws(IngestError) -> ScanPlan in
            var plan = ScanPlan(volume: volume)
            try known.walk(volume, rules: rules) { finding, toStage in plan.add(finding, toStage: toStage) }
            return plan
        }
    }

    /// Counts `finding`; `toStage`: a file is to be staged (``KnownFiles``).
    mutating func add(_ finding: ScanFinding, toStage: Bool) {
        switch finding {
        case let .skipped(path, reason):
            totals.skipped += 1
            if reason.losesContent { totals.lost += 1 }
            if reason.isNotable {
                if notableSkips.count < Self.reportLimit { notableSkips.append((path, reason)) } else { totals.unlisted += 1 }
            }
        case .file(let file):
            guard toStage else {
                totals.known += 1
                totals.knownBytes = totals.knownBytes.addingSaturating(file.size)
                return
            }
            if !file.path.isValidUTF8 {
                notice(file, "name-not-utf8", "name is not valid UTF-8; ingested under its raw bytes")
            }
            if file.size == 0 {
                notice(file, "empty-file", "empty file; ingested like any other")
            }
            totals.toStage += 1
            totals.toStageBytes = totals.toStageBytes.addingSaturating(file.size)
        }
    }

    private mutating func notice(_ file: ScannedFile, _ code: String, _ message: String) {
        if notices.count < Self.reportLimit { notices.append((file, code, message)) } else { totals.unlisted += 1 }
    }
}

/// The files of a volume to stage, as a walk of the card finds them: the walk runs on a
/// thread of its own, at most ``depth`` files ahead of the stager that takes them, so memory
/// stays flat however many files the card holds. A file added to the card since the scan
/// that counted them is staged too (it is counted when staged).
///
/// Taken by one consumer on a thread that may block (the stager's reader). ``close()`` ends
/// the walk early, and returns once its thread holds nothing of the card (no directory is
/// left open under an unmount).
public final class FilesToStage: Sequence, IteratorProtocol, @unchecked Sendable {
    /// How far the walk may run ahead of the stager.
    static let depth = 256
    private let queue = BlockingQueue<ScannedFile?>(capacity: FilesToStage.depth)
    private let closing = Atomic<Bool>(false)
    /// The walk ended (its end taken from the queue).
    private var ended = false
    private let failure = Mutex<IngestError?>(nil)

    /// Starts walking `volume`, passing on the files `known` says are to be staged.
    public init(volume: VolumeIdentity, rules: ScanRules, known: KnownFiles) {
        // The thread holds the walk until it ends, which ``close()`` waits for.
        startThread("ingest-walk") { [self] in
            do throws(IngestError) {
                try known.walk(volume, rules: rules, until: { closing.load(ordering: .relaxed) }) { finding, toStage in
                    if toStage, case .file(let file) = finding, !closing.load(ordering: .relaxed) { queue.put(file) }
                }
            } catch {
                failure.withLock { $0 = error }
            }
            queue.put(nil)
        }
    }

    public func next() -> ScannedFile? {
        guard !ended else { return nil }
        guard let file = queue.take() else {
            ended = true
            return nil
        }
        return file
    }

    /// Calls `body` with each file, on a thread of its own (the walk's hand-off blocks), then
    /// closes the walk; throws what kept it from walking the card.
    public func each(_ body: @escaping @Sendable (ScannedFile) -> Void) async throws(IngestError) {
        let failure = await onDedicatedThread("ingest-each") { () -> IngestError? in
            while let file = self.next() { body(file) }
            return self.close()
        }
        if let failure { throw failure }
    }

    /// Ends the walk, dropping what it found and nobody took, and waits for its thread to let
    /// go of the card. Then the error that kept it from walking the card, if any (the card
    /// gone since it was scanned).
    @discardableResult
    public func close() -> IngestError? {
        closing.store(true, ordering: .relaxed)
        while next() != nil {}
        return failure.withLock { $0 }
    }
}

/// What the journal knows of a volume's files, as a scan sorts them: a file is to be staged
/// when it is new, changed since it was journalled (size, time, or inode where the file
/// system keeps inode numbers: ``VolumeIdentity/keepsInodeNumbers``), or still pending from
/// an earlier run. The journal is asked a batch of files at a time (``Journal/knownFiles(ofVolume:paths:)``),
/// so a rescan of a card of 100,000 files never holds the journal's record of all of them.
public struct KnownFiles: Sendable {
    private enum Source: Sendable {
        case journal(Journal, volumeKey: String)
        case records([CardPath: FileRecord])
    }
    private let source: Source
    /// Files looked up in one query.
    static let batch = 512

    /// The journal's files of the volume `key`.
    public static func journal(_ journal: Journal, volumeKey key: String) -> KnownFiles {
        KnownFiles(source: .journal(journal, volumeKey: key))
    }

    /// Files known from `records` (none: every file is new).
    public static func records(_ records: [CardPath: FileRecord] = [:]) -> KnownFiles { KnownFiles(source: .records(records)) }

    /// Whether each of `files` is to be staged; `inodes`: whether their inodes are compared.
    func toStage(_ files: [ScannedFile], comparingInodes inodes: Bool) throws(IngestError) -> [Bool] {
        let known: (CardPath) -> KnownFile?
        switch source {
        case let .journal(journal, key):
            let found: [CardPath: KnownFile]
            do { found = try journal.knownFiles(ofVolume: key, paths: files.map(\.path)) } catch { throw .journal(error) }
            known = { found[$0] }
        case .records(let records):
            known = { path in records[path].map { KnownFile(size: $0.size, mtime: $0.mtime, inode: $0.inode, state: $0.state) } }
        }
        return files.map { file in
            guard let record = known(file.path) else { return true }
            if inodes, let was = record.inode, let now = file.inode, was != Int64(bitPattern: now) { return true }
            return record.state == .pending || record.size != file.size || record.mtime != file.mtime
        }
    }

    /// Walks `volume` (``Scanner``) until `stop`, calling `each` with every finding in the
    /// walk's order and, for a file, whether it is to be staged; files wait for their batch's
    /// answer, at most ``batch`` of them.
    func walk(
        _ volume: VolumeIdentity, rules: ScanRules, until stop: () -> Bool = { false }, _ each: (ScanFinding, Bool) -> Void
    ) throws(IngestError) {
        var waiting: [ScanFinding] = []
        var files: [ScannedFile] = []
        var failure: IngestError?
        let inodes = volume.keepsInodeNumbers
        func flush() {
            guard failure == nil, !waiting.isEmpty else { return }
            do throws(IngestError) {
                var verdicts = try toStage(files, comparingInodes: inodes).makeIterator()
                for finding in waiting {
                    if case .file = finding { each(finding, verdicts.next() ?? true) } else { each(finding, false) }
                }
            } catch {
                failure = error
            }
            waiting.removeAll(keepingCapacity: true)
            files.removeAll(keepingCapacity: true)
        }
        try Scanner(rules: rules).scan(root: volume.rootPath, until: { failure != nil || stop() }) { finding in
            waiting.append(finding)
            if case .file(let file) = finding {
                files.append(file)
                if files.count == Self.batch { flush() }
            } else if waiting.count >= Self.batch {
                flush()
            }
        }
        flush()
        if let failure { throw failure }
    }
}

/// What a run uploads, and with which labels: the destination, the process's upload
/// service, and the scene and tags of this run (`--scene`, `--tag`).
public struct UploadRequest: Sendable {
    public var target: S3Destination
    public var service: UploadService
    public var scene: String?
    public var tags: [String: String]

    public init(target: S3Destination, service: UploadService, scene: String?, tags: [String: String]) {
        self.target = target
        self.service = service
        self.scene = scene
        self.tags = tags
    }
}

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

/// Runs the pipeline for one volume: identify, lock, scan, stage, journal, upload.
///
/// Each file is journalled as soon as its copy is safe and, in the same breath, its upload
/// is planned and queued: uploading starts while the rest of the card is still copied.
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

    public init(config: Config, state: StateDirectory, journal: Journal, logger: Logger, upload: UploadRequest? = nil) {
        self.config = config
        self.state = state
        self.journal = journal
        self.logger = logger
        self.upload = upload
    }

    /// Ingests the volume at `path`: everything new is staged and journalled, and uploaded
    /// through one runner of the upload service, made once the card is scanned and finished
    /// here on every path. Per-file failures are reported and counted; what stops the whole
    /// run is the outcome's error. A `stop` request ends the run early without an error:
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
        outcome.volume = volume
        sink.emit(.volume(volume))
        let lock = try await lockVolume(volume, stop: stop)
        defer { lock.release() }
        let firstSeen: Bool
        do { firstSeen = try await journal.noteVolume(volume) } catch { throw .journal(error) }
        let known = KnownFiles.journal(journal, volumeKey: volume.key)

        // A card seen for the first time is all to copy: its copying starts while the scan
        // counts it, on the core the scan leaves idle. What it copies is journalled, and
        // told, only after the scan (``stage(_:known:summary:uploads:sink:stop:early:)``).
        let early = firstSeen && stop.reason == nil ? try startCopying(volume, known: known, stop: stop) : nil
        let plan: ScanPlan
        do { plan = try await ScanPlan.make(volume: volume, rules: config.scan, known: known) } catch {
            await early?.cancel()
            throw error
        }
        for (path, reason) in plan.notableSkips { sink.emit(.skipped(path, reason)) }
        for notice in plan.notices { sink.emit(.notice(notice.0, code: notice.code, message: notice.message)) }
        sink.emit(.scanned(plan.totals))
        logger.info(
            "scanned volume",
            metadata: ["volume": "\(volume.key)", "to_stage": "\(plan.totals.toStage)", "known": "\(plan.totals.known)"])

        var summary = RunSummary(volume: volume.displayName)
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
        // What a process that stopped uncleanly left is taken up before anything is planned.
        if let upload { try await upload.service.recover(sink: sink) }
        // From here on the run ends below, its uploads awaited, whatever happens.
        let runner = upload.map { $0.service.runner(sink: sink) }
        if let runner { stop.attach(runner) }
        var labelProblem: IngestError?
        var stopped: IngestError?
        do {
            var unplanned = false
            var uploads: (planner: UploadPlanner, runner: UploadRunner)?
            if let upload, let runner {
                unplanned = try await queuePendingUploads(of: volume, target: upload.target, runner: runner)
                // Labels are checked before anything is uploaded, and only when a file of the
                // card needs an upload planned: a rescan of an ingested card reads nothing on
                // it, not even its scene file. A problem with them still lets the card be
                // staged, so it is safe while the operator fixes the tags.
                if plan.totals.toStage > 0 || unplanned {
                    do throws(IngestError) {
                        uploads = (try await planner(for: upload, volume: volume), runner)
                    } catch {
                        labelProblem = error
                    }
                }
            }
            if unplanned, let uploads {
                try await queueUnplanned(of: volume, planner: uploads.planner, runner: uploads.runner, summary: &summary, sink: sink)
            }
            try await stage(plan, known: known, summary: &summary, uploads: uploads, sink: sink, stop: stop, early: early)
            // Every file the scan found is journalled (staged, or failed and pending).
            if stop.reason == nil { try await copyingEnded(volume) }
        } catch {
            // Copying that started early and never reached `stage` ends here (a no-op if it did).
            await early?.cancel()
            stopped = error
            summary.stoppedBy = error.description
        }
        if let runner {
            let (totals, uploadError) = await runner.finish()
            summary.uploads = totals
            summary.uploadError = uploadError
        }
        do {
            // What the summary, the exit status and the card's end report rests on the records.
            try await journal.sync()
            summary.quarantined = try await journal.quarantinedCount(ofVolume: volume.key)
        } catch {
            if stopped == nil { stopped = .journal(error) }
        }
        if let upload, stopped == nil, stop.reason == nil {
            await writeHistory(of: volume, upload: upload, summary: &summary)
        }
        do { try await judge(volume, into: &summary) } catch {
            if stopped == nil { stopped = .journal(error) }
        }
        if stopped == nil, let reason = stop.reason { summary.stoppedBy = reason.rawValue }
        summary.errorStatus = (stopped ?? labelProblem)?.exitStatus
        summary.seconds = Date().timeIntervalSince(started)
        sink.emit(.finished(summary))
        outcome.summary = summary
        if let stopped { throw stopped }
        if let labelProblem { throw labelProblem }
    }

    /// Writes the card's ASC MHL history to its folder in the bucket, once every file of it is
    /// verified (``UploadService/writeCustody(ofVolume:creator:)``). A history that cannot be
    /// written fails the run (it stays journalled for the next run, `resume` or `rescan`).
    private func writeHistory(of volume: VolumeIdentity, upload: UploadRequest, summary: inout RunSummary) async {
        let started = ContinuousClock.now
        let outcome = await upload.service.writeCustody(
            ofVolume: volume.key, creator: CustodyCreator(config: config, scene: upload.scene))
        summary.historySeconds = (ContinuousClock.now - started).inSeconds
        summary.historyGenerations = outcome.uploaded.count
        if let error = outcome.error, summary.uploadError == nil { summary.uploadError = error }
    }

    /// Every file the scan found is journalled: the journal knows the whole card again.
    private func copyingEnded(_ volume: VolumeIdentity) async throws(IngestError) {
        do { try await journal.noteCopying(ofVolume: volume.key, unfinished: false) } catch { throw .journal(error) }
    }

    /// The card's verdict after the run, from the journal (its scan is this run's).
    private func judge(_ volume: VolumeIdentity, into summary: inout RunSummary) async throws(JournalError) {
        guard let standing = try await journal.judgeCard(volume.key) else { return }
        summary.safeToErase = standing.safeToErase
        summary.notSafeBecause = standing.reasons
    }

    /// The planner of this card's uploads, with the card's scene file: card data, read on a
    /// thread of its own as card files are.
    private func planner(for upload: UploadRequest, volume: VolumeIdentity) async throws(IngestError) -> UploadPlanner {
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

    /// Uploads of this card an earlier run left unfinished: the runner reads those planned
    /// for its files from the journal, a page at a time, first; those another card's file
    /// planned are queued here. Returns whether the card has files staged without an upload
    /// planned (`--no-upload`, a kill in between, or an upload planned for another
    /// destination and never started, which follows the run to its own).
    private func queuePendingUploads(
        of volume: VolumeIdentity, target: S3Destination, runner: UploadRunner
    ) async throws(IngestError) -> Bool {
        do {
            for record in try await journal.pendingUploadsBesidesPages(ofVolume: volume.key, target: target) {
                if record.target != target, record.phase == .created, record.volumeKey == volume.key {
                    // Planned for another destination (a mistyped bucket, a changed endpoint)
                    // and never started there: it follows the run to its destination.
                    try await journal.removeUpload(id: record.id, note: "re-planned for \(target.displayName)")
                } else {
                    runner.submit(record, resumed: true)
                }
            }
            try await runner.follow(volume: volume.key)
            return try await !journal.stagedFilesWithoutUpload(ofVolume: volume.key, limit: 1).isEmpty
        } catch {
            throw .journal(error)
        }
    }

    /// Plans and queues the uploads of files staged without one, a page of them at a time.
    /// A file that still cannot become an object fails this run too, and stays quarantined.
    private func queueUnplanned(
        of volume: VolumeIdentity, planner: UploadPlanner, runner: UploadRunner, summary: inout RunSummary,
        sink: some EventSink
    ) async throws(IngestError) {
        do {
            var after: Int64 = 0
            while true {
                let page = try await journal.stagedFilesWithoutUpload(ofVolume: volume.key, after: after, limit: KnownFiles.batch)
                guard let last = page.last?.id else { return }
                after = last
                var claims: [UploadClaim] = []
                for file in page {
                    guard let fingerprint = file.fingerprint.flatMap(Fingerprint.init(hex:)) else { continue }
                    let scanned = ScannedFile(path: file.cardPath, size: file.size, mtime: file.mtime)
                    do { claims.append(try planner.claim(for: scanned, fingerprint: fingerprint)) } catch {
                        try await notUploadable(scanned, error, volume: volume, summary: &summary, sink: sink)
                    }
                }
                try await submit(claims, volume: volume, runner: runner)
            }
        } catch { throw .journal(error) }
    }

    /// A staged file no object can be made of (a key or labels beyond S3's limits): it
    /// fails, and is quarantined with its staged copy until the configuration changes or
    /// the operator forgets it.
    private func notUploadable(
        _ file: ScannedFile, _ error: UploadPlanError, volume: VolumeIdentity, summary: inout RunSummary,
        sink: some EventSink
    ) async throws(JournalError) {
        summary.failed += 1
        let failure = StageFailure(kind: .notUploadable("\(error)"))
        logger.warning("file not uploaded", metadata: ["path": "\(file.path.display)", "reason": "\(error)"])
        try await journal.noteNotUploadable(path: file.path, volumeKey: volume.key, reason: failure.description)
        sink.emit(.failed(file, failure))
    }

    /// Journals a batch of outcomes and the uploads of its staged files in one transaction,
    /// and hands those uploads to the runner. What needs the files journalled first comes
    /// after the commit: a file that cannot be uploaded is noted as such, and the claim of a
    /// file whose parts are streaming waits, in a task of its own, for its stream's end.
    private func journalBatch(
        _ batch: [StageOutcome], volume: VolumeIdentity, planner: UploadPlanner, runner: UploadRunner,
        streamer: PartStreamer?, streamedClaims: inout StreamedClaims, summary: inout RunSummary, sink: some EventSink
    ) async throws(JournalError) {
        var claims: [UploadClaim] = []
        var unplannable: [(ScannedFile, UploadPlanError)] = []
        var streamed: [(StagedFile, UploadClaim)] = []
        for outcome in batch {
            switch outcome {
            case .staged(let staged):
                var claim: UploadClaim
                do { claim = try planner.claim(for: staged.file, fingerprint: staged.fingerprint) } catch {
                    unplannable.append((staged.file, error))
                    continue
                }
                claim.cardChecksums = staged.partChecksums
                if streamer?.isStreaming(staged.file.path) == true { streamed.append((staged, claim)) } else { claims.append(claim) }
            case .failed(let file, _):
                await streamer?.drop(file.path)
            }
        }
        let results = try await journal.record(
            batch, claiming: claims, volumeKey: volume.key, quarantineAfter: config.upload.quarantineAfter)
        for (file, error) in unplannable {
            await streamer?.drop(file.path)
            try await notUploadable(file, error, volume: volume, summary: &summary, sink: sink)
        }
        if let streamer {
            for (staged, claim) in streamed {
                try await streamedClaims.add { [claim] () async throws(JournalError) in
                    var claim = claim
                    let stream = await streamer.handOff(staged)
                    claim.streamed = stream?.parts
                    try await submit([claim], volume: volume, runner: runner, streamer: streamer)
                    withExtendedLifetime(stream) {}
                }
            }
        }
        await submit(claims, results, volume: volume, runner: runner, streamer: streamer)
    }

    /// Journals the uploads of `claims` and hands them to the runner: those planned now are
    /// read from the journal by the runner (it follows the card), a copy of another card's
    /// pending upload queues that one first, and an object the bucket holds already is
    /// looked at there.
    /// A claim whose parts were streamed and that plans no new upload has its stream aborted.
    private func submit(
        _ claims: [UploadClaim], volume: VolumeIdentity, runner: UploadRunner, streamer: PartStreamer? = nil
    ) async throws(JournalError) {
        await submit(claims, try await journal.claim(claims, volumeKey: volume.key), volume: volume, runner: runner, streamer: streamer)
    }

    /// Hands the journalled `results` of `claims` to the runner, as ``submit(_:volume:runner:streamer:)``.
    private func submit(
        _ claims: [UploadClaim], _ results: [ClaimResult], volume: VolumeIdentity, runner: UploadRunner,
        streamer: PartStreamer?
    ) async {
        var planned: [UploadRecord] = []
        for (claim, result) in zip(claims, results) {
            if case .planned = result {} else if claim.streamed != nil { await streamer?.abandon(claim) }
            switch result {
            case .planned(let record):
                planned.append(record)
            case .upload(let record) where record.volumeKey == volume.key:
                // Planned for this card, by this run or an earlier one: in the pages the runner reads.
                break
            case .upload(let record):
                runner.submit(record, resumed: record.phase != .created, checksums: record.partChecksums)
            case .alreadyInBucket(let record):
                runner.confirmInBucket(record)
            case let .copy(record, source):
                // Another card's pending upload of the content runs first, in this run.
                if source.isPending, source.volumeKey != volume.key {
                    runner.submit(source, resumed: source.phase != .created, checksums: source.partChecksums)
                }
                planned.append(record)
            }
        }
        runner.planned(planned)
    }

    /// The stager's settings: a run that uploads reads the card direct, and takes the parts'
    /// checksums from that read.
    private func stageSettings(uploading: Bool) -> StageSettings {
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

    /// Starts copying the files of `volume` that `known` says are to stage, as a second
    /// walk of the card finds them, into `area`: the stager on a thread of its own, its
    /// outcomes waiting (512 at most) for ``stage(_:known:summary:uploads:sink:stop:early:)``.
    /// Large files stream to `streams` once they are known (``LateStreams/settle(_:)``).
    private func startCopying(
        _ volume: VolumeIdentity, known: KnownFiles, stop: IngestStop, area knownArea: StagingArea? = nil,
        settings knownSettings: StageSettings? = nil
    ) throws(IngestError) -> Copying {
        let area: StagingArea
        if let shared = knownArea ?? upload?.service.staging { area = shared } else { area = try StagingArea(root: state.stagingPath) }
        let abandoned = area.removeAbandonedPartials()
        if abandoned > 0 { logger.info("removed partial copies left by an interrupted run", metadata: ["count": "\(abandoned)"]) }
        let unfreed = area.freeLeftovers()
        if unfreed > 0 { logger.info("deleting copies an interrupted run let go but did not delete", metadata: ["count": "\(unfreed)"]) }
        let streams = LateStreams()
        let stager = Stager(area: area, settings: knownSettings ?? stageSettings(uploading: upload != nil), streams: streams)
        stop.attach(stager)
        let outcomes = Batches<StageOutcome>()
        let rules = config.scan
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
        return Copying(stager: stager, streams: streams, outcomes: outcomes, task: task)
    }

    /// Copies the plan's files, as a second walk of the card finds them (or found them
    /// already: `early`, started before the scan), and journals their outcomes as they
    /// arrive, in batches of whatever piled up during the last commit (the stager waits when
    /// a full batch waits for the journal).
    private func stage(
        _ plan: ScanPlan, known: KnownFiles, summary: inout RunSummary,
        uploads: (planner: UploadPlanner, runner: UploadRunner)?, sink: some EventSink, stop: IngestStop, early: Copying?
    ) async throws(IngestError) {
        guard plan.totals.toStage > 0, stop.reason == nil else {
            await early?.cancel()
            return
        }
        let settings = early?.stager.settings ?? stageSettings(uploading: uploads != nil)
        // Large files' parts go out as they are copied, with the CRC32Cs of that read.
        let streamer = uploads.flatMap { uploads in
            settings.partChecksums != nil && config.upload.streamParts ? uploads.runner.partStreamer(planner: uploads.planner) : nil
        }
        let copying: Copying
        if let early { copying = early } else {
            copying = try startCopying(plan.volume, known: known, stop: stop, area: uploads?.runner.staging, settings: settings)
        }
        copying.streams.settle(streamer)
        let stager = copying.stager, outcomes = copying.outcomes, volume = plan.volume
        sink.emit(.stagingStarted(stager))
        // Copying ends with the last outcome, before the claims still waiting for streams.
        var stagingEnded = false
        defer { if !stagingEnded { sink.emit(.stagingEnded) } }

        var streamedClaims = StreamedClaims()
        while let batch = await outcomes.next() {
            do {
                if let (planner, runner) = uploads {
                    try await journalBatch(
                        batch, volume: volume, planner: planner, runner: runner, streamer: streamer,
                        streamedClaims: &streamedClaims, summary: &summary, sink: sink)
                } else {
                    try await journal.record(batch, volumeKey: volume.key, quarantineAfter: config.upload.quarantineAfter)
                }
            } catch {
                await copying.cancel()
                try? await streamedClaims.settle()
                await streamer?.finish()
                throw .journal(error)
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
        sink.emit(.stagingEnded)
        stagingEnded = true
        do throws(JournalError) { try await streamedClaims.settle() } catch {
            await streamer?.finish()
            throw .journal(error)
        }
        await streamer?.finish()
        try await copying.task.value.get()
    }

}

/// A card's copying under way (``Ingestor``): its stager, the streams its large files will
/// go to, its outcomes as they come, and the task that runs it.
private struct Copying: Sendable {
    let stager: Stager
    let streams: LateStreams
    let outcomes: Batches<StageOutcome>
    let task: Task<Result<Void, IngestError>, Never>

    /// Stops the copying, drops what it has not reported, and waits for its threads to let go
    /// of the card. Again, or once it ended, nothing more.
    func cancel() async {
        stager.cancel()
        streams.settle(nil)
        outcomes.discard()
        _ = await task.value
    }
}

/// The streams of a stager started before its run knew them (the labels checked, the
/// uploads planned): the reader asking whether to stream a file waits until the run says
/// (``settle(_:)``), which it does once the card is scanned. Files too small to stream are
/// never asked about, so they are copied meanwhile.
final class LateStreams: CopyStreams, @unchecked Sendable {
    private let condition = NSCondition()
    private var settled = false
    private var streams: (any CopyStreams)?

    /// The streams to use from now on, nil for none; only the first call counts.
    func settle(_ streams: (any CopyStreams)?) {
        condition.lock()
        defer { condition.unlock() }
        guard !settled else { return }
        self.streams = streams
        settled = true
        condition.broadcast()
    }

    private var current: (any CopyStreams)? {
        condition.lock()
        defer { condition.unlock() }
        while !settled { condition.wait() }
        return streams
    }

    func partSize(toStream file: ScannedFile) -> Int64? { current?.partSize(toStream: file) }
    func stream(_ copy: GrowingCopy) { current?.stream(copy) }
}

/// The claims of streamed files (``PartStreamer``), each waiting in a task of its own for its
/// stream's last part, so the run goes on meanwhile. At most ``PartStreamer/maxStreams`` wait
/// at once, as at most that many files stream: adding one more first waits for the oldest.
struct StreamedClaims {
    private var waiting: [Task<Result<Void, JournalError>, Never>] = []

    mutating func add(_ claim: @escaping @Sendable () async throws(JournalError) -> Void) async throws(JournalError) {
        if waiting.count >= PartStreamer.maxStreams { try await waiting.removeFirst().value.get() }
        waiting.append(Task {
            do throws(JournalError) {
                try await claim()
                return .success(())
            } catch {
                return .failure(error)
            }
        })
    }

    /// Waits for every claim; throws the first failure once all have ended.
    mutating func settle() async throws(JournalError) {
        var failure: JournalError?
        for claim in waiting {
            if case .failure(let error) = await claim.value { failure = failure ?? error }
        }
        waiting.removeAll()
        if let failure { throw failure }
    }
}
