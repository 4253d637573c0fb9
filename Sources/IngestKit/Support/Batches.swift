import Foundation

/// Hands items from a producer thread to one async consumer in batches: each `next()` takes
/// everything that piled up since the last, up to ``limit``. When the consumer is slow (a
/// journal commit), batches grow and the cost per item falls; when it keeps up, each item
/// goes at once.
///
/// At most ``limit`` items wait: a producer that would add more blocks until the consumer
/// takes a batch. The producer is a dedicated thread (the stager's writer), so a card of
/// 100,000 small files copied faster than the journal takes them waits for the journal
/// instead of holding every outcome (and every upload planned from one batch) in memory.
final class Batches<Element: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [Element] = []
    private var finished = false
    /// Set by ``discard()``: the consumer takes no more; producers no longer wait.
    private var discarding = false
    private var waiter: CheckedContinuation<[Element]?, Never>?
    let limit: Int

    init(limit: Int = 512) {
        precondition(limit > 0)
        self.limit = limit
    }

    /// Adds an item, waiting while ``limit`` items wait already. From a thread that may
    /// block, never from the concurrency pool.
    func add(_ item: Element) {
        condition.lock()
        while items.count >= limit, !discarding { condition.wait() }
        if discarding {
            condition.unlock()
            return
        }
        guard let waiter else {
            items.append(item)
            condition.unlock()
            return
        }
        self.waiter = nil
        condition.unlock()
        waiter.resume(returning: [item])
    }

    /// No more items will come; `next()` returns nil once the rest is taken.
    func finish() {
        condition.lock()
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        condition.unlock()
        waiter?.resume(returning: nil)
    }

    /// The consumer stops taking items (it met an error): what waits is dropped, and so is
    /// whatever is added from now on, so that no producer waits for it forever.
    func discard() {
        condition.lock()
        discarding = true
        items.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// Everything added since the last call, at most ``limit`` (waiting for at least one),
    /// or nil when finished. One consumer at a time.
    func next() async -> [Element]? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if !items.isEmpty {
                let batch = items
                items.removeAll(keepingCapacity: true)
                condition.broadcast()
                condition.unlock()
                continuation.resume(returning: batch)
            } else if finished || discarding {
                condition.unlock()
                continuation.resume(returning: nil)
            } else {
                waiter = continuation
                condition.unlock()
            }
        }
    }
}
