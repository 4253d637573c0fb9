import ArgumentParser
import IngestKit

/// `ingest forget ID`: drop an upload from the journal only, or give up a quarantined file.
struct ForgetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Remove a pending upload from the journal without telling the server, or give up a quarantined file.",
        discussion: """
            With a pending upload's id: for an upload whose server is gone for good. Parts the server \
            holds stay there until a lifecycle rule (AbortIncompleteMultipartUpload), ingest \
            rescan's sweep of unknown uploads or `aws s3api abort-multipart-upload` removes \
            them; to free them now, use `ingest abort`. The file stays staged: the next ingest \
            of its card plans a new upload. A completed upload cannot be forgotten: its \
            object is in the bucket, and its record is what says its files are uploaded.

            With a quarantined file's id (file-N, as `ingest status` lists it): the file is \
            given up. It is not staged again while its size and time stay the same, and its \
            staged copy is deleted unless another file still needs it. Nothing is uploaded.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(
        help: ArgumentHelp(
            "The upload's id (or a unique prefix), or a quarantined file's file-N, as `ingest status` lists them.",
            valueName: "id"))
    var id: String

    func run() async throws {
        _ = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            guard let (state, journal) = try common.openIngestedState(config) else {
                throw common.nothingIngested(config, command: "forget \(id)").error(id: id)
            }
            if let row = QuarantinedFileID.row(id) { return try await forgetFile(row: row, state: state, journal: journal) }
            let record = try await common.findUpload(id, in: journal)
            try common.refuseCompleted(record)
            let lock = try common.lockUpload(record, in: state)
            defer { lock.release() }
            try await common.removeUpload(record, note: "upload \(record.id) forgotten by ingest forget", from: journal)
            let left = record.uploadID.map { " The server may still hold multipart upload \($0) at \(record.key)." } ?? ""
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line([
                    "event": "upload_forgotten", "upload_id": .string(record.id), "key": .string(record.key),
                ]) + "\n")
            } else {
                ReportOutput.standardError.line("Forgot upload \(record.id) (\(record.key)).\(left)")
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }

    private func forgetFile(row: Int64, state: StateDirectory, journal: Journal) async throws(IngestError) {
        let forgotten: (FileRecord, Fingerprint?)?
        do { forgotten = try await journal.forgetFile(row: row, note: "given up by ingest forget \(id)") } catch {
            throw .journal(error)
        }
        guard let (file, freed) = forgotten else { throw .unknownFile(id) }
        var freedBytes: Int64 = 0
        if let freed {
            let staging = try StagingArea(root: state.stagingPath)
            if staging.remove(freed) {
                freedBytes = file.size
                do { try await journal.noteStagedCopiesRemoved([freed]) } catch {
                    throw .journal(error)
                }
            }
        }
        if common.json {
            ReportOutput.standardOutput.write(JSONValue.line([
                "event": "file_forgotten", "id": .string(id), "path": .string(file.cardPath.display),
                "volume": .string(file.volumeKey), "staged_bytes_freed": .int(freedBytes),
            ]) + "\n")
        } else {
            ReportOutput.standardError.line("Forgot \(file.cardPath.display) of \(file.volumeKey); \(ByteCount(freedBytes)) of staging freed.")
        }
    }
}
