import ArgumentParser
import Foundation
import IngestKit

/// `ingest status`: what the journal holds.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what the journal holds: files by state, staged copies, cards seen, recent failures.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        _ = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            let statePath = common.statePath(config)
            var summary = JournalSummary.empty
            if let journal = try common.readJournal(config) {
                do { summary = try await journal.summary() } catch {
                    throw .stateUnusable(path: journal.path, reason: "cannot read the journal: \(error)")
                }
            }
            if common.json {
                printJSON(summary, statePath: statePath)
            } else {
                printText(summary, statePath: statePath)
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }

    private func printText(_ summary: JournalSummary, statePath: String) {
        var lines = ["State directory: \(statePath)", "Files:"]
        for fileState in FileState.allCases {
            let tally = summary.files[fileState, default: .zero]
            lines.append("  \(fileState.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(tally.count) (\(ByteCount(tally.bytes)))")
        }
        lines.append("Staged copies: \(summary.stagedObjects.count) (\(ByteCount(summary.stagedObjects.bytes)))")
        lines.append("Volumes seen: \(summary.volumes.count)")
        for volume in summary.volumes {
            lines.append("  \(volume.name)  \(volume.key)  last seen \(volume.lastSeen.formatted(.iso8601))")
        }
        if !summary.recentFailures.isEmpty {
            lines.append("Recent failures (retried on the next run):")
            for file in summary.recentFailures {
                lines.append("  \(file.cardPath.display): \(file.lastError ?? "")")
            }
        }
        ReportOutput.standardOutput.write(lines.joined(separator: "\n") + "\n")
    }

    private func printJSON(_ summary: JournalSummary, statePath: String) {
        var object: [String: JSONValue] = ["event": "status", "state_dir": .string(statePath)]
        for fileState in FileState.allCases {
            let tally = summary.files[fileState, default: .zero]
            object["files_\(fileState.rawValue)"] = .int(Int64(tally.count))
            object["bytes_\(fileState.rawValue)"] = .int(tally.bytes)
        }
        object["staged_objects"] = .int(Int64(summary.stagedObjects.count))
        object["staged_bytes"] = .int(summary.stagedObjects.bytes)
        object["volumes"] = .int(Int64(summary.volumes.count))
        object["recent_failures"] = .int(Int64(summary.recentFailures.count))
        ReportOutput.standardOutput.write(JSONValue.line(object) + "\n")
    }
}
