import ArgumentParser
import IngestKit

/// How the commands that copy and upload (`ingest PATH`, `resume`, `rescan`) tell their
/// progress: the line on a terminal, `progress` events with `--json`, and systemd's `STATUS=`.
struct ProgressOptions: ParsableArguments {
    @Flag(
        inversion: .prefixedNo,
        help: "Draw the live progress line on standard error (default: only when it is a terminal, and not with --json).")
    var progress: Bool?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How often --json prints a progress event, and systemd hears the STATUS= line, like 2s or 500ms (default 2s).",
            valueName: "duration"))
    var progressInterval: String?

    func validate() throws {
        guard let progressInterval else { return }
        let interval: Duration
        do { interval = try Config.parseDuration(progressInterval, key: "--progress-interval", file: nil) } catch {
            throw ValidationError(error.description)
        }
        if interval < .milliseconds(100) {
            throw ValidationError("--progress-interval \(progressInterval) is too short: give at least 100ms.")
        }
    }

    var interval: Duration {
        progressInterval.flatMap { try? Config.parseDuration($0, key: "--progress-interval", file: nil) }
            ?? ProgressReports.defaultInterval
    }
}

extension CommonOptions {
    /// Under systemd (`Type=notify`): the service is up. Called first thing, before anything
    /// can fail, so that the unit never waits in "activating" for a run that ended early.
    func notifyReady() -> SystemdNotifier? {
        let systemd = SystemdNotifier(environment: environment)
        systemd?.ready()
        return systemd
    }

    /// The job's reporter (NDJSON on standard output with `--json`, else the human view on
    /// standard error) fed through the job's progress, and what tells that progress. The
    /// caller starts the reports and stops them when the job ends.
    func makeReporting(
        _ options: ProgressOptions, uploads: Bool, systemd: SystemdNotifier?
    ) -> (sink: any EventSink, reports: ProgressReports) {
        let progress = JobProgress(uploads: uploads)
        let drawn = options.progress ?? (!json && ReportOutput.standardError.isTerminal)
        let line = drawn ? ProgressLine(output: .standardError) : nil
        PrintableLogHandler.progressLine.withLock { $0 = line }
        let reporter: any EventSink = json ? JSONLinesReporter() : ConsoleReporter(line: line)
        let reports = ProgressReports(
            progress: progress, line: line, events: json ? .standardOutput : nil, systemd: systemd, interval: options.interval)
        return (ProgressTap(progress: progress, next: reporter), reports)
    }
}
