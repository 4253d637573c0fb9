import ArgumentParser
import Foundation
import IngestKit
import Logging
import Synchronization

/// Options every subcommand takes: where the configuration and state live, how to report.
struct CommonOptions: ParsableArguments {
    @Option(
        name: .long, help: ArgumentHelp(
            "Configuration file (default /etc/ingest/ingest.toml): a regular file of at most 1 MiB, or /dev/null for none.",
            valueName: "file"),
        completion: .file(extensions: ["toml"]))
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Directory for the journal and staging (default /var/lib/ingest for root, else ~/.local/state/ingest).",
            valueName: "dir"),
        completion: .directory)
    var stateDir: String?

    @Flag(name: .long, help: "Print NDJSON events on standard output, one object per line, for machines.")
    var json = false

    @Flag(name: .shortAndLong, help: "Log more to standard error (-v info, -vv debug).")
    var verbose: Int

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// Sets up logging (swift-log to standard error); call once, first.
    func bootstrapLogging() -> Logger {
        let level: Logger.Level =
            switch verbose {
            case 0: environment["INGEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
            case 1: .info
            default: .debug
            }
        LoggingSystem.bootstrap { label in
            var handler = PrintableLogHandler(StreamLogHandler.standardError(label: label))
            handler.logLevel = level
            return handler
        }
        return Logger(label: "ingest")
    }

    /// The configuration: file (`--config`, `INGEST_CONFIG`, or the default), then environment.
    func loadConfig() throws(IngestError) -> Config {
        let path = config ?? environment["INGEST_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        var loaded = try Config.load(explicitPath: path, environment: environment)
        if let stateDir { loaded.stateDirectory = stateDir }
        return loaded
    }

    /// The state directory, absolute: a relative `--state-dir` is taken from the working directory.
    func statePath(_ config: Config) -> String {
        let path = config.stateDirectory ?? StateDirectory.defaultPath(environment: environment)
        return path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    /// Opens (creating if needed) the state directory and its journal.
    func openState(_ config: Config) throws(IngestError) -> (StateDirectory, Journal) {
        let state = try StateDirectory(path: statePath(config))
        do { return (state, try Journal(path: state.journalPath)) } catch { throw .journal(error) }
    }

    /// The journal as it is, for commands that change nothing; nil when none exists yet. One
    /// that exists and cannot be read is an error (73), never taken for an empty one.
    func readJournal(_ config: Config) throws(IngestError) -> Journal? {
        do { return try Journal.openForReading(path: StateDirectory.journalPath(in: statePath(config))) } catch {
            throw .journal(error)
        }
    }

    /// The state directory and its journal, for the commands that act on what was ingested
    /// (resume, abort, forget): nil when there is no journal, and then nothing is created
    /// (say ``nothingIngested(_:command:)``); an error (73) when there is one that cannot be read.
    func openIngestedState(_ config: Config) throws(IngestError) -> (StateDirectory, Journal)? {
        guard try readJournal(config) != nil else { return nil }
        return try openState(config)
    }

    /// There is no journal: nothing was ingested with this state directory yet.
    func nothingIngested(_ config: Config, command: String) -> NothingIngested {
        NothingIngested(statePath: statePath(config), command: command)
    }

    /// Says `nothing`: with --json, its `nothing_ingested` event on standard output; otherwise
    /// its sentence on `output`.
    func say(_ nothing: NothingIngested, on output: ReportOutput) {
        if json {
            ReportOutput.standardOutput.write(JSONValue.line(nothing.json) + "\n")
        } else {
            output.line(nothing.message)
        }
    }

    /// The event sink `--json` asks for: NDJSON on stdout, or the human view on stderr.
    /// (The commands that copy and upload add their progress: ``makeReporting(_:uploads:systemd:)``.)
    func makeReporter() -> any EventSink {
        json ? JSONLinesReporter() : ConsoleReporter()
    }
}

/// Prints an error the way every subcommand does and turns it into the documented exit status.
func fail(_ error: IngestError, json: Bool) -> ExitCode {
    if json {
        ReportOutput.standardOutput.write(
            JSONValue.line([
                "event": "error", "message": .string(error.description), "exit_status": .int(Int64(error.exitStatus.rawValue)),
            ]) + "\n")
    }
    ReportOutput.standardError.line("ingest: error: \(error)")
    return ExitCode(error.exitStatus.rawValue)
}

/// Says an error that is no failure (a second trigger for a card another process has: the
/// other one does the work), as a notice event and a line on standard error.
func notice(_ error: IngestError, code: String, json: Bool) {
    if json {
        ReportOutput.standardOutput.write(
            JSONValue.line(["event": "notice", "code": .string(code), "message": .string(error.description)]) + "\n")
    }
    ReportOutput.standardError.line("ingest: \(error)")
}

/// Logs with what a card controls made printable (``Printable``): a file name with a
/// newline or an escape sequence cannot forge a line in journald or drive the terminal.
/// While a progress line is drawn on the terminal (``progressLine``), each log line is
/// written aside it, on a line of its own.
struct PrintableLogHandler: LogHandler {
    /// The progress line drawn on standard error, if one is.
    static let progressLine = Mutex<ProgressLine?>(nil)

    private var inner: StreamLogHandler

    init(_ inner: StreamLogHandler) { self.inner = inner }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(Printable.escaped(event.message.description))"
        event.metadata = event.metadata?.mapValues { .string(Printable.escaped($0.description)) }
        if let line = Self.progressLine.withLock({ $0 }) {
            line.writingAside { inner.log(event: event) }
        } else {
            inner.log(event: event)
        }
    }
}
