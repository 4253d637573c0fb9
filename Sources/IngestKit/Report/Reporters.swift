import Foundation
import Synchronization

/// Where reporters write: a file descriptor, unbuffered but for the event lines of
/// ``writeSoon(_:)``, every call whole (lines from several threads never interleave
/// mid-line) and in the order of the calls.
public struct ReportOutput: Sendable {
    public let fd: Int32
    public static let standardOutput = ReportOutput(fd: STDOUT_FILENO)
    public static let standardError = ReportOutput(fd: STDERR_FILENO)

    public init(fd: Int32) { self.fd = fd }

    public var isTerminal: Bool { System.isTerminal(fd) }

    /// Writes `text` now, after the lines ``writeSoon(_:)`` holds.
    public func write(_ text: String) {
        HeldLines.shared.withLock { held in
            held.writeOut()
            var text = text
            text.withUTF8 { Self.writeAll($0, to: fd) }
        }
    }

    /// Writes `line` within ``HeldLines/delay``, with the lines written soon around it: a
    /// card's events (five a file, thousands a second on a card of small files) cost a
    /// `write` each when written one by one, a visible share of the run's CPU. What is held
    /// is written when it reaches ``HeldLines/limit`` bytes, before anything written now, and
    /// at exit.
    public func writeSoon(_ line: String) {
        let first = HeldLines.shared.withLock { held in
            if held.fd != fd { held.writeOut() }
            held.fd = fd
            held.bytes.append(contentsOf: line.utf8)
            if held.bytes.count >= HeldLines.limit { held.writeOut() }
            guard !held.bytes.isEmpty, !held.writeScheduled else { return false }
            held.writeScheduled = true
            return true
        }
        if first {
            DispatchQueue.global().asyncAfter(deadline: .now() + HeldLines.delay) {
                HeldLines.shared.withLock { held in
                    held.writeScheduled = false
                    held.writeOut()
                }
            }
        }
    }

    fileprivate static func writeAll(_ bytes: UnsafeBufferPointer<UInt8>, to fd: Int32) {
        // A closed pipe must not stop an ingest: what cannot be written is dropped.
        try? FileDescriptor(borrowing: fd).write(UnsafeRawBufferPointer(bytes))
    }
}

/// The lines ``ReportOutput/writeSoon(_:)`` holds, of one output at a time, process-wide.
struct HeldLines: ~Copyable {
    /// How long a line may be held.
    static let delay = DispatchTimeInterval.milliseconds(50)
    /// The bytes held at most.
    static let limit = 64 << 10

    var fd: Int32 = -1
    var bytes: [UInt8] = []
    var writeScheduled = false

    /// Everything held is written when the process exits (returning from `main`, `exit`).
    static let shared: Mutex<HeldLines> = {
        atexit { HeldLines.shared.withLock { $0.writeOut() } }
        return Mutex(HeldLines())
    }()

    mutating func writeOut() {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBufferPointer { ReportOutput.writeAll($0, to: fd) }
        bytes.removeAll(keepingCapacity: true)
    }
}

/// `--json`: one NDJSON object per event on standard output.
public struct JSONLinesReporter: EventSink {
    let output: ReportOutput
    public init(output: ReportOutput = .standardOutput) { self.output = output }
    public func emit(_ event: IngestEvent) { output.writeSoon(JSONValue.line(event.json) + "\n") }
}

/// `ingest watch --json`: one NDJSON object per event, each with the kernel name of its
/// card (`card`), so that the events of cards ingested at once can be told apart.
public struct CardJSONReporter: EventSink {
    let card: String
    let output: ReportOutput
    public init(card: String, output: ReportOutput = .standardOutput) {
        self.card = card
        self.output = output
    }
    public func emit(_ event: IngestEvent) {
        var object = event.json
        object["card"] = .string(card)
        output.writeSoon(JSONValue.line(object) + "\n")
    }
}

/// The human view: notable findings and failures as lines, and a summary at the end. The
/// live progress line is drawn by ``ProgressReports`` on a ``ProgressLine`` of the same
/// output, which each message clears first.
public final class ConsoleReporter: EventSink, Sendable {
    /// What the command does with the volume it names first.
    public enum Action: String, Sendable {
        case ingesting = "Ingesting"
        /// `ingest scan`: a dry run, which copies nothing.
        case scanning = "Scanning"
    }

    private let output: ReportOutput
    private let line: ProgressLine?
    private let action: Action
    /// Notes of one kind (an empty file, a name that is not UTF-8) shown so far, by kind:
    /// a card of 10,000 empty files gets ``notesShownPerKind`` lines and a count, not 10,000.
    private let notesShown = Mutex<[String: (shown: Int, more: Int, message: String)]>([:])
    /// How many notes of one kind are shown, each with its file; the rest are counted.
    public static let notesShownPerKind = 10

    /// - Parameter line: the progress line drawn on `output`, if one is.
    public init(output: ReportOutput = .standardError, line: ProgressLine? = nil, action: Action = .ingesting) {
        self.output = output
        self.line = line
        self.action = action
    }

    public func emit(_ event: IngestEvent) {
        switch event {
        case .volume(let volume):
            var line = "\(action.rawValue) \(volume.rootPath)"
            if let device = volume.device {
                let details = [device.fsLabel.map { "label \($0)" }, device.fsUUID.map { "UUID \($0)" }].compactMap { $0 }
                line += " (on \(device.node)" + (details.isEmpty ? "" : ": " + details.joined(separator: ", ")) + ")"
            }
            print(line)
        case let .skipped(path, reason):
            print("  skipped \(path.display): \(reason)")
        case let .notice(file, code, message):
            let shown = notesShown.withLock { notes in
                var kind = notes[code, default: (0, 0, message)]
                defer { notes[code] = kind }
                if kind.shown < Self.notesShownPerKind { kind.shown += 1; return true }
                kind.more += 1
                return false
            }
            if shown { print("  note: \(file.path.display): \(message)") }
        case .scanned(let totals):
            for (_, kind) in notesShown.withLock({ $0 }).sorted(by: { $0.key < $1.key }) where kind.more > 0 {
                print("  note: \(kind.more) more \(kind.more == 1 ? "file" : "files") with the same note (\(kind.message)), not listed")
            }
            print(
                "Found \(counted(totals.toStage, "file")) to copy (\(ByteCount(totals.toStageBytes))), "
                    + "\(totals.known) already ingested (\(ByteCount(totals.knownBytes))), \(totals.skipped) skipped"
                    + (totals.unlisted > 0 ? " (\(totals.unlisted) more skips and notes not listed)" : ""))
        case let .failed(file, failure):
            print("  failed \(file.path.display): \(failure)")
        case .upload(let event):
            report(event)
        case .finished(let summary):
            var line = "Staged \(counted(summary.staged, "file")) (\(ByteCount(summary.stagedBytes)))"
            if summary.deduplicated > 0 { line += ", \(summary.deduplicated) with content already staged" }
            line += "; \(summary.scan.known) already ingested; \(summary.failed) failed"
            line += String(format: " in %.1f s", summary.seconds)
            print(line)
            if !summary.bucketProblems.isEmpty {
                print("Found in the bucket as the run began, not as verified (sent again; a changed one to its alternative key):")
                for problem in summary.bucketProblems.prefix(20) { print("  \(problem)") }
            }
            if let uploads = summary.uploads { print(Self.uploadLine(uploads, failed: summary.uploadError != nil)) }
            if summary.scan.lost > 0 {
                print("\(summary.scan.lost) \(summary.scan.lost == 1 ? "folder" : "folders") of the card not ingested (listed above): "
                    + "copy \(summary.scan.lost == 1 ? "it" : "them") off by hand before the card is formatted")
            }
            if let safe = summary.safeToErase {
                if safe {
                    print("Card safe to erase: every file verified in the bucket"
                        + (summary.historyGenerations > 0 ? ", its ASC MHL history written" : ""))
                } else if let reason = summary.notSafeBecause.first {
                    print("Card NOT safe to erase: \(reason)")
                }
            }
            if summary.failed > 0 { print("Files that failed stay pending: run ingest again to retry them.") }
        case .stagingStarted, .staged, .stagingEnded:
            break
        }
    }

    /// What the uploads came to. What did not finish comes first, so that a run that failed
    /// never opens its last word with "verified"; `failed`: an upload error ends the run.
    static func uploadLine(_ uploads: UploadTotals, failed: Bool) -> String {
        var unfinished: [String] = []
        if uploads.failed > 0 { unfinished.append("\(uploads.failed) failed") }
        if uploads.notAttempted > 0 { unfinished.append("\(uploads.notAttempted) not attempted") }
        if uploads.interrupted > 0 { unfinished.append("\(uploads.interrupted) left for later (ingest resume)") }
        let objects = "\(counted(uploads.uploaded, "object")) (\(ByteCount(uploads.uploadedBytes)))"
        var done: String
        if unfinished.isEmpty, !failed {
            done = "Uploaded \(objects)" + (uploads.uploaded > 0 ? ", verified" : "")
        } else {
            let head = unfinished.isEmpty ? "Uploads stopped by an error" : "Uploads not finished: " + unfinished.joined(separator: ", ")
            done = "\(head); \(objects) uploaded" + (uploads.uploaded > 0 ? " and verified" : "")
        }
        if uploads.copied > 0 { done += ", \(uploads.copied) of them copied in the bucket" }
        if uploads.alreadyThere > 0 { done += "; \(uploads.alreadyThere) already in the bucket" }
        return done
    }

    /// Upload events worth a line: the rest shows in the progress line.
    private func report(_ event: UploadEvent) {
        switch event {
        case .resuming(let record, _) where record.phase != .created:
            // An upload planned and never started has nothing to say as it starts.
            print("  resuming upload \(record.id) of \(record.sourceDisplay) (\(record.phase.rawValue))")
        case .recovered(let recovery):
            print(recovery.text)
        case .refreshingCredentials:
            print("  refreshing credentials")
        case .failed(let record, let error):
            print("  upload \(record.id) of \(record.sourceDisplay) failed: \(error)")
        case .aborted(let record):
            print("  upload \(record.id) aborted")
        case let .keyTaken(record, newKey, _, found):
            print("  \(record.key) already holds other bytes (fingerprint \(found)); nothing is replaced: "
                + "\(record.sourceDisplay) goes to \(newKey)")
        case let .waitingForUpload(record, uploadID):
            print("  \(record.key) is being uploaded by another run (upload \(uploadID)): waiting for it, not sending "
                + "it twice")
        case let .takingOver(record, uploadID):
            print("  \(record.key): taking over upload \(uploadID), which its sender left: only the parts it lacks "
                + "are sent")
        case let .quarantined(record, failures):
            print("  upload \(record.id) of \(record.sourceDisplay) failed \(failures) runs in a row: quarantined "
                + "(ingest status lists it; it is still tried)")
        case let .conditionalWritesNotHonoured(target, reason):
            print("  warning: \(target.displayName) does not honour If-None-Match (\(reason)); every write is "
                + "checked with HEAD first, but two writers to one key can still race there")
        case .checksumsNotKept(let target):
            print("  note: \(target.displayName) keeps no CRC32C checksums (Ceph RGW before Squid does not): parts go "
                + "with Content-MD5, which it checks, and each object is proven by its MD5 ETag")
        case let .newDestination(target, bucketID):
            print("  new destination: \(target.displayName) (bucket id \(bucketID ?? "none yet")): no card "
                + "ingested here went there before")
        case let .foreignGateway(target, gateway, shows, bucketID):
            print("  warning: the gateway \(gateway) shows another bucket (\(shows.description)) than s3://\(target.bucket) "
                + "(bucket id \(bucketID ?? "none")): nothing is sent through it; remove it from [s3] endpoint, or point "
                + "it at the cluster of the bucket id \(bucketID ?? "none")")
        case .queued, .resuming, .completed, .partUploaded, .streamStarted, .partStreamed, .streamAborted, .preparing, .initiating,
            .reconciling, .completing:
            break
        }
    }

    private func print(_ text: String) {
        if let line { line.print(text) } else { output.line(text) }
    }
}
