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
            completed before a crash is recognised and not sent again.

            `ingest status` lists the pending uploads and their ids; an id may be shortened \
            to any unique prefix.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("Uploads to resume (default: every pending one).", valueName: "id"))
    var ids: [String] = []

    func run() async throws {
        let logger = common.bootstrapLogging()
        let totals: UploadTotals
        let problem: UploadError?
        do throws(IngestError) {
            let config = try common.loadConfig()
            let (state, journal) = try common.openState(config)
            let (sink, console) = common.makeReporter()
            var records: [UploadRecord] = []
            if ids.isEmpty {
                do { records = try await journal.pendingUploads() } catch {
                    throw .stateUnusable(path: journal.path, reason: "cannot read the journal: \(error)")
                }
            } else {
                for id in ids {
                    let record = try await common.findUpload(id, in: journal)
                    guard record.isPending else {
                        throw .uploadRefused(id: record.id, reason: "it is \(record.phase.rawValue); there is nothing to resume")
                    }
                    records.append(record)
                }
            }
            let runner = try common.makeUploadRunner(config: config, state: state, journal: journal, sink: sink, logger: logger)
            let display = Task { await console?.runProgressDisplay() }
            defer { display.cancel() }
            for record in records { runner.submit(record, resumed: true) }
            (totals, problem) = await runner.finish()
            report(totals, pending: records.count)
        } catch {
            throw fail(error, json: common.json)
        }
        if let problem {
            ReportOutput.standardError.write("ingest: error: \(problem)\n")
            throw ExitCode(problem.exitStatus.rawValue)
        }
    }

    private func report(_ totals: UploadTotals, pending: Int) {
        if common.json {
            ReportOutput.standardOutput.write(JSONValue.line([
                "event": "resume_summary", "pending": .int(Int64(pending)), "uploaded": .int(Int64(totals.uploaded)),
                "uploaded_bytes": .int(totals.uploadedBytes), "already_in_bucket": .int(Int64(totals.alreadyThere)),
                "failed": .int(Int64(totals.failed)), "not_attempted": .int(Int64(totals.notAttempted)),
                "staged_copies_removed": .int(Int64(totals.stagedCopiesRemoved)),
            ]) + "\n")
        } else {
            ReportOutput.standardError.write(
                "Resumed \(pending) uploads: \(totals.uploaded) uploaded (\(ByteCount(totals.uploadedBytes))), "
                    + "\(totals.alreadyThere) already in the bucket, \(totals.failed) failed, "
                    + "\(totals.notAttempted) not attempted\n")
        }
    }
}
