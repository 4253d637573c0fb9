import ArgumentParser
import IngestKit

/// `ingest resume [ID…]`: finish what earlier runs left unfinished.
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Finish pending uploads (all of them, or those named), from their last acknowledged part.",
        discussion: """
            Each upload goes back to the bucket it was started for, as the journal recorded \
            it: no card and no configuration of the destination is needed. The staged copy is \
            checked against its fingerprint first; the server's parts are compared with the \
            journal's (ListParts) and only the missing ones are sent. An upload the server \
            completed before a crash is recognised and not sent again. The parts of a large \
            file sent while it was copied, by a run killed or cut off before it ended, become \
            that file's upload first, if the file was staged. After an unclean stop, one line \
            says what was recovered.

            `ingest status` lists the pending uploads and their ids; an id may be shortened \
            to any unique prefix. With no journal, nothing was ingested: it says so and \
            exits 0 (64 if ids were given); a journal it cannot read exits 73.
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var rate: UploadRateOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("Uploads to resume (default: every pending one).", valueName: "id"))
    var ids: [String] = []

    func run() async throws {
        let systemd = common.notifyReady()
        let logger = common.bootstrapLogging()
        let outcome: ResumeOutcome
        do throws(IngestError) {
            var config = try common.loadConfig()
            try rate.apply(to: &config)
            guard let (state, journal) = try common.openIngestedState(config) else {
                let nothing = common.nothingIngested(config, command: (["resume"] + ids).joined(separator: " "))
                if let id = ids.first { throw nothing.error(id: id) }
                return common.say(nothing, on: .standardError)  // no upload to resume: done
            }
            let (sink, reports) = common.makeReporting(progress, uploads: true, systemd: systemd)
            let service = try await common.makeUploadService(
                config: config, state: state, journal: journal, events: sink, wire: reports.progress.wire, logger: logger)
            try await service.recover(sink: sink)
            var records: [UploadRecord] = []
            if ids.isEmpty {
                records = try await PendingUploads.all(in: journal)
            } else {
                for id in ids {
                    let record = try await common.findUpload(id, in: journal)
                    guard record.isPending else {
                        throw .uploadRefused(id: record.id, reason: "it is \(record.phase.rawValue); there is nothing to resume")
                    }
                    records.append(record)
                }
            }
            reports.start()
            outcome = await PendingUploads.resume(
                records, service: service, custody: CustodyCreator(config: config, scene: nil), sink: sink)
            reports.stop()
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line(outcome.json) + "\n")
            } else {
                ReportOutput.standardError.line(outcome.text)
            }
        } catch {
            throw fail(error, json: common.json)
        }
        if let problem = outcome.problem {
            ReportOutput.standardError.line("ingest: error: \(problem)")
            throw ExitCode(problem.exitStatus.rawValue)
        }
    }
}
