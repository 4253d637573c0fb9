import Foundation

/// A first-in first-out queue with a capacity, for handing work between dedicated threads.
/// `put` blocks while the queue is full and `take` while it is empty: the back-pressure that
/// keeps memory flat however large the file. An item taken is no longer held here: what
/// it owns (an open file, a buffer) goes when its taker is done with it.
final class BlockingQueue<Element>: @unchecked Sendable {
    private let condition = NSCondition()
    /// Items from `head` on wait; the slots before it are emptied, until the next compaction.
    private var items: [Element?] = []
    private var head = 0
    private let capacity: Int
    /// Threads waiting in `take` for an item, and in `put` for room.
    private var takersWaiting = 0
    private var puttersWaiting = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    // A thread is woken only when one waits for what just changed, and after the lock is let
    // go, so that it does not wake only to wait for the lock: a staged small file crosses
    // these queues five times, and a wake-up each time, with the lock still held, cost the
    // staging of 5,000 files 10 futex calls a file.

    func put(_ item: Element) {
        condition.lock()
        while items.count - head >= capacity {
            puttersWaiting += 1
            condition.wait()
            puttersWaiting -= 1
        }
        items.append(item)
        let wake = takersWaiting > 0
        condition.unlock()
        if wake { condition.broadcast() }
    }

    /// Nothing is waiting to be taken (at this instant).
    var isEmpty: Bool {
        condition.lock()
        defer { condition.unlock() }
        return items.count == head
    }

    /// Waits until something can be taken or `deadline` passes; true when something can.
    func waitForItem(until deadline: ContinuousClock.Instant) -> Bool {
        let deadline = Date(timeIntervalSinceNow: (deadline - .now).inSeconds)
        condition.lock()
        defer { condition.unlock() }
        while items.count == head {
            takersWaiting += 1
            let woken = condition.wait(until: deadline)
            takersWaiting -= 1
            if !woken { return items.count > head }
        }
        return true
    }

    func take() -> Element {
        condition.lock()
        while items.count == head {
            takersWaiting += 1
            condition.wait()
            takersWaiting -= 1
        }
        let item = items[head].take()!
        head += 1
        if head > 64, head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        let wake = puttersWaiting > 0
        condition.unlock()
        if wake { condition.broadcast() }
        return item
    }
}

/// Starts `body` on a new thread named `name`, the name `top -H`, `ps -L` and `perf` show
/// (Linux keeps 15 bytes of it; Foundation's `Thread.name` never reaches the kernel).
func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    precondition(name.utf8.count <= 15, "thread name \(name) is longer than Linux keeps (15 bytes)")
    let thread = Thread {
        System.nameThisThread(name)
        body()
    }
    thread.name = name
    thread.start()
}

/// Runs blocking work (file I/O, fsync) on a thread of its own and awaits its result, so the
/// Swift concurrency pool (two threads on a two-core station) is never blocked.
func onDedicatedThread<T: Sendable, E: Error>(
    _ name: String, _ body: @escaping @Sendable () throws(E) -> T
) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        startThread(name) { continuation.resume(returning: Result { () throws(E) -> T in try body() }) }
    }
    return try result.get()
}

/// A few threads started once per process for the blocking work done per file (hashing a
/// staged copy, unlinking it): a card of 100,000 files costs no thread per file, and the
/// Swift concurrency pool is never blocked. Work runs in the order it was given.
final class BlockingWorkers: Sendable {
    /// Two, as many as a station's cores: the work is disk reads and hashing.
    static let shared = BlockingWorkers(name: "ingest-work", count: 2)

    private let jobs = BlockingQueue<@Sendable () -> Void>(capacity: .max)

    init(name: String, count: Int) {
        for index in 0..<count {
            startThread("\(name)-\(index)") { [jobs] in
                while true { jobs.take()() }
            }
        }
    }

    /// Runs `body` on one of the threads and awaits its result.
    func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            jobs.put { continuation.resume(returning: Result { () throws(E) -> T in try body() }) }
        }
        return try result.get()
    }
}

/// Starts `body` on a new thread and returns a handle to wait for it.
final class Joinable: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)

    init(_ name: String, _ body: @escaping @Sendable () -> Void) {
        startThread(name) { [done] in
            body()
            done.signal()
        }
    }

    func join() { done.wait() }
}
