/// The bound on what all uploads of a process have on the wire at once: requests carrying
/// bodies (parts and single PUTs) and the bytes of those bodies.
///
/// Each file's state machine keeps its own window of parts; this limiter is what keeps
/// several files, each with a full window, from multiplying connections, open file ranges,
/// and the bytes a failed connection would have to send again. Waiters are served first
/// come, first served, so a large part is never starved by a stream of small ones.
public actor TransferLimiter {
    public nonisolated let maxRequests: Int
    public nonisolated let maxBytes: Int64
    private var requests = 0
    private var bytes: Int64 = 0
    private var waiters: [(weight: Int64, continuation: CheckedContinuation<Void, Never>)] = []

    /// - Parameters:
    ///   - maxRequests: bodies on the wire at once (at least 1).
    ///   - maxBytes: their total size; one body larger than this is still let through alone,
    ///     so a part size above the budget slows uploads down but never blocks them.
    public init(maxRequests: Int, maxBytes: Int64) {
        self.maxRequests = max(1, maxRequests)
        self.maxBytes = max(1, maxBytes)
    }

    /// Waits for room for one body of `weight` bytes.
    public func acquire(_ weight: Int64) async {
        if waiters.isEmpty, fits(weight) {
            take(weight)
            return
        }
        await withCheckedContinuation { waiters.append((weight, $0)) }
    }

    /// Gives back what ``acquire(_:)`` took, and wakes whoever fits now, in order.
    public func release(_ weight: Int64) {
        requests -= 1
        bytes -= weight
        while let first = waiters.first, fits(first.weight) {
            waiters.removeFirst()
            take(first.weight)
            first.continuation.resume()
        }
    }

    /// Runs `body` holding room for `weight` bytes.
    public nonisolated func withPermit<T: Sendable, E: Error>(
        _ weight: Int64, _ body: () async throws(E) -> T
    ) async throws(E) -> T {
        await acquire(weight)
        do {
            let result = try await body()
            await release(weight)
            return result
        } catch {
            await release(weight)
            throw error
        }
    }

    private func fits(_ weight: Int64) -> Bool {
        requests < maxRequests && (bytes == 0 || bytes + weight <= maxBytes)
    }

    private func take(_ weight: Int64) {
        requests += 1
        bytes += weight
    }
}
