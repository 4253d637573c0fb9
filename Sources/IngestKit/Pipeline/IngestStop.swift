import Dispatch
import Synchronization

/// Asks a running ingest to end early, from any thread, without losing anything.
///
/// Two requests, by what must still happen:
/// - ``cardRemoved()``: the card is gone. Reading it stops (the file being read is dropped,
///   no partial copy stays; the files not reached are found again next time), while the
///   uploads of files already staged go on to the end.
/// - ``shutdown()``: the process is asked to stop (SIGTERM, SIGINT). Reading stops as
///   above, and so do uploads: none starts, and each running one sends no new part; the
///   parts on the wire end and are journalled. What is left resumes later (`ingest resume`,
///   the next run or `ingest rescan`).
///
/// Not Swift task cancellation: the journal's writes must complete whatever happens.
public final class IngestStop: Sendable {
    public enum Reason: String, Sendable {
        case cardRemoved = "the card was removed"
        case shutdown = "ingest was asked to stop"
    }

    private struct State {
        var reason: Reason?
        /// The signal that asked for the shutdown, if one did.
        var signal: Int32?
        var stagers: [Stager] = []
        var runners: [UploadRunner] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Why the ingest was asked to stop, if it was.
    public var reason: Reason? { state.withLock { $0.reason } }

    public func cardRemoved() {
        let stagers = state.withLock { state -> [Stager] in
            if state.reason == nil { state.reason = .cardRemoved }
            return state.stagers
        }
        for stager in stagers { stager.cancel() }
    }

    /// The signal that asked for the shutdown (``shutdown(by:)``), if one did: the process
    /// ends by it, so the run's summary says so.
    public var signal: Int32? { state.withLock { $0.signal } }

    /// `signal`: the one that asked (SIGTERM, SIGINT), if one did.
    public func shutdown(by signal: Int32? = nil) {
        let (stagers, runners) = state.withLock { state -> ([Stager], [UploadRunner]) in
            state.reason = .shutdown
            state.signal = state.signal ?? signal
            return (state.stagers, state.runners)
        }
        for stager in stagers { stager.cancel() }
        for runner in runners { runner.stop() }
    }

    /// Subjects a stager to the requests, including one already made.
    func attach(_ stager: Stager) {
        let reason = state.withLock { state -> Reason? in
            state.stagers.append(stager)
            return state.reason
        }
        if reason != nil { stager.cancel() }
    }

    /// Subjects an upload runner to ``shutdown()``, including one already requested.
    public func attach(_ runner: UploadRunner) {
        let reason = state.withLock { state -> Reason? in
            state.runners.append(runner)
            return state.reason
        }
        if reason == .shutdown { runner.stop() }
    }
}

/// SIGTERM and SIGINT turned from deaths into requests: the first one calls `handler` (on a
/// dispatch queue, never a signal handler); a second one of either ends the process at once,
/// as the default would have, for whoever cannot wait.
public final class ShutdownSignals: Sendable {
    private final class Received: Sendable {
        let signal = Atomic<Int32>(0)
    }

    private let sources: Mutex<[any DispatchSourceSignal]>
    private let received = Received()

    public static let handled: [Int32] = System.terminationSignals

    public init(handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "ingest-signals")
        var sources: [any DispatchSourceSignal] = []
        let received = self.received
        for signal in Self.handled {
            System.ignoreSignal(signal)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler {
                if received.signal.compareExchange(expected: 0, desired: signal, ordering: .acquiringAndReleasing).exchanged {
                    handler(signal)
                } else {
                    Self.dieBy(signal)
                }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    /// The signal that asked for the shutdown, if one did.
    public var signal: Int32? {
        let value = received.signal.load(ordering: .acquiring)
        return value == 0 ? nil : value
    }

    /// Ends the process by `signal` with its default action, so that a parent (a shell,
    /// systemd) sees what it sent and not an exit status made up for it.
    ///
    /// A stop asked for by a signal is a clean stop: the process's run marks go first, so that
    /// the next process does not report an unclean one (``RunMark``).
    public static func dieBy(_ signal: Int32) -> Never {
        RunMark.endAll()
        System.endProcess(bySignal: signal)
    }
}
