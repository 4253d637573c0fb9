import ArgumentParser
import IngestKit

@main
struct Ingest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Copy everything on a removable card into managed staging, verified by XXH3-128.",
        usage: """
            ingest <path> [--state-dir <dir>] [--config <file>] [--json] [--verify] [...]
            ingest scan <path> [--list] [--json]
            ingest status [--json]
            """,
        discussion: """
            `ingest PATH` scans the card mounted at PATH (or any directory), copies every new \
            file into the staging area while fingerprinting it in the same read, and records it \
            in the journal. Running it again on the same card copies nothing: files already \
            ingested are recognised by path, size and time, without being read.

            This version stages only; uploading to S3 is the next milestone, and will consume \
            the staged files the journal records.

            Options every command takes: --config <file>, --state-dir <dir>, --json, -v. \
            See `ingest run --help` for the options of an ingest.

            Environment:
              INGEST_CONFIG           configuration file (default /etc/ingest/ingest.toml)
              INGEST_STATE_DIR        journal and staging directory
              INGEST_STAGING_RESERVE  free space to keep on the staging disk (e.g. 2GiB)
              INGEST_STAGING_VERIFY   off, staged or both
              INGEST_LOG_LEVEL        trace, debug, info, notice, warning (default), error

            Exit status:
            \(ExitStatus.allCases.map { "  \(String($0.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0))\($0.meaning)" }.joined(separator: "\n"))
            """,
        version: BuildInfo.versionLine,
        subcommands: [RunCommand.self, ScanCommand.self, StatusCommand.self],
        defaultSubcommand: RunCommand.self
    )
}
