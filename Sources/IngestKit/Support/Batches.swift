import Synchronization

/// Hands items from a producer thread to one async consumer in batches: each `next()` takes
/// everything that piled up since the last. When the consumer is slow (a journal commit),
/// batches grow and the cost per item falls; when it keeps up, each item goes at once.
final class Batches<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var finished = false
        var waiter: CheckedContinuation<[Element]?, Never>?
    }
    private let state = Mutex(State())

    init() {}

    /// Adds an item; any thread.
    func add(_ item: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<[Element]?, Never>? in
            guard let waiter = state.waiter else {
                state.items.append(item)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: [item])
    }

    /// No more items will come; `next()` returns nil once the rest is taken.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[Element]?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Everything added since the last call (waiting for at least one), or nil when finished.
    /// One consumer at a time.
    func next() async -> [Element]? {
        await withCheckedContinuation { continuation in
            let ready: [Element]?? = state.withLock { state in
                if !state.items.isEmpty {
                    defer { state.items.removeAll(keepingCapacity: true) }
                    return .some(state.items)
                }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
