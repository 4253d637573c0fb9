import Synchronization

/// A clock a test moves by hand, so that code which waits on a clock is stepped instead of
/// slept through: `now` stands still until ``advance(by:)``, and a task sleeping on the clock
/// wakes only when the clock is moved to its deadline (or the task is cancelled).
///
/// Its instants are the continuous clock's, so code that reads a `ContinuousClock.Instant`
/// (IngestKit's `JobProgress`, `TokenBucket`) reads this clock's time as well.
public final class ManualClock: Clock, Sendable {
    public typealias Instant = ContinuousClock.Instant

    private struct Sleeper {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Instant
        var sleepers: [Sleeper] = []
        /// Sleepers cancelled before they were registered: they throw instead of sleeping.
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
        /// Tests waiting for this many sleepers.
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        /// The watchers whose count of sleepers is reached, taken out.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let count = sleepers.count
            defer { watchers.removeAll { $0.count <= count } }
            return watchers.filter { $0.count <= count }.map(\.continuation)
        }
    }

    private let state: Mutex<State>

    /// A clock whose time is `now` until moved.
    public init(now: Instant = .now) { state = Mutex(State(now: now)) }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Tasks sleeping on the clock now.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Now { case wake, cancel, sleep([CheckedContinuation<Void, Never>]) }
                let now = state.withLock { state -> Now in
                    if state.cancelled.remove(id) != nil { return .cancel }
                    if deadline <= state.now { return .wake }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .sleep(state.satisfiedWatchers())
                }
                switch now {
                case .wake: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                case .sleep(let watchers): for watcher in watchers { watcher.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on by `duration` and wakes every task whose deadline it reaches.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now += duration
            let now = state.now
            defer { state.sleepers.removeAll { $0.deadline <= now } }
            return state.sleepers.filter { $0.deadline <= now }
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks sleep on the clock: what a test awaits before it
    /// moves the clock, so that the step it takes is the one it means.
    public func sleeping(atLeast count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let reached = state.withLock { state in
                if state.sleepers.count >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if reached { continuation.resume() }
        }
    }

    /// Waits for a task to sleep on the clock, then moves the clock on by `duration`: one step
    /// of a loop that waits on it.
    public func step(by duration: Duration) async {
        await sleeping()
        advance(by: duration)
    }
}
