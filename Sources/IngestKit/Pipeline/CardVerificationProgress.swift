import Synchronization

/// How far a check is: files judged, bytes read from the card and the read rate, problems,
/// and, once the counting walk is done, the card's totals and an ETA. Counters only: the
/// reading and the checks move them, ``CardVerificationReports`` reads them.
public final class CardVerificationProgress: Sendable {
    let filesChecked = Atomic<Int>(0)
    let bytesRead = Atomic<Int64>(0)
    /// Bytes of objects read back from the bucket and hashed (`--read-back`).
    let bytesReadBack = Atomic<Int64>(0)
    let problems = Atomic<Int>(0)
    /// The card's files and bytes; -1 until counted.
    private let totalFiles = Atomic<Int>(-1)
    private let totalBytes = Atomic<Int64>(-1)
    private let started: ContinuousClock.Instant
    private let rate = Mutex(RateWindow())

    public init(now: ContinuousClock.Instant = .now) { started = now }

    func setTotals(files: Int, bytes: Int64) {
        totalBytes.store(bytes, ordering: .relaxed)
        totalFiles.store(files, ordering: .relaxed)
    }

    public func snapshot(now: ContinuousClock.Instant = .now) -> CardVerificationSnapshot {
        let read = bytesRead.load(ordering: .relaxed)
        var snapshot = CardVerificationSnapshot(seconds: (now - started).inSeconds)
        snapshot.filesChecked = filesChecked.load(ordering: .relaxed)
        snapshot.bytesRead = read
        snapshot.bytesReadBack = bytesReadBack.load(ordering: .relaxed)
        snapshot.problems = problems.load(ordering: .relaxed)
        let files = totalFiles.load(ordering: .relaxed)
        if files >= 0 {
            snapshot.totalFiles = files
            snapshot.totalBytes = totalBytes.load(ordering: .relaxed)
        }
        snapshot.rate = rate.withLock { window in
            window.add(read, at: now)
            return window.rate(read, at: now)
        }
        return snapshot
    }
}

/// The numbers of a check at one moment, as a line and as a `progress` event.
public struct CardVerificationSnapshot: Sendable, Equatable {
    public var seconds: Double
    public var filesChecked = 0
    public var bytesRead: Int64 = 0
    /// Bytes of objects read back from the bucket (`--read-back`).
    public var bytesReadBack: Int64 = 0
    public var problems = 0
    public var totalFiles: Int?
    public var totalBytes: Int64?
    /// Bytes read a second, over the last half minute.
    public var rate: Double?

    public init(seconds: Double) { self.seconds = seconds }

    /// Seconds until every byte is read, once the totals and the rate are known.
    public var eta: Double? {
        guard let totalBytes, let rate, rate > 0 else { return nil }
        return Double(max(totalBytes - bytesRead, 0)) / rate
    }

    /// Like `verified 120/201 files (1.2 GiB/1.8 GiB, 150.0 MiB/s) · read back 1.1 GiB · 1 problem · ETA 0:42`.
    public var text: String {
        var piece = "verified \(filesChecked)" + (totalFiles.map { "/\($0)" } ?? "") + " files ("
            + "\(ByteCount(bytesRead))" + (totalBytes.map { "/\(ByteCount($0))" } ?? "")
        if let rate { piece += ", \(ProgressSnapshot.rate(rate))" }
        var pieces = [piece + ")"]
        if bytesReadBack > 0 { pieces.append("read back \(ByteCount(bytesReadBack))") }
        if problems > 0 { pieces.append(problems == 1 ? "1 problem" : "\(problems) problems") }
        if let eta { pieces.append("ETA \(ProgressSnapshot.clock(eta))") }
        return pieces.joined(separator: " · ")
    }

    /// The `progress` NDJSON event of `verify-card`.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "progress", "seconds": .double(seconds), "files_checked": .int(Int64(filesChecked)),
            "bytes_read": .int(bytesRead), "bytes_read_back": .int(bytesReadBack), "problems": .int(Int64(problems)),
        ]
        object["files_total"] = totalFiles.map { .int(Int64($0)) }
        object["bytes_total"] = totalBytes.map { .int($0) }
        object["read_rate"] = rate.map { .int(Int64($0.rounded())) }
        object["eta_seconds"] = eta.map { .int(Int64($0.rounded())) }
        return object
    }
}

/// Tells a check's progress while it runs: the line on a terminal (four times a second) and a
/// `progress` NDJSON event each `interval`. ``start()`` when the check starts, ``stop()`` when
/// it ends: the line is cleared, so the summary starts on a clean line.
public final class CardVerificationReports: Sendable {
    public let progress: CardVerificationProgress
    public let line: ProgressLine?
    let events: ReportOutput?
    let interval: Duration
    private let state = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))

    public init(progress: CardVerificationProgress, line: ProgressLine?, events: ReportOutput?, interval: Duration) {
        precondition(interval > .zero)
        self.progress = progress
        self.line = line
        self.events = events
        self.interval = interval
    }

    public func start() {
        guard line != nil || events != nil else { return }
        let loop = Task { [self] in
            let tick = line == nil ? interval : min(ProgressReports.redraw, interval)
            var due = ContinuousClock.now + interval
            while !Task.isCancelled {
                try? await Task.sleep(for: tick)
                let now = ContinuousClock.now
                let snapshot = progress.snapshot(now: now)
                if let line, snapshot.filesChecked > 0 || snapshot.bytesRead > 0 || snapshot.bytesReadBack > 0 { line.draw(snapshot.text) }
                if now >= due, let events {
                    due = now + interval
                    state.withLock { if !$0.stopped { events.write(JSONValue.line(snapshot.json) + "\n") } }
                }
            }
        }
        state.withLock { $0.task = loop }
    }

    public func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            state.task?.cancel()
            return !state.stopped
        }
        if first { line?.end() }
    }
}
