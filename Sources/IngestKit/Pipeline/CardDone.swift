import Foundation
import Logging

/// What follows every card's ingest, whichever command ingested it: `ingest PATH`,
/// `--device`, `watch` and `rescan` all end a card in ``Ingestor/ingest(path:sink:stop:)``,
/// which hands its outcome here once. The card becomes the journal's last card, the
/// metrics file (`[rescan] metrics_file`, `--metrics-file`) is rewritten, and the
/// `[hooks] on_card_done` program is run.
///
/// None of it changes how the ingest ended: each failure is logged and the run's exit
/// status stays the card's. A card that was never scanned (another ingest has it, it is
/// no card, its path cannot be read) has nothing to report and gets none of it.
struct CardDone: Sendable {
    let config: Config
    let journal: Journal
    let logger: Logger

    func finish(_ outcome: IngestOutcome) async {
        guard let volume = outcome.volume, let summary = outcome.summary else { return }
        let exitStatus = outcome.error?.exitStatus ?? summary.exitStatus
        do { try await journal.noteCardRun(CardRunRecord(summary, exitStatus: exitStatus, endedAt: Date())) } catch {
            logger.warning("could not record the card's end for the metrics", metadata: ["error": "\(error)"])
        }
        if let path = config.rescan.metricsFile { await writeMetrics(to: path) }
        if let command = config.hooks.onCardDone {
            let left: [FileState: JournalSummary.Tally]
            do { left = try await journal.files(byStateOfVolume: volume.key) } catch {
                logger.warning("could not count the card's files left; the hook is not run", metadata: ["error": "\(error)"])
                return
            }
            let document = CardDoneHook.document(volume: volume, summary: summary, error: outcome.error, left: left)
            await CardDoneHook(command: command, timeout: config.hooks.timeout, environment: CardDoneHook.environment())
                .run(document, card: volume.displayName, logger: logger)
        }
    }

    /// The metrics of the whole journal, as `ingest rescan` writes them (``IngestMetrics``).
    private func writeMetrics(to path: String) async {
        do throws(IngestError) {
            let totals: JournalTotals
            do { totals = try await journal.totals() } catch { throw .journal(error) }
            try PrometheusText.write(PrometheusText.render(IngestMetrics.families(totals)), to: path)
        } catch {
            logger.warning("could not write the metrics file", metadata: ["path": "\(path)", "error": "\(error)"])
        }
    }
}

extension CardRunRecord {
    init(_ summary: RunSummary, exitStatus: ExitStatus, endedAt: Date) {
        self.init(endedAt: endedAt, exitStatus: exitStatus.rawValue, seconds: summary.seconds)
        staged = summary.staged
        stagedBytes = summary.stagedBytes
        uploaded = summary.uploads?.uploaded ?? 0
        uploadedBytes = summary.uploads?.uploadedBytes ?? 0
        failed = summary.failed + (summary.uploads?.failed ?? 0)
    }
}

/// `[hooks] on_card_done`: a program of the station's configuration run once per card,
/// after the card's ingest ended (its last object verified, or the run over with work
/// pending), with the card's summary as one JSON object on its standard input
/// (``document(volume:summary:error:left:)``).
///
/// It runs through ``ShellCommand`` in ingest's own process, so under the same sandbox
/// (`ingest@.service`'s restrictions are the hook's), in a process group of its own that
/// is killed whole once ``timeout`` has passed. Its output goes to the log only when it
/// fails. A hook delays the card's end by its timeout at most and never changes how the
/// ingest ended.
struct CardDoneHook: Sendable {
    let command: String
    let timeout: Duration
    let environment: [String: String]

    /// How much of the hook's output (standard output and error together) a failure logs:
    /// its end, where causes are.
    static let outputLogged = 2000

    /// Ingest's own environment without the AWS keys: the hook has no need of the
    /// station's secrets (a credentials file it is pointed at stays its to read).
    static func environment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        environment.filter { !["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"].contains($0.key) }
    }

    /// Runs the hook with `document` (and a line feed) on its standard input, on a thread of
    /// its own, and logs how it ended: a failure or a timeout as a warning.
    func run(_ document: [String: JSONValue], card: String, logger: Logger) async {
        let shell = ShellCommand(
            command: command, environment: environment, input: Array((JSONValue.line(document) + "\n").utf8),
            outputJoinsErrors: true)
        let timeout = timeout
        let ended = await onDedicatedThread("ingest-hook") {
            Result { () throws(ShellCommand.Failure) in try shell.run(timeout: timeout, outputLimit: 0) }
        }
        var metadata: Logger.Metadata = ["card": "\(card)", "command": "\(command)"]
        switch ended {
        case .success(let result) where result.termination == .exited(0):
            logger.info("on_card_done hook exited with status 0", metadata: metadata)
        case .success(let result):
            let output = String(decoding: result.stderr.suffix(Self.outputLogged), as: UTF8.self)
            metadata["output"] = "\(output.trimmingCharacters(in: .whitespacesAndNewlines))"
            logger.warning("on_card_done hook \(result.termination); the ingest's own status stands", metadata: metadata)
        case .failure(.timedOut):
            logger.warning(
                "on_card_done hook still ran after [hooks] timeout = \(timeout.configText): killed, with every process it started",
                metadata: metadata)
        case .failure(.notStarted(let error)):
            logger.warning("on_card_done hook could not be started: \(error)", metadata: metadata)
        case .failure(.outputTooLarge):
            preconditionFailure("a hook's output goes with its errors, which keep their end and never overflow")
        }
    }

    /// The JSON object the hook reads: the card's identity (the `volume` event's fields:
    /// `key`, `root`, `mount_point`, `fs_type`, and for a card `device`, `fs_uuid`,
    /// `fs_label`, `serial`, `vendor`, `model`, `bus`), the run's `summary` event's fields,
    /// and what only the end knows: `files` and `bytes` (the card's files as scanned),
    /// `objects` and `objects_bytes` (its files in the bucket, verified), `pending` and
    /// `pending_bytes` (its files not there yet), `failed` (files that failed now, to stage
    /// or to upload), `exit_status` and `error` (what stopped the run, when something did).
    /// There is no manifest yet, so no `manifest_key`.
    static func document(
        volume: VolumeIdentity, summary: RunSummary, error: IngestError?, left: [FileState: JournalSummary.Tally]
    ) -> [String: JSONValue] {
        var object = IngestEvent.volume(volume).json.merging(IngestEvent.finished(summary).json) { $1 }
        object["event"] = "card_done"
        object["files"] = .int(Int64(summary.scan.toStage + summary.scan.known))
        object["bytes"] = .int(summary.scan.toStageBytes.addingSaturating(summary.scan.knownBytes))
        let inBucket = left[.uploaded, default: .zero]
        let pending = left[.pending, default: .zero] + left[.staged, default: .zero]
        object["objects"] = .int(Int64(inBucket.count))
        object["objects_bytes"] = .int(inBucket.bytes)
        object["pending"] = .int(Int64(pending.count))
        object["pending_bytes"] = .int(pending.bytes)
        object["failed"] = .int(Int64(summary.failed + (summary.uploads?.failed ?? 0)))
        if let error {
            object["exit_status"] = .int(Int64(error.exitStatus.rawValue))
            object["error"] = .string(error.description)
        }
        return object
    }
}
