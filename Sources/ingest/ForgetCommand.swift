import ArgumentParser
import IngestKit

/// `ingest forget ID`: drop an upload from the journal only.
struct ForgetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Remove an upload from the journal without telling the server.",
        discussion: """
            For an upload whose server is gone for good. Parts the server holds stay there \
            until a lifecycle rule (AbortIncompleteMultipartUpload) or `aws s3api \
            abort-multipart-upload` removes them; to free them now, use `ingest abort`. The \
            file stays staged: the next ingest of its card plans a new upload.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The upload's id (or a unique prefix), as `ingest status` lists it.", valueName: "id"))
    var id: String

    func run() async throws {
        _ = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            let (state, journal) = try common.openState(config)
            let record = try await common.findUpload(id, in: journal)
            let lock = try common.lockUpload(record, in: state)
            defer { lock.release() }
            try await common.removeUpload(record, note: "upload \(record.id) forgotten by ingest forget", from: journal)
            let left = record.uploadID.map { " The server may still hold multipart upload \($0) at \(record.key)." } ?? ""
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line([
                    "event": "upload_forgotten", "upload_id": .string(record.id), "key": .string(record.key),
                ]) + "\n")
            } else {
                ReportOutput.standardError.write("Forgot upload \(record.id) (\(record.key)).\(left)\n")
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }
}
