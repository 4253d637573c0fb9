import ArgumentParser
import Foundation
import IngestKit

/// `ingest abort ID`: give an upload up, on the server and locally.
struct AbortCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "abort",
        abstract: "Abort a pending upload on the server (freeing its parts), then forget it locally.",
        discussion: """
            Sends AbortMultipartUpload for the upload's id and for any other unfinished \
            multipart upload at the same key (one a killed run created but never journalled), \
            then removes the upload from the journal. Aborting an upload the server no longer \
            knows succeeds. The file stays staged: the next ingest of its card plans a new \
            upload. A completed upload cannot be aborted: its object is in the bucket.

            To drop only the local record and leave the server alone, use `ingest forget`.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The upload's id (or a unique prefix), as `ingest status` lists it.", valueName: "id"))
    var id: String

    func run() async throws {
        let logger = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            guard let (state, journal) = try common.openIngestedState(config) else {
                throw common.nothingIngested(config, command: "abort \(id)").error(id: id)
            }
            let record = try await common.findUpload(id, in: journal)
            try common.refuseCompleted(record)
            let lock = try common.lockUpload(record, in: state)
            defer { lock.release() }
            let client = try await common.makeStores(config: config, journal: journal, logger: logger).store(record.target)
            let aborted: Int
            do {
                // Others at the key are aborted only once older than the orphan sweep's age: a
                // younger one may be another station's, still being sent.
                let age = config.rescan.orphanUploadAge ?? RescanSettings.defaultOrphanUploadAge
                aborted = try await client.abortUploads(
                    key: record.key, known: record.uploadID, othersBefore: Date().addingTimeInterval(-TimeInterval(age.components.seconds)))
            } catch {
                throw .upload(UploadError(error, what: "AbortMultipartUpload \(record.key)", target: record.target))
            }
            try await common.removeUpload(record, note: "upload \(record.id) aborted by ingest abort", from: journal)
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line([
                    "event": "upload_aborted", "upload_id": .string(record.id), "key": .string(record.key),
                    "server_uploads_aborted": .int(Int64(aborted)),
                ]) + "\n")
            } else {
                ReportOutput.standardError.line(
                    "Aborted upload \(record.id) (\(record.key)): \(counted(aborted, "multipart upload")) freed on the server; "
                        + "the journal no longer holds it.")
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }
}
