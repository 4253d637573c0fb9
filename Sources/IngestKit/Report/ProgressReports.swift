import Synchronization

/// The live line on a terminal: drawn over itself (carriage return, erase to the end of the
/// line), cut to the terminal's width so that it never wraps (a wrapped line cannot be drawn
/// over), and cleared before any other line is written through it, so the two never mix.
public final class ProgressLine: Sendable {
    private struct State {
        var shown = false
        var ended = false
    }

    private let output: ReportOutput
    private let state = Mutex(State())

    public init(output: ReportOutput = .standardError) { self.output = output }

    /// Draws `text` over the line shown; nothing once ``end()`` was called.
    func draw(_ text: String) {
        state.withLock { state in
            guard !state.ended else { return }
            output.write("\r\u{1B}[K" + Self.cut(Printable.escaped(text), to: output.columns))
            state.shown = true
        }
    }

    /// Writes `text` as a line of its own, clearing the progress line first; the progress line
    /// comes back below it at the next draw.
    public func print(_ text: String) {
        state.withLock { state in
            output.write((state.shown ? "\r\u{1B}[K" : "") + Printable.escaped(text) + "\n")
            state.shown = false
        }
    }

    /// Runs `write`, which writes whole lines to the same output by other means (the log
    /// handler's), with the line cleared first and kept from being drawn meanwhile: the two
    /// never mix, and the line comes back below at the next draw.
    public func writingAside(_ write: () -> Void) {
        state.withLock { state in
            clear(&state)
            write()
        }
    }

    /// Clears the line for good: what is written next starts on a clean line.
    public func end() {
        state.withLock { state in
            clear(&state)
            state.ended = true
        }
    }

    /// Erases the line if it is shown (the caller holds the lock).
    private func clear(_ state: inout State) {
        if state.shown { output.write("\r\u{1B}[K") }
        state.shown = false
    }

    /// `text` in at most `columns - 1` characters (the last column would wrap on some
    /// terminals), with an ellipsis where it was cut.
    static func cut(_ text: String, to columns: Int?) -> String {
        guard let columns, columns > 1, text.count > columns - 1 else { return text }
        return String(text.prefix(columns - 2)) + "…"
    }
}

extension ReportOutput {
    /// The width of the terminal this writes to; nil when it is no terminal.
    var columns: Int? { System.terminalColumns(fd) }
}

/// Tells a job's progress while it runs, each way asked for: the line on a terminal (four
/// times a second), a `progress` NDJSON event and systemd's `STATUS=` (each `interval`).
///
/// ``start()`` when the job starts, ``stop()`` when it ends (also on a failure): the line is
/// cleared, so what the command writes next starts on a clean line.
public final class ProgressReports: Sendable {
    public let progress: JobProgress
    /// The line on the terminal, if drawn.
    public let line: ProgressLine?
    /// Where `progress` events go (`--json`), if anywhere.
    let events: ReportOutput?
    let systemd: SystemdNotifier?
    let interval: Duration
    /// The time the loop reads and waits on: the continuous clock's, or a test's.
    private let now: @Sendable () -> ContinuousClock.Instant
    private let sleep: @Sendable (Duration) async throws -> Void
    /// The loop, and whether ``stop()`` was called (nothing is told after it).
    private let state = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))

    /// How often the line is drawn.
    static let redraw = Duration.milliseconds(250)
    /// How often events and `STATUS=` go out by default.
    public static let defaultInterval = Duration.seconds(2)

    public init<C: Clock>(
        progress: JobProgress, line: ProgressLine?, events: ReportOutput?, systemd: SystemdNotifier?,
        interval: Duration = defaultInterval, clock: C = ContinuousClock()
    ) where C.Instant == ContinuousClock.Instant {
        precondition(interval > .zero)
        self.progress = progress
        self.line = line
        self.events = events
        self.systemd = systemd
        self.interval = interval
        now = { clock.now }
        sleep = { try await clock.sleep(for: $0) }
    }

    /// Starts telling, and the job's clock (``JobProgress/begin(at:)``); once.
    public func start() {
        progress.begin(at: now())
        guard line != nil || events != nil || systemd != nil else { return }
        let loop = Task { [self] in
            let tick = line == nil ? interval : min(Self.redraw, interval)
            var due = self.now() + interval
            while !Task.isCancelled {
                try? await sleep(tick)
                let now = self.now()
                let snapshot = progress.snapshot(now: now)
                // A job all done waits only for its summary: nothing to draw under it.
                if let line, snapshot.hasWork, !snapshot.isDone { line.draw(snapshot.text) }
                if now >= due {
                    due = now + interval
                    state.withLock { if !$0.stopped { tell(snapshot) } }
                }
            }
        }
        state.withLock { $0.task = loop }
    }

    /// Stops telling and clears the line; systemd hears where the job ended. Once: later
    /// calls do nothing.
    public func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            state.task?.cancel()
            return !state.stopped
        }
        guard first else { return }
        line?.end()
        let snapshot = progress.snapshot()
        let verdict = progress.verdict.map { "; " + $0 } ?? ""
        if snapshot.hasWork || !verdict.isEmpty { systemd?.status("ended: " + snapshot.text + verdict) }
    }

    private func tell(_ snapshot: ProgressSnapshot) {
        events?.write(JSONValue.line(snapshot.json) + "\n")
        if snapshot.hasWork { systemd?.status(snapshot.text) }
    }
}
