/// The bound on what all uploads of a process have on the wire at once: requests carrying
/// bodies (parts and single PUTs) and the bytes of those bodies.
///
/// Each file's state machine keeps its own window of parts; this limiter is what keeps
/// several files, each with a full window, from multiplying connections, open file ranges,
/// and the bytes a failed connection would have to send again. Waiters are served first
/// come, first served, so a large part is never starved by a stream of small ones.
///
/// A request slot can hold up to eight small bodies (up to `smallBody` bytes each), each
/// taking an eighth of a slot for every quarter of `smallBody` it holds: a small file's upload
/// spends most of its time waiting for the server's answer, not sending, and its body holds
/// a buffer of its own size, where a larger one holds two read-ahead blocks
/// (``BodyReadAhead``). So a slot stands for the same memory whatever fills it (two blocks),
/// and a card of 20 kB files has eight times as many on the wire as of large parts. The
/// server gains from it too: SeaweedFS spent less CPU per `PutObject` with 64 at once than
/// with 16.
public actor TransferLimiter {
    public nonisolated let maxRequests: Int
    public nonisolated let maxBytes: Int64
    public nonisolated let smallBody: Int64
    /// Eighths of a slot taken (``eighths(_:)``).
    private var taken = 0
    private var bytes: Int64 = 0
    private var waiters: [(weight: Int64, continuation: CheckedContinuation<Void, Never>)] = []

    /// - Parameters:
    ///   - maxRequests: bodies on the wire at once (at least 1); up to eight times as many
    ///     small ones.
    ///   - maxBytes: their total size; one body larger than this is still let through alone,
    ///     so a part size above the budget slows uploads down but never blocks them.
    ///   - smallBody: the size up to which a body is small (0: none is).
    public init(maxRequests: Int, maxBytes: Int64, smallBody: Int64 = 0) {
        self.maxRequests = max(1, maxRequests)
        self.maxBytes = max(1, maxBytes)
        self.smallBody = smallBody
    }

    /// Bodies waiting for room, at this instant.
    var waiting: Int { waiters.count }

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
        taken -= eighths(weight)
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

    /// The eighths of a slot a body of `weight` bytes takes: 8 a large one; a small one, one
    /// for each quarter of `smallBody` it holds, begun.
    nonisolated func eighths(_ weight: Int64) -> Int {
        guard weight > 0, weight <= smallBody else { return 8 }
        let quarter = max(1, smallBody / 4)
        return Int((weight + quarter - 1) / quarter)
    }

    private func fits(_ weight: Int64) -> Bool {
        taken + eighths(weight) <= 8 * maxRequests && (bytes == 0 || bytes + weight <= maxBytes)
    }

    private func take(_ weight: Int64) {
        taken += eighths(weight)
        bytes += weight
    }
}
