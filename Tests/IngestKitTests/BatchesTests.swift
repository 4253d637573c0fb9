import Foundation
import Synchronization
import Testing

@testable import IngestKit

/// The hand-off of stage outcomes to the journal: batches as large as what piled up, never
/// more than the limit, the producer waiting meanwhile.
@Suite struct BatchesTests {
    @Test(.timeLimit(.minutes(1)))
    func itemsAddedFasterThanTheyAreTakenComeInOrderInBatchesOfAtMostTheLimit() async {
        let batches = Batches<Int>(limit: 32)
        let count = 5_000
        let added = Atomic<Int>(0)
        startThread("test-producer") {
            for item in 0..<count {
                batches.add(item)
                added.add(1, ordering: .relaxed)
            }
            batches.finish()
        }
        var taken: [Int] = []
        var largest = 0
        var mostAhead = 0
        while let batch = await batches.next() {
            largest = max(largest, batch.count)
            // A slow consumer (a journal commit): the producer runs ahead as far as it may,
            // the limit, and waits there.
            let full = min(count, taken.count + batch.count + batches.limit)
            #expect(await eventually { added.load(ordering: .relaxed) >= full })
            mostAhead = max(mostAhead, added.load(ordering: .relaxed) - taken.count - batch.count)
            taken += batch
        }
        #expect(taken == Array(0..<count), "every item, in order")
        #expect(largest == 32, "what piles up goes in one batch, of at most the limit")
        #expect(mostAhead <= 32, "the producer waits instead of running ahead: \(mostAhead) items waited")
    }

    @Test(.timeLimit(.minutes(1)))
    func aConsumerThatGivesUpReleasesAWaitingProducer() async {
        let batches = Batches<Int>(limit: 4)
        let producer = Task {
            await onDedicatedThread("test-producer") {
                for item in 0..<1_000 { batches.add(item) }
                batches.finish()
            }
        }
        let first = await batches.next()
        #expect(first?.isEmpty == false)
        batches.discard()
        await producer.value
        #expect(await batches.next() == nil, "nothing is handed on once the consumer gave up")
    }
}
