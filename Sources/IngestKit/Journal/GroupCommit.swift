import Synchronization

/// Small writes that many tasks make at once, committed together: each caller's item joins
/// the batch that is waiting, one caller at a time commits a whole batch in one transaction,
/// and every caller resumes with its own answer once that transaction has committed.
///
/// A card of small files completes an upload every fraction of a millisecond, a few of them
/// at once; each completion alone was a transaction of its own (a `BEGIN`, its pages
/// written to the WAL, the WAL's locks, a `COMMIT`), and a large share of the CPU time of
/// the upload path. A caller that finds no commit under way leads the next batch and
/// commits what has gathered; those that come while it commits make the batch after. While
/// items come together (the batch before held more than one, or others wait already), the
/// leader first waits `gathering` for more to join (none by default); an item that comes
/// alone is committed at once, so a lone upload's completion is never held back.
///
/// Nothing is acknowledged before it is written: a caller resumes only after the
/// transaction holding its item committed. A batch whose transaction fails is committed
/// again one item at a time, so one item's failure is that caller's alone.
///
/// Memory: the batch waiting holds at most one item per task waiting on it.
final class GroupCommit<Item: Sendable, Answer: Sendable>: Sendable {
    typealias Commit = @Sendable ([Item]) async throws(JournalError) -> [Answer]

    /// What a waiting caller is woken with: its answer, or the turn to commit the next batch.
    private enum Wake: Sendable {
        case answered(Result<Answer, JournalError>)
        case lead
    }

    private struct Waiting: Sendable {
        var items: [Item] = []
        var callers: [CheckedContinuation<Wake, Never>] = []
        /// A batch is being committed, or its leader is on its way to commit it.
        var committing = false
        /// Items in the batch committed last.
        var lastBatch = 0
    }

    private let state = Mutex(Waiting())
    /// How long a batch's leader waits for others to join it before it commits, while items
    /// come together.
    private let gathering: Duration
    /// What the leader waits on while it gathers: the continuous clock, or a test's.
    private let clock: any Clock<Duration>

    init(gathering: Duration = .zero, clock: any Clock<Duration> = ContinuousClock()) {
        self.gathering = gathering
        self.clock = clock
    }

    /// Items waiting for the next commit, at this instant.
    var itemsWaiting: Int { state.withLock { $0.items.count } }

    /// Commits `item` with whatever other items are waiting, and returns its answer once
    /// the transaction holding it has committed. `commit` writes a batch in one transaction
    /// and returns one answer per item, in order (throwing rolls the whole batch back); every
    /// caller passes the same.
    func submit(_ item: Item, _ commit: Commit) async throws(JournalError) -> Answer {
        let wake = await withCheckedContinuation { (caller: CheckedContinuation<Wake, Never>) in
            let leads = state.withLock { waiting in
                waiting.items.append(item)
                waiting.callers.append(caller)
                if waiting.committing { return false }
                waiting.committing = true
                return true
            }
            if leads { caller.resume(returning: .lead) }
        }
        switch wake {
        case .answered(let result): return try result.get()
        case .lead: return try await lead(commit).get()
        }
    }

    /// Commits the waiting batch, whose first item is this caller's, answers the others,
    /// then hands the turn to the first caller of the batch that gathered meanwhile, if any.
    private func lead(_ commit: Commit) async -> Result<Answer, JournalError> {
        if gathering > .zero, state.withLock({ $0.lastBatch > 1 || $0.items.count > 1 }) {
            try? await clock.sleep(for: gathering)
        }
        let (items, callers) = state.withLock { waiting in
            defer {
                waiting.lastBatch = waiting.items.count
                waiting.items.removeAll(keepingCapacity: true)
                waiting.callers.removeAll(keepingCapacity: true)
            }
            return (waiting.items, waiting.callers)
        }
        let answers = await committed(items, commit)
        for (caller, answer) in zip(callers.dropFirst(), answers.dropFirst()) { caller.resume(returning: .answered(answer)) }
        let next = state.withLock { waiting -> CheckedContinuation<Wake, Never>? in
            if waiting.callers.isEmpty { waiting.committing = false }
            return waiting.callers.first
        }
        next?.resume(returning: .lead)
        return answers[0]
    }

    /// One answer per item: from one transaction, or, when that fails and there are several,
    /// from one transaction each.
    private func committed(_ items: [Item], _ commit: Commit) async -> [Result<Answer, JournalError>] {
        do throws(JournalError) {
            let answers = try await commit(items)
            precondition(answers.count == items.count, "a group commit answers every item")
            return answers.map { .success($0) }
        } catch {
            guard items.count > 1 else { return [.failure(error)] }
        }
        var answers: [Result<Answer, JournalError>] = []
        for item in items {
            do throws(JournalError) {
                answers.append(.success(try await commit([item])[0]))
            } catch {
                answers.append(.failure(error))
            }
        }
        return answers
    }
}
