import ArgumentParser
import IngestKit

@main
struct Ingest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Copy everything on a removable card into managed staging, verified by XXH3-128.",
        discussion: """
            `ingest PATH` scans the card mounted at PATH (or any directory), copies every new \
            file into the staging area while fingerprinting it in the same read, and records it \
            in the journal. Running it again on the same card copies nothing: files already \
            ingested are recognised by path, size and time, without being read.

            This version stages only; uploading to S3 is the next milestone, and will consume \
            the staged files the journal records.

            Exit status:
            \(ExitStatus.allCases.map { "  \($0.rawValue)  \($0.meaning)" }.joined(separator: "\n"))
            """,
        version: BuildInfo.versionLine,
        subcommands: [RunCommand.self, ScanCommand.self, StatusCommand.self],
        defaultSubcommand: RunCommand.self
    )
}
