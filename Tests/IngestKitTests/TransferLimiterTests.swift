import Testing

@testable import IngestKit

@Suite struct TransferLimiterTests {
    @Test func neverMoreRequestsOrBytesOnTheWireThanAllowed() async {
        let limiter = TransferLimiter(maxRequests: 3, maxBytes: 100)
        let peak = PeakCounter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let weight = Int64(10 + index % 4 * 15)
                    await limiter.withPermit(weight) { () async -> Void in
                        await peak.enter(weight)
                        await Task.yield()
                        await peak.leave(weight)
                    }
                }
            }
        }
        #expect(await peak.maxRequests == 3)
        #expect(await peak.maxBytes <= 100)
    }

    @Test func twoSmallBodiesShareARequestSlotAndALargeOneTakesAWholeOne() async {
        let limiter = TransferLimiter(maxRequests: 3, maxBytes: 1 << 20, smallBody: 100)
        let peak = PeakCounter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    await limiter.withPermit(100) { () async -> Void in
                        await peak.enter(100)
                        try? await Task.sleep(for: .milliseconds(2))
                        await peak.leave(100)
                    }
                }
            }
        }
        #expect(await peak.maxRequests == 6)

        let large = PeakCounter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let weight: Int64 = index % 2 == 0 ? 100 : 101
                    await limiter.withPermit(weight) { () async -> Void in
                        await large.enter(weight)
                        try? await Task.sleep(for: .milliseconds(2))
                        await large.leave(weight)
                    }
                }
            }
        }
        // Half slots: 2 for a large body, 1 for a small one, never more than 6 taken.
        #expect(await large.maxHalfSlots(smallBody: 100) <= 6)
        #expect(await large.maxRequests >= 3)
    }

    @Test func aBodyLargerThanTheByteBudgetStillGoesAlone() async {
        let limiter = TransferLimiter(maxRequests: 4, maxBytes: 10)
        let done = await limiter.withPermit(50) { () async -> Bool in true }
        #expect(done)
    }
}

private actor PeakCounter {
    var requests = 0
    var bytes: Int64 = 0
    var maxRequests = 0
    var maxBytes: Int64 = 0

    var weights: [Int64] = []
    var halfSlotPeaks: [[Int64]] = []

    func enter(_ weight: Int64) {
        requests += 1
        bytes += weight
        maxRequests = max(maxRequests, requests)
        maxBytes = max(maxBytes, bytes)
        weights.append(weight)
        halfSlotPeaks.append(weights)
    }

    func leave(_ weight: Int64) {
        requests -= 1
        bytes -= weight
        weights.remove(at: weights.firstIndex(of: weight)!)
    }

    /// The most half slots the bodies on the wire together ever took.
    func maxHalfSlots(smallBody: Int64) -> Int {
        halfSlotPeaks.map { $0.reduce(0) { $0 + ($1 <= smallBody ? 1 : 2) } }.max() ?? 0
    }
}
