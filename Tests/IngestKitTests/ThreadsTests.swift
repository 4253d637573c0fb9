import Foundation
import Testing

@testable import IngestKit

@Suite struct ThreadsTests {
    /// What `top -H`, `ps -L` and `perf` show for the thread: the kernel's name for it.
    @Test func aDedicatedThreadCarriesItsNameToTheKernel() async throws {
        let name = await onDedicatedThread("ingest-check") {
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "(unreadable)"
        }
        #expect(name == "ingest-check\n")
    }

    /// The stager's writer waits a little for more copies before it publishes a batch: an
    /// empty queue answers false once the deadline passes, and true as soon as an item comes.
    @Test func aQueueWaitedOnAnswersWhenAnItemComesOrTheDeadlinePasses() async {
        let queue = BlockingQueue<Int>(capacity: 4)
        let start = ContinuousClock.now
        #expect(!queue.waitForItem(until: start + .milliseconds(30)))
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        #expect(!queue.waitForItem(until: start), "a deadline passed already: no wait")

        let waiter = Task { await onDedicatedThread("test-queue-wait") { queue.waitForItem(until: .now + .seconds(60)) } }
        #expect(await eventually { threadIsAsleep(named: "test-queue-wait") }, "the waiter waits")
        queue.put(7)
        #expect(await waiter.value)
        #expect(ContinuousClock.now - start < .seconds(60), "woken by the item, not the deadline")
        #expect(queue.waitForItem(until: start), "an item waiting: true at once")
        #expect(queue.take() == 7)
    }

    /// Producers and consumers, more of each than the queue has room, each waiting in turn
    /// for room or for an item: every item is taken once, and no thread sleeps through the
    /// wake-up it waits for (the queue wakes a thread only when one waits, after letting go
    /// of its lock).
    @Test(.timeLimit(.minutes(1)))
    func itemsCrossAFullQueueBetweenManyThreadsEachTakenOnceWithNoWakeUpLost() async {
        let queue = BlockingQueue<Int?>(capacity: 2)
        let (producers, consumers, each) = (4, 3, 20_000)
        let taken = await withTaskGroup(of: [Int].self) { group in
            for p in 0..<producers {
                group.addTask {
                    await onDedicatedThread("ingest-put") {
                        for i in 0..<each { queue.put(p * each + i) }
                        return []
                    }
                }
            }
            for _ in 0..<consumers {
                group.addTask {
                    await onDedicatedThread("ingest-take") {
                        var mine: [Int] = []
                        while let item = queue.take() { mine.append(item) }
                        return mine
                    }
                }
            }
            var all: [Int] = []
            var producersDone = 0
            for await part in group {
                all += part
                if part.isEmpty {
                    producersDone += 1
                    if producersDone == producers { for _ in 0..<consumers { queue.put(nil) } }
                }
            }
            return all
        }
        #expect(taken.count == producers * each)
        #expect(Set(taken).count == producers * each)
    }

    /// A request body taken from the read-ahead queue owns an open staged copy: once its
    /// taker lets it go, nothing of the queue holds it (a held descriptor kept a 4 GiB
    /// copy's blocks allocated until the process exited, 0.7 s after its last object).
    @Test func anItemTakenFromAQueueIsNoLongerHeldByIt() {
        final class Owner {}
        let queue = BlockingQueue<Owner>(capacity: .max)
        weak var released: Owner?
        do {
            let owner = Owner()
            released = owner
            queue.put(owner)
            queue.put(Owner())
        }
        _ = queue.take()
        #expect(released == nil)
        #expect(!queue.isEmpty)
    }
}
