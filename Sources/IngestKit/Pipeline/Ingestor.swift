import Foundation
import Logging

/// What a scan of a volume, compared with the journal, says should happen.
public struct ScanPlan: Sendable {
    public var volume: VolumeIdentity
    public var totals = ScanTotals()
    /// New files, files changed since they were staged, and files pending from earlier runs.
    public var toStage: [ScannedFile] = []
    /// Skipped entries worth telling (litter and exclusions are only counted).
    public var notableSkips: [(CardPath, SkipReason)] = []
    /// Files ingested that deserve a word (names that are not UTF-8, empty files).
    public var notices: [(ScannedFile, code: String, message: String)] = []

    /// Scans `volume` and sorts what it finds against what the journal `known`s: reads no
    /// file contents, changes nothing.
    public static func make(
        volume: VolumeIdentity, rules: ScanRules, known: [CardPath: FileRecord]
    ) async throws(IngestError) -> ScanPlan {
        let scanner = Scanner(rules: rules)
        return try await onDedicatedThread("ingest-scan") { () throws(IngestError) -> ScanPlan in
            var plan = ScanPlan(volume: volume)
            try scanner.scan(root: volume.rootPath) { finding in plan.add(finding, known: known) }
            return plan
        }
    }

    mutating func add(_ finding: ScanFinding, known: [CardPath: FileRecord]) {
        switch finding {
        case let .skipped(path, reason):
            totals.skipped += 1
            if reason.isNotable { notableSkips.append((path, reason)) }
        case .file(let file):
            if let record = known[file.path], record.state == .staged, record.size == file.size, record.mtime == file.mtime {
                totals.known += 1
                totals.knownBytes += file.size
                return
            }
            if !file.path.isValidUTF8 {
                notices.append((file, "name-not-utf8", "name is not valid UTF-8; ingested under its raw bytes"))
            }
            if file.size == 0 {
                notices.append((file, "empty-file", "empty file; ingested like any other"))
            }
            totals.toStage += 1
            totals.toStageBytes += file.size
            toStage.append(file)
        }
    }
}

/// Runs the pipeline for one volume: identify, lock, scan, stage, journal.
///
/// The journal's `staged` files are the uploader's queue: each file is recorded as soon as
/// its copy is safe, so uploading can start while the rest of the card is still copied.
public struct Ingestor: Sendable {
    public let config: Config
    public let state: StateDirectory
    public let journal: Journal
    public let logger: Logger

    public init(config: Config, state: StateDirectory, journal: Journal, logger: Logger) {
        self.config = config
        self.state = state
        self.journal = journal
        self.logger = logger
    }

    /// Ingests the volume at `path`: everything new is staged and journalled. Per-file
    /// failures are reported and counted; only what stops the whole run throws.
    public func ingest(path: String, sink: some EventSink) async throws(IngestError) -> RunSummary {
        let started = Date()
        let volume = try VolumeIdentity.identify(path: path)
        sink.emit(.volume(volume))
        let lock = try state.lockVolume(volume)
        defer { lock.release() }
        let known: [CardPath: FileRecord]
        do {
            try await journal.noteVolume(volume)
            known = try await journal.files(ofVolume: volume.key)
        } catch { throw journalError(error) }

        let plan = try await ScanPlan.make(volume: volume, rules: config.scan, known: known)
        for (path, reason) in plan.notableSkips { sink.emit(.skipped(path, reason)) }
        for notice in plan.notices { sink.emit(.notice(notice.0, code: notice.code, message: notice.message)) }
        sink.emit(.scanned(plan.totals))
        logger.info(
            "scanned volume",
            metadata: ["volume": "\(volume.key)", "to_stage": "\(plan.totals.toStage)", "known": "\(plan.totals.known)"])

        var summary = RunSummary(volume: volume.displayName)
        summary.scan = plan.totals
        do {
            try await stage(plan, summary: &summary, sink: sink)
        } catch {
            summary.stoppedBy = error.description
            summary.seconds = Date().timeIntervalSince(started)
            sink.emit(.finished(summary))
            throw error
        }
        summary.seconds = Date().timeIntervalSince(started)
        sink.emit(.finished(summary))
        return summary
    }

    /// Copies the plan's files and journals their outcomes as they arrive, in batches of
    /// whatever piled up during the last commit.
    private func stage(_ plan: ScanPlan, summary: inout RunSummary, sink: some EventSink) async throws(IngestError) {
        guard !plan.toStage.isEmpty else { return }
        let area = try StagingArea(root: state.stagingPath)
        let abandoned = area.removeAbandonedPartials()
        if abandoned > 0 { logger.info("removed partial copies left by an interrupted run", metadata: ["count": "\(abandoned)"]) }
        let stager = Stager(area: area, settings: config.staging)
        sink.emit(.stagingStarted(stager))

        let outcomes = Batches<StageOutcome>()
        let files = plan.toStage
        let volume = plan.volume
        let copying = Task { () async -> Result<Void, IngestError> in
            defer { outcomes.finish() }
            do throws(IngestError) {
                try await onDedicatedThread("ingest-stage") { () throws(IngestError) in
                    try stager.run(root: volume.rootPath, files: files, volumeName: volume.displayName) { outcomes.add($0) }
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        while let batch = await outcomes.next() {
            do { try await journal.record(batch, volumeKey: volume.key) } catch {
                stager.cancel()
                _ = await copying.value
                throw journalError(error)
            }
            for outcome in batch {
                switch outcome {
                case .staged(let staged):
                    summary.staged += 1
                    summary.stagedBytes += staged.file.size
                    if staged.deduplicated { summary.deduplicated += 1 }
                    sink.emit(.staged(staged))
                case let .failed(file, failure):
                    summary.failed += 1
                    logger.warning("file not staged", metadata: ["path": "\(file.path.display)", "reason": "\(failure)"])
                    sink.emit(.failed(file, failure))
                }
            }
        }
        try await copying.value.get()
    }

    private func journalError(_ error: any Error) -> IngestError {
        .stateUnusable(path: journal.path, reason: "journal write failed: \(error)")
    }
}
