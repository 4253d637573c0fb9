import Foundation

/// What resuming pending uploads came to: `ingest resume`, and the first step of `ingest rescan`.
public struct ResumeOutcome: Sendable, Equatable {
    /// Uploads that were pending and handed to the runner.
    public var pending: Int
    public var totals: UploadTotals
    /// The failure that decides the exit status (a destination problem, else the worst
    /// failure of one object); nil when every upload finished or was left to another process.
    public var problem: UploadError?
    /// Generations of cards' ASC MHL histories put in the bucket: left by runs that stopped
    /// between their last object and their history.
    public var historyGenerations = 0

    public init(pending: Int, totals: UploadTotals, problem: UploadError?) {
        self.pending = pending
        self.totals = totals
        self.problem = problem
    }

    /// The `resume_summary` NDJSON event.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "resume_summary", "pending": .int(pending), "uploaded": .int(totals.uploaded),
            "uploaded_bytes": .int(totals.uploadedBytes), "already_in_bucket": .int(totals.alreadyThere),
            "copied_in_bucket": .int(totals.copied),
            "failed": .int(totals.failed), "not_attempted": .int(totals.notAttempted),
            "staged_copies_removed": .int(totals.stagedCopiesRemoved),
            "mhl_generations": .int(Int64(historyGenerations)),
        ]
        object["upload_error"] = problem.map { .string($0.message) }
        return object
    }

    /// One line for people.
    public var text: String {
        "Resumed \(counted(pending, "upload")): \(totals.uploaded) uploaded (\(ByteCount(totals.uploadedBytes))"
            + (totals.copied > 0 ? ", \(totals.copied) of them copied in the bucket), " : "), ")
            + "\(totals.alreadyThere) already in the bucket, \(totals.failed) failed, "
            + "\(totals.notAttempted) not attempted"
    }
}

/// Finishing what earlier runs left unfinished, each upload to the destination the journal
/// recorded for it.
public enum PendingUploads {
    /// Every pending upload in the journal, oldest first, but for those carrying a file of
    /// one of `volumeKeys` (the cards a rescan is about to ingest, which finish their own).
    public static func all(
        in journal: Journal, exceptOfVolumes volumeKeys: Set<String> = []
    ) async throws(IngestError) -> [UploadRecord] {
        do { return try await journal.pendingUploads(exceptOfVolumes: volumeKeys) } catch {
            throw .journal(error)
        }
    }

    /// Runs `records` on a runner of `service`, reporting to `sink`, and waits for them all.
    /// An upload another process is running is left to it. Then the cards' histories left
    /// unwritten or unuploaded are finished (``UploadService/finishCustody(creator:)``).
    public static func resume(
        _ records: [UploadRecord], service: UploadService, custody: CustodyCreator, sink: any EventSink
    ) async -> ResumeOutcome {
        let runner = service.runner(sink: sink)
        for record in records { runner.submit(record, resumed: true) }
        var (totals, problem) = await runner.finish()
        // What the outcome and the exit status report rests on the records.
        do { try await service.journal.sync() } catch { problem = problem ?? .journal(error) }
        let history = await service.finishCustody(creator: custody)
        var outcome = ResumeOutcome(pending: records.count, totals: totals, problem: problem ?? history.error)
        outcome.historyGenerations = history.uploaded.count
        return outcome
    }
}
