import Foundation

/// What a scan found, before anything is copied.
public struct ScanTotals: Sendable, Equatable, Codable {
    /// Files to copy now: new, changed since last time, or pending from an earlier run.
    public var toStage = 0
    public var toStageBytes: Int64 = 0
    /// Files the journal already has staged with the same size and time: not read again.
    public var known = 0
    public var knownBytes: Int64 = 0
    /// Entries passed over (litter, exclusions, special files, links…).
    public var skipped = 0
    /// Of ``skipped``, entries whose content is not ingested by no rule of the user's
    /// (``SkipReason/losesContent``): the run fails, and the card is not safe to erase.
    public var lost = 0
    /// Skips and notices counted but not reported one by one, past ``ScanPlan/reportLimit``.
    public var unlisted = 0
    public init() {}
}

/// What a run did, for the final summary and the exit status.
public struct RunSummary: Sendable, Equatable, Codable {
    public var volume: String
    public var scan = ScanTotals()
    public var staged = 0
    public var stagedBytes: Int64 = 0
    /// Staged files whose content the staging area already had.
    public var deduplicated = 0
    public var failed = 0
    public var seconds: Double = 0
    /// Set when the run stopped early (staging full, card lost); what was not reached stays pending.
    public var stoppedBy: String?
    /// The signal (SIGTERM, SIGINT) that stopped the run: the process ends by it, whatever
    /// ``exitStatus`` says of the work (``processStatus``).
    public var stopSignal: Int32?
    /// What uploading did; nil when the run staged only.
    public var uploads: UploadTotals?
    /// The failure that decides the exit status: a destination problem, else the worst
    /// failure of one object.
    public var uploadError: UploadError?
    /// Files and uploads of the card left quarantined after the run (``FileRecord/quarantined``).
    public var quarantined = 0
    /// The exit status of the error that ended the run, which the process exits with: what
    /// stopped it early (``stoppedBy``), or labels no object of the card may carry.
    public var errorStatus: ExitStatus?
    /// The card's verdict after the run (``CardStanding``); nil when the run did not reach it.
    public var safeToErase: Bool?
    /// Why the card is not safe to erase, the most pressing first.
    public var notSafeBecause: [String] = []
    /// Objects of the card found missing or changed in the bucket as the run began (each
    /// ``key: what was found``): sent again by the run, a changed one to its alternative key.
    public var bucketProblems: [String] = []
    /// Generations of the card's ASC MHL history this run put in the bucket.
    public var historyGenerations = 0
    /// How long writing them took (rendering, the local copy, the journal, the uploads).
    public var historySeconds: Double = 0

    public init(volume: String) { self.volume = volume }

    public var exitStatus: ExitStatus {
        if let errorStatus { return errorStatus }
        if let uploadError { return uploadError.exitStatus }
        return failed > 0 || quarantined > 0 || scan.lost > 0 ? .partial : .success
    }

    /// The status the process ends with, as a shell shows it: 128 + the signal for a run a
    /// signal stopped (it dies by that signal), else ``exitStatus``.
    public var processStatus: Int32 { stopSignal.map { 128 + $0 } ?? exitStatus.rawValue }
}

/// Everything a run reports, in order. Human and machine (`--json`) reporters both read these.
public enum IngestEvent: Sendable {
    case volume(VolumeIdentity)
    /// A file or directory passed over, worth telling (litter and exclusions are only counted).
    case skipped(CardPath, SkipReason)
    /// A file that is ingested but deserves a word: a name that is not UTF-8, an empty file.
    case notice(ScannedFile, code: String, message: String)
    case scanned(ScanTotals)
    /// Copying begins; the stager's counters can be polled for progress.
    case stagingStarted(Stager)
    /// Copying is over: every file was staged or failed, or the run stopped reading the card
    /// (what was not reached stays pending, and is not waited for).
    case stagingEnded
    case staged(StagedFile)
    case failed(ScannedFile, StageFailure)
    case upload(UploadEvent)
    case finished(RunSummary)
}

/// Receives a run's events. Staging events come in order from one task; upload events come
/// from the uploads running at once, so a sink must be safe to call concurrently.
public protocol EventSink: Sendable {
    func emit(_ event: IngestEvent)
}

extension IngestEvent {
    /// The event as one NDJSON object: always `event`; file events add `path`, `size`, `xxh128`.
    public var json: [String: JSONValue] {
        switch self {
        case .volume(let volume):
            var object: [String: JSONValue] = [
                "event": "volume", "key": .string(volume.key), "root": .string(volume.rootPath),
            ]
            object["mount_point"] = volume.mountPoint.map(JSONValue.string)
            object["fs_type"] = (volume.device?.fsType ?? volume.fsType).map(JSONValue.string)
            if let device = volume.device {
                object["device"] = .string(device.node)
                object["fs_uuid"] = device.fsUUID.map(JSONValue.string)
                object["fs_label"] = device.fsLabel.map(JSONValue.string)
                object["serial"] = device.serial.map(JSONValue.string)
                object["vendor"] = device.vendor.map(JSONValue.string)
                object["model"] = device.model.map(JSONValue.string)
                object["bus"] = device.bus.map(JSONValue.string)
            }
            return object
        case let .skipped(path, reason):
            return ["event": "skipped", "path": .string(path.display), "reason": .string(reason.code),
                    "message": .string(reason.description)]
        case let .notice(file, code, message):
            return ["event": "notice", "path": .string(file.path.display), "size": .int(file.size),
                    "code": .string(code), "message": .string(message)]
        case .scanned(let totals):
            return ["event": "scanned", "to_stage": .int(totals.toStage), "to_stage_bytes": .int(totals.toStageBytes),
                    "known": .int(totals.known), "known_bytes": .int(totals.knownBytes), "skipped": .int(totals.skipped),
                    "unlisted": .int(totals.unlisted)]
        case .stagingStarted:
            return ["event": "staging"]
        case .stagingEnded:
            return ["event": "staging_ended"]
        case .staged(let staged):
            return ["event": "staged", "path": .string(staged.file.path.display), "size": .int(staged.file.size),
                    "xxh128": .string(staged.fingerprint.hex), "deduplicated": .bool(staged.deduplicated),
                    "verified": .bool(staged.verified)]
        case let .failed(file, failure):
            return ["event": "failed", "path": .string(file.path.display), "size": .int(file.size),
                    "reason": .string(failure.code), "message": .string(failure.description)]
        case .upload(let event):
            return event.json
        case .finished(let summary):
            var object: [String: JSONValue] = [
                "event": "summary", "volume": .string(summary.volume),
                "staged": .int(summary.staged), "staged_bytes": .int(summary.stagedBytes),
                "deduplicated": .int(summary.deduplicated), "known": .int(summary.scan.known),
                "skipped": .int(summary.scan.skipped), "failed": .int(summary.failed),
                "seconds": .double(summary.seconds), "exit_status": .int(summary.processStatus),
                "quarantined": .int(Int64(summary.quarantined)),
            ]
            object["stopped_by"] = (summary.stopSignal.map(System.signalName) ?? summary.stoppedBy).map(JSONValue.string)
            if let uploads = summary.uploads {
                object["uploaded"] = .int(uploads.uploaded)
                object["uploaded_bytes"] = .int(uploads.uploadedBytes)
                object["already_in_bucket"] = .int(uploads.alreadyThere)
                object["copied_in_bucket"] = .int(uploads.copied)
                object["upload_failed"] = .int(uploads.failed)
                object["upload_not_attempted"] = .int(uploads.notAttempted)
                object["upload_interrupted"] = .int(uploads.interrupted)
                object["staged_copies_removed"] = .int(uploads.stagedCopiesRemoved)
            }
            object["upload_error"] = summary.uploadError.map { .string($0.message) }
            object["not_ingested"] = .int(Int64(summary.scan.lost))
            if !summary.bucketProblems.isEmpty { object["bucket_problems"] = .array(summary.bucketProblems.map(JSONValue.string)) }
            if let safe = summary.safeToErase {
                object["safe_to_erase"] = .bool(safe)
                object["not_safe_because"] = .array(summary.notSafeBecause.map(JSONValue.string))
                object["mhl_generations"] = .int(Int64(summary.historyGenerations))
                object["mhl_seconds"] = .double(summary.historySeconds)
            }
            return object
        }
    }
}

/// A JSON value with a stable, compact encoding (keys sorted), for NDJSON lines.
public enum JSONValue: Sendable, Equatable, ExpressibleByStringLiteral {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    indirect case array([JSONValue])

    public init(stringLiteral value: String) { self = .string(value) }
    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }
    static func int(_ value: Int32) -> JSONValue { .int(Int64(value)) }

    var encoded: String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func append(to out: inout [UInt8]) {
        switch self {
        case .string(let text): appendJSONString(text, to: &out)
        case .int(let value): out += String(value).utf8
        case .double(let value): out += String(format: "%.3f", value).utf8
        case .bool(let value): out += (value ? "true" : "false").utf8
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.append(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// One line of NDJSON: the object with its keys in sorted order (byte order). Several
    /// lines a file of a card with `--json`: written into one byte buffer, where appending
    /// strings to a string took a large share of the instructions of a run of small files.
    public static func line(_ object: [String: JSONValue]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(UInt8(ascii: "{"))
        for (index, (key, value)) in object.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            value.append(to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }
}

/// What the uploads of a run came to.
public struct UploadTotals: Sendable, Equatable, Codable {
    /// Objects uploaded and verified now.
    public var uploaded = 0
    public var uploadedBytes: Int64 = 0
    /// Objects the bucket already held (content dedupe, or completed by a killed run).
    public var alreadyThere = 0
    /// Of ``uploaded``, objects the server made by copying another object of the same
    /// content: no byte was sent.
    public var copied = 0
    public var failed = 0
    /// Uploads not attempted because their destination failed first; they stay pending.
    public var notAttempted = 0
    /// Uploads left for later because the process was asked to stop (``UploadRunner/stop()``);
    /// their acknowledged parts are journalled and they stay pending.
    public var interrupted = 0
    /// Staged copies deleted after their objects verified.
    public var stagedCopiesRemoved = 0
    public init() {}
}
