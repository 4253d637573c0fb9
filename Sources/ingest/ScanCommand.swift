import ArgumentParser
import IngestKit

/// `ingest scan PATH`: the dry run.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Show what ingesting PATH would do, without copying or recording anything.",
        discussion: """
            Lists counts and bytes of files that would be copied, files already ingested, and \
            everything that would be skipped, with the reason. Reads no file contents.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The card's mount point, or any directory.", valueName: "path"), completion: .directory)
    var path: String

    @Flag(name: .long, help: "List every file that would be copied.")
    var list = false

    func run() async throws {
        _ = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            let volume = try VolumeIdentity.identify(path: path)
            let known = try common.readJournal(config).map { KnownFiles.journal($0, volumeKey: volume.key) } ?? .records()
            let plan = try await ScanPlan.make(volume: volume, rules: config.scan, known: known)
            // A dry run: its first line says "Scanning", not "Ingesting".
            let sink: any EventSink = common.json ? JSONLinesReporter() : ConsoleReporter(action: .scanning)
            sink.emit(.volume(plan.volume))
            for (path, reason) in plan.notableSkips { sink.emit(.skipped(path, reason)) }
            for notice in plan.notices { sink.emit(.notice(notice.0, code: notice.code, message: notice.message)) }
            if list || common.json {
                // A second walk lists them, as staging takes them: the scan holds no list.
                let json = common.json
                let files = FilesToStage(volume: volume, rules: config.scan, known: known)
                try await files.each { file in
                    if json {
                        ReportOutput.standardOutput.write(
                            JSONValue.line(["event": "would-stage", "path": .string(file.path.display), "size": .int(file.size)])
                                + "\n")
                    } else {
                        // The name escaped (a card's names are hostile), the tab between the columns not.
                        ReportOutput.standardOutput.write("\(Printable.escaped(file.path.display))\t\(file.size)\n")
                    }
                }
            }
            sink.emit(.scanned(plan.totals))
        } catch {
            throw fail(error, json: common.json)
        }
    }
}
