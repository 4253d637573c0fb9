import Foundation

/// How one card's ingest under `ingest watch` ended: the one line the daemon logs for it,
/// and its `--json` event.
public struct CardReport: Sendable {
    public enum Outcome: String, Sendable {
        /// Everything on the card was ingested, or was already.
        case done
        /// Some files or uploads failed; they stay pending for the next time.
        case partial
        /// The card went (or failed) before the end: what was staged was uploaded, the rest
        /// is pending until it comes back.
        case removed
        /// `watch` was asked to stop: what is left is pending.
        case stopped
        /// Another ingest process has the card; it finishes it there.
        case busy
        /// Not a card ingest takes: mounted at a system place, no file system…
        case refused
        /// The ingest ended with an error (the message says which).
        case failed
    }

    public var kernelName: String
    public var node: String
    public var label: String?
    public var uuid: String?
    public var outcome: Outcome
    public var summary: RunSummary?
    /// The error or problem, when there is one.
    public var message: String?
    public var seconds: Double

    public init(
        kernelName: String, node: String, label: String?, uuid: String?, outcome: Outcome, summary: RunSummary?,
        message: String?, seconds: Double
    ) {
        self.kernelName = kernelName
        self.node = node
        self.label = label
        self.uuid = uuid
        self.outcome = outcome
        self.summary = summary
        self.message = message
        self.seconds = seconds
    }

    /// Classifies how a card's ingest ended. `summary` is the run's summary when it ended
    /// with an error (from its `finished` event).
    public static func make(device: UdevDevice, outcome ingested: IngestOutcome, stop: IngestStop?, seconds: Double) -> CardReport {
        var report = CardReport(
            kernelName: device.kernelName, node: device.node ?? "/dev/\(device.kernelName)",
            label: device.properties["ID_FS_LABEL"].flatMap { $0.isEmpty ? nil : $0 },
            uuid: device.properties["ID_FS_UUID"].flatMap { $0.isEmpty ? nil : $0 }, outcome: .done, summary: ingested.summary,
            message: nil, seconds: seconds)
        switch Result(catching: { () throws(IngestError) in try ingested.get() }) {
        case .success(let summary):
            if let reason = stop?.reason {
                report.outcome = reason == .shutdown ? .stopped : .removed
            } else if let problem = summary.uploadError {
                report.outcome = .failed
                report.message = problem.description
            } else {
                report.outcome = summary.exitStatus == .success ? .done : .partial
            }
        case .failure(let error):
            report.message = error.description
            switch error {
            case .deviceBusy, .volumeBusy: report.outcome = .busy
            case .systemDevice, .notACard: report.outcome = .refused
            case .volumeLost: report.outcome = .removed
            default: report.outcome = stop?.reason == .shutdown ? .stopped : .failed
            }
        }
        return report
    }

    /// Files that failed to stage or upload.
    var failedFiles: Int { (summary?.failed ?? 0) + (summary?.uploads?.failed ?? 0) }
    /// Uploads left for later: failed, not attempted, or interrupted by a stop.
    var uploadsPending: Int {
        guard let uploads = summary?.uploads else { return 0 }
        return uploads.failed + uploads.notAttempted + uploads.interrupted
    }

    /// The one line logged for the card, e.g. `card sdb1 (/dev/sdb1, label DRONE, UUID 1B6E-2F0A):
    /// done: 312 files staged (1.2 GiB), 312 uploaded (1.2 GiB), 0 failed, 0 uploads pending, in 95.2 s`.
    public var line: String {
        var who = "card \(kernelName) (\(node)"
        if let label { who += ", label \(label)" }
        if let uuid { who += ", UUID \(uuid)" }
        who += ")"
        var parts: [String] = []
        if let summary {
            parts.append("\(counted(summary.staged, "file")) staged (\(ByteCount(summary.stagedBytes)))")
            if let uploads = summary.uploads {
                var uploaded = "\(uploads.uploaded) uploaded (\(ByteCount(uploads.uploadedBytes)))"
                if uploads.copied > 0 { uploaded += ", \(uploads.copied) of them copied in the bucket" }
                if uploads.alreadyThere > 0 { uploaded += ", \(uploads.alreadyThere) already in the bucket" }
                parts.append(uploaded)
            }
            parts.append("\(failedFiles) failed")
            if summary.uploads != nil { parts.append("\(counted(uploadsPending, "upload")) pending") }
            parts.append(String(format: "in %.1f s", seconds))
        }
        var text = "\(who): \(outcome.rawValue)"
        if !parts.isEmpty { text += ": " + parts.joined(separator: ", ") }
        if let message { text += (parts.isEmpty ? ": " : "; ") + message }
        return text
    }

    /// The `card` event of `ingest watch --json`.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "card", "card": .string(kernelName), "device": .string(node), "outcome": .string(outcome.rawValue),
            "seconds": .double(seconds), "failed": .int(failedFiles),
        ]
        object["fs_label"] = label.map(JSONValue.string)
        object["fs_uuid"] = uuid.map(JSONValue.string)
        object["message"] = message.map(JSONValue.string)
        if let summary {
            object["staged"] = .int(summary.staged)
            object["staged_bytes"] = .int(summary.stagedBytes)
            object["known"] = .int(summary.scan.known)
            if let uploads = summary.uploads {
                object["uploaded"] = .int(uploads.uploaded)
                object["uploaded_bytes"] = .int(uploads.uploadedBytes)
                object["already_in_bucket"] = .int(uploads.alreadyThere)
                object["copied_in_bucket"] = .int(uploads.copied)
                object["uploads_pending"] = .int(uploadsPending)
            }
        }
        return object
    }
}
