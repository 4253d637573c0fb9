import Synchronization
import Testing

/// The clock the unit tests step instead of sleeping (IngestTestSupport's ``ManualClock``):
/// a sleeper wakes only once the clock is moved to its deadline, and a cancelled one at once.
@Suite(.timeLimit(.minutes(1))) struct ManualClockTests {
    @Test func aSleeperWakesOnlyOnceTheClockReachesItsDeadline() async throws {
        let clock = ManualClock()
        let start = clock.now
        let woken = Atomic<Bool>(false)
        let sleeper = Task {
            try await clock.sleep(for: .seconds(2))
            woken.store(true, ordering: .releasing)
        }
        await clock.sleeping()
        clock.advance(by: .seconds(1))
        let early = woken.load(ordering: .acquiring)
        #expect(!early)
        #expect(clock.sleepers == 1, "a second short of its deadline")
        clock.advance(by: .seconds(1))
        try await sleeper.value
        #expect(clock.now - start == .seconds(2))
        #expect(clock.sleepers == 0)
    }

    @Test func aDeadlineThatPassedAlreadyDoesNotWait() async throws {
        let clock = ManualClock()
        try await clock.sleep(until: clock.now)
        #expect(clock.sleepers == 0)
    }

    @Test func aCancelledSleeperThrowsWithoutTheClockMoving() async {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        await clock.sleeping()
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleepers == 0)
    }
}
