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

    func enter(_ weight: Int64) {
        requests += 1
        bytes += weight
        maxRequests = max(maxRequests, requests)
        maxBytes = max(maxBytes, bytes)
    }

    func leave(_ weight: Int64) {
        requests -= 1
        bytes -= weight
    }
}
