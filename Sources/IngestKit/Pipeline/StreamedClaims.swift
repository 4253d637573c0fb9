/// The claims of streamed files (``PartStreamer``), each waiting in a task of its own for its
/// stream's last part, so the run goes on meanwhile. At most ``PartStreamer/maxStreams`` wait
/// at once, as at most that many files stream: adding one more first waits for the oldest.
struct StreamedClaims {
    private var waiting: [Task<Result<Void, JournalError>, Never>] = []

    mutating func add(_ claim: @escaping @Sendable () async throws(JournalError) -> Void) async throws(JournalError) {
        if waiting.count >= PartStreamer.maxStreams { try await waiting.removeFirst().value.get() }
        waiting.append(Task {
            do throws(JournalError) {
                try await claim()
                return .success(())
            } catch {
                return .failure(error)
            }
        })
    }

    /// Waits for every claim; throws the first failure once all have ended.
    mutating func settle() async throws(JournalError) {
        var failure: JournalError?
        for claim in waiting {
            if case .failure(let error) = await claim.value { failure = failure ?? error }
        }
        waiting.removeAll()
        if let failure { throw failure }
    }
}
