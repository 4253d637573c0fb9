import Foundation
import Logging

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
            parts.append("\(summary.staged) files staged (\(ByteCount(summary.stagedBytes)))")
            if let uploads = summary.uploads {
                var uploaded = "\(uploads.uploaded) uploaded (\(ByteCount(uploads.uploadedBytes)))"
                if uploads.alreadyThere > 0 { uploaded += ", \(uploads.alreadyThere) already in the bucket" }
                parts.append(uploaded)
            }
            parts.append("\(failedFiles) failed")
            if summary.uploads != nil { parts.append("\(uploadsPending) uploads pending") }
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
                object["uploads_pending"] = .int(uploadsPending)
            }
        }
        return object
    }
}

/// `ingest watch`: ingests every card present at start and every card inserted later, a
/// bounded number at once, each through ``DeviceIngest`` (the path of `ingest --device`).
///
/// Cards are told apart by kernel name. An event for a card already being ingested starts
/// nothing; a card removed (a `remove` event, or a `change` after which it no longer
/// qualifies) has its staging stopped while its staged files finish uploading; a card
/// inserted again while that goes on is ingested again once it ends. ``shutdown()`` stops
/// taking cards and asks every running one to stop (``IngestStop/shutdown()``); ``run()``
/// returns when all have ended, unmounted.
public actor CardWatcher {
    /// Ingests one card to its end and says how it went; `stop` carries removal and shutdown.
    public typealias IngestCard = @Sendable (_ device: UdevDevice, _ stop: IngestStop) async -> CardReport

    private struct Session {
        var device: UdevDevice
        let stop = IngestStop()
        var task: Task<Void, Never>?
        /// Inserted again while a removed session still finishes its uploads.
        var again: UdevDevice?
    }

    private let maxCards: Int
    private let logger: Logger
    private let ingest: IngestCard
    private let report: @Sendable (CardReport) -> Void
    private var sessions: [String: Session] = [:]
    /// Cards waiting for a free slot, first come first served.
    private var waiting: [String] = []
    private var running = 0
    private var isShuttingDown = false
    private var monitor: UdevMonitor?
    /// Cards found busy while another card of this process ran: the same card under another
    /// name (pulled and inserted again) or a copy with its UUID. Tried again when a card ends.
    private var busy: [String: UdevDevice] = [:]

    public init(
        maxCards: Int, logger: Logger, ingest: @escaping IngestCard, report: @escaping @Sendable (CardReport) -> Void
    ) {
        self.maxCards = max(1, maxCards)
        self.logger = logger
        self.ingest = ingest
        self.report = report
    }

    /// Listens to udev, takes the cards present, then each new one, until ``shutdown()``;
    /// returns when every card's ingest has ended.
    public func run() async throws(IngestError) {
        guard !isShuttingDown else { return }
        // Listening starts before the cards present are listed: none slips between the two
        // (one seen twice is ingested once).
        let monitor = try UdevMonitor()
        self.monitor = monitor
        let present = await onDedicatedThread("ingest-udev-ls") { Udev.blockDevices() }
        for device in present { handle(device) }
        for await device in monitor.events {
            if isShuttingDown { break }
            handle(device)
        }
        let monitorFailed = !isShuttingDown
        if monitorFailed { await shutdown() }
        while let session = sessions.values.first(where: { $0.task != nil }), let task = session.task {
            await task.value
        }
        if monitorFailed { throw .udevUnavailable(SystemError(call: "udev_monitor_receive_device", errno: EIO)) }
    }

    /// Stops taking cards and asks every running ingest to stop; ``run()`` then returns once
    /// they have ended. Any number of times.
    public func shutdown() async {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        logger.notice("stopping: no new cards; running ingests stop after the parts on the wire")
        for name in waiting { sessions[name] = nil }
        waiting.removeAll()
        for session in sessions.values { session.stop.shutdown() }
        if let monitor { await onDedicatedThread("ingest-udev-off") { monitor.stop() } }
    }

    /// Cards being ingested and cards waiting for a slot, by kernel name (for tests and logs).
    var cards: (running: [String], waiting: [String]) {
        (sessions.filter { $0.value.task != nil }.keys.sorted(), waiting)
    }

    /// What one udev event (or a device present at start) means for the cards.
    func handle(_ device: UdevDevice) {
        let name = device.kernelName
        guard !isShuttingDown, !name.isEmpty else { return }
        let qualifies = device.action != "remove" && CardPredicate.isCard(device) && device.node != nil
        if !qualifies {
            guard var session = sessions[name] else { return }
            if session.task == nil {
                waiting.removeAll { $0 == name }
                sessions[name] = nil
            } else {
                session.again = nil
                sessions[name] = session
                if session.stop.reason == nil {
                    logger.notice("card removed; its staged files finish uploading", metadata: ["card": "\(name)"])
                }
                session.stop.cardRemoved()
            }
            return
        }
        if var session = sessions[name] {
            // Already being ingested, or waiting: nothing more, unless it was removed and is back.
            if session.stop.reason == .cardRemoved {
                session.again = device
                sessions[name] = session
            }
            return
        }
        sessions[name] = Session(device: device)
        waiting.append(name)
        startWaiting()
    }

    private func startWaiting() {
        while running < maxCards, !waiting.isEmpty, !isShuttingDown {
            let name = waiting.removeFirst()
            guard var session = sessions[name] else { continue }
            running += 1
            let (ingest, device, stop) = (self.ingest, session.device, session.stop)
            logger.info("ingesting card", metadata: ["card": "\(name)", "device": "\(device.node ?? "")"])
            session.task = Task {
                let report = await ingest(device, stop)
                self.ended(name, report)
            }
            sessions[name] = session
        }
    }

    private func ended(_ name: String, _ result: CardReport) {
        running -= 1
        report(result)
        let session = sessions[name]
        sessions[name] = nil
        if isShuttingDown { return }
        let again = session?.again
        let retry = busy
        busy = [:]
        if result.outcome == .busy, running > 0, again == nil, let device = session?.device { busy[name] = device }
        if let again { handle(again) }
        for (retryName, device) in retry where sessions[retryName] == nil {
            // Only if it is still there and still a card.
            if let now = Udev.blockDevice(major: device.major, minor: device.minor), now.kernelName == retryName {
                handle(now)
            }
        }
        startWaiting()
    }
}
