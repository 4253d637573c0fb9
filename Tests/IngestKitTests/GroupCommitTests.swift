import Synchronization
import Testing

@testable import IngestKit

@Suite struct GroupCommitTests {
    /// Counts the commits a group commit makes and the items in each; the commit waits on
    /// `gate` so that callers pile up behind the first.
    final class Log: Sendable {
        let batches = Mutex<[[Int]]>([])
        let gate = Gate()

        func commit(_ items: [Int]) async throws(JournalError) -> [String] {
            batches.withLock { $0.append(items) }
            await gate.pass()
            if items.contains(-1) { throw JournalError(path: "test", operation: .write, reason: "item -1 cannot be written") }
            return items.map { "answer \($0)" }
        }
    }

    @Test func callersThatComeWhileACommitRunsShareTheNextOneAndEachGetsItsOwnAnswer() async throws {
        let group = GroupCommit<Int, String>()
        let log = Log()
        let answers = await withTaskGroup(of: (Int, String?).self) { tasks in
            tasks.addTask { (0, try? await group.submit(0, log.commit)) }
            // The first commit is under way, held at the gate: the rest wait for the next one.
            #expect(await eventually { !log.batches.withLock { $0.isEmpty } })
            for item in 1...20 { tasks.addTask { (item, try? await group.submit(item, log.commit)) } }
            #expect(await eventually { group.itemsWaiting == 20 })
            await log.gate.openUp()
            var answers: [Int: String] = [:]
            for await (item, answer) in tasks { answers[item] = answer }
            return answers
        }
        #expect(answers.count == 21)
        for (item, answer) in answers { #expect(answer == "answer \(item)") }
        let batches = log.batches.withLock { $0 }
        #expect(batches.first == [0], "the first caller commits at once, alone")
        #expect(batches.count < 21, "the callers that waited were committed together: \(batches)")
        #expect(batches.flatMap { $0 }.sorted() == Array(0...20), "every item committed once")
    }

    @Test func aLoneCallerIsCommittedAtOnceAndTheNextAlsoWhenNothingRuns() async throws {
        let group = GroupCommit<Int, String>()
        let log = Log()
        await log.gate.openUp()
        #expect(try await group.submit(1, log.commit) == "answer 1")
        #expect(try await group.submit(2, log.commit) == "answer 2")
        #expect(log.batches.withLock { $0 } == [[1], [2]])
    }

    /// With a gathering time, a caller that comes alone is committed at once; once items
    /// come together, the leader waits for the callers that come meanwhile and commits them
    /// with its own, in one batch.
    @Test(.timeLimit(.minutes(1)))
    func aLoneCallerIsCommittedAtOnceAndCallersThatComeTogetherAreGatheredIntoOneBatch() async throws {
        let clock = ManualClock()
        let group = GroupCommit<Int, String>(gathering: .seconds(2), clock: clock)
        let log = Log()
        let answers = await withTaskGroup(of: (Int, String?).self) { tasks in
            tasks.addTask { (0, try? await group.submit(0, log.commit)) }
            #expect(await eventually { !log.batches.withLock({ $0.isEmpty }) || clock.sleepers > 0 })
            #expect(clock.sleepers == 0, "a lone caller is committed without gathering")
            // The first commit is held at the gate: these three wait together, and their
            // leader gathers the two that come while it waits.
            for item in 1...3 { tasks.addTask { (item, try? await group.submit(item, log.commit)) } }
            #expect(await eventually { group.itemsWaiting == 3 })
            await log.gate.openUp()
            await clock.sleeping()
            for item in 4...5 { tasks.addTask { (item, try? await group.submit(item, log.commit)) } }
            #expect(await eventually { group.itemsWaiting == 5 })
            clock.advance(by: .seconds(1))
            #expect(clock.sleepers == 1, "the leader gathers for the whole gathering time")
            #expect(log.batches.withLock { $0 } == [[0]], "nothing is committed while the leader gathers")
            clock.advance(by: .seconds(1))
            var answers: [Int: String] = [:]
            for await (item, answer) in tasks { answers[item] = answer }
            return answers
        }
        for item in 0...5 { #expect(answers[item] == "answer \(item)") }
        #expect(log.batches.withLock { $0.map { $0.sorted() } } == [[0], [1, 2, 3, 4, 5]])
    }

    @Test func anItemThatCannotBeWrittenFailsItsOwnCallerAndNoOther() async throws {
        let group = GroupCommit<Int, String>()
        let log = Log()
        let results = await withTaskGroup(of: (Int, Result<String, JournalError>).self) { tasks in
            tasks.addTask { (0, await Self.result { () throws(JournalError) in try await group.submit(0, log.commit) }) }
            #expect(await eventually { !log.batches.withLock { $0.isEmpty } })
            for item in [1, -1, 2] {
                tasks.addTask { (item, await Self.result { () throws(JournalError) in try await group.submit(item, log.commit) }) }
            }
            #expect(await eventually { group.itemsWaiting == 3 })
            await log.gate.openUp()
            var results: [Int: Result<String, JournalError>] = [:]
            for await (item, result) in tasks { results[item] = result }
            return results
        }
        for item in [0, 1, 2] { #expect(try results[item]?.get() == "answer \(item)") }
        #expect(throws: JournalError.self) { try results[-1]?.get() }
        let batches = log.batches.withLock { $0 }
        #expect(batches.contains { $0.count > 1 && $0.contains(-1) }, "the failing item was first tried with others: \(batches)")
        #expect(batches.contains([-1]), "then alone")
    }

    static func result(_ body: () async throws(JournalError) -> String) async -> Result<String, JournalError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }
}
