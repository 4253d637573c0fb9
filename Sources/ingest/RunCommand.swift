import ArgumentParser
import IngestKit

/// `ingest PATH`: scan, copy into staging, journal.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Ingest a card or directory: copy new files into staging (the default command).",
        discussion: """
            PATH is a card's mount point or any directory. Files already ingested (same path, \
            size and modification time) are not read again. Files that fail stay pending and \
            are retried on the next run; special files, links and operating-system litter are \
            reported and skipped. Empty files are ingested like any other.

            Examples:
              ingest /media/sd
              ingest /media/sd --verify --json
              ingest /media/sd --exclude '*.THM' --exclude MISC
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The card's mount point, or any directory.", valueName: "path"), completion: .directory)
    var path: String

    @Flag(name: .long, help: "Stage only; do not upload. (This version stages only.)")
    var noUpload = false

    @Flag(name: .long, help: "Read each staged copy back from disk and compare fingerprints.")
    var verify = false

    @Flag(name: .long, help: "Like --verify, and read the source on the card back too.")
    var verifySource = false

    @Option(name: .long, help: ArgumentHelp("Only ingest files matching this pattern (repeatable).", valueName: "glob"))
    var include: [String] = []

    @Option(name: .long, help: ArgumentHelp("Never ingest files or directories matching this pattern (repeatable).", valueName: "glob"))
    var exclude: [String] = []

    @Option(name: .long, help: ArgumentHelp("Free space to keep on the staging disk, like 2GiB (default 1GiB).", valueName: "size"))
    var reserve: String?

    func run() async throws {
        let logger = common.bootstrapLogging()
        let summary: RunSummary
        do throws(IngestError) {
            var config = try common.loadConfig()
            try apply(to: &config)
            let (state, journal) = try common.openState(config)
            let (sink, console) = common.makeReporter()
            let ingestor = Ingestor(config: config, state: state, journal: journal, logger: logger)
            let display = Task { await console?.runProgressDisplay() }
            defer { display.cancel() }
            summary = try await ingestor.ingest(path: path, sink: sink)
        } catch {
            throw fail(error, json: common.json)
        }
        if summary.exitStatus != .success { throw ExitCode(summary.exitStatus.rawValue) }
    }

    /// Flags override the configuration file and environment.
    private func apply(to config: inout Config) throws(IngestError) {
        if verifySource {
            config.staging.verify = .both
        } else if verify {
            config.staging.verify = .staged
        }
        if let reserve {
            config.staging.reserve = try Config.parseSize(reserve, key: "--reserve", file: nil)
        }
        do {
            config.scan.include += try include.map { pattern throws(GlobError) in try Glob(pattern) }
            config.scan.exclude += try exclude.map { pattern throws(GlobError) in try Glob(pattern) }
        } catch {
            throw .config(file: nil, key: "--include/--exclude", problem: error.description)
        }
    }
}
