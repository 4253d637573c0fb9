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

    @Test func aSmallBodyTakesAnEighthOfASlotForEachQuarterOfTheSmallSizeItHolds() {
        let limiter = TransferLimiter(maxRequests: 3, maxBytes: 1 << 20, smallBody: 100)
        #expect(limiter.eighths(1) == 1)
        #expect(limiter.eighths(25) == 1)
        #expect(limiter.eighths(26) == 2)
        #expect(limiter.eighths(100) == 4, "a body of the small size takes half a slot")
        #expect(limiter.eighths(101) == 8, "a larger one a whole slot")
        #expect(limiter.eighths(0) == 8, "an empty body is no small body")
        #expect(TransferLimiter(maxRequests: 3, maxBytes: 1 << 20).eighths(1) == 8, "without a small size, every body is large")
    }

    /// Each body holds its room until a gate opens, once every body holds room or waits for
    /// it: the first wave is as large as the limiter lets it be.
    @Test func eightTinyBodiesShareARequestSlotAndALargeOneTakesAWholeOne() async {
        let limiter = TransferLimiter(maxRequests: 3, maxBytes: 1 << 20, smallBody: 100)
        let tiny = PeakCounter()
        let tinyGate = Gate()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<60 {
                group.addTask {
                    await limiter.withPermit(20) { () async -> Void in
                        await tiny.enter(20)
                        await tinyGate.pass()
                        await tiny.leave(20)
                    }
                }
            }
            #expect(await eventually { await tiny.requests + limiter.waiting == 60 })
            #expect(await tiny.requests == 24, "eight tiny bodies to each of the three slots")
            await tinyGate.openUp()
        }
        #expect(await tiny.maxRequests == 24)

        let mixed = PeakCounter()
        let mixedGate = Gate()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<60 {
                group.addTask {
                    let weight: Int64 = [20, 60, 100, 101][index % 4]
                    await limiter.withPermit(weight) { () async -> Void in
                        await mixed.enter(weight)
                        await mixedGate.pass()
                        await mixed.leave(weight)
                    }
                }
            }
            #expect(await eventually { await mixed.requests + limiter.waiting == 60 })
            #expect(await mixed.requests >= 3)
            await mixedGate.openUp()
        }
        #expect(await mixed.maxEighths(of: limiter) <= 24)
        #expect(await mixed.maxRequests >= 3)
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
    var peaks: [[Int64]] = []

    func enter(_ weight: Int64) {
        requests += 1
        bytes += weight
        maxRequests = max(maxRequests, requests)
        maxBytes = max(maxBytes, bytes)
        weights.append(weight)
        peaks.append(weights)
    }

    func leave(_ weight: Int64) {
        requests -= 1
        bytes -= weight
        weights.remove(at: weights.firstIndex(of: weight)!)
    }

    /// The most eighths of a slot the bodies on the wire together ever took.
    func maxEighths(of limiter: TransferLimiter) -> Int {
        peaks.map { $0.reduce(0) { $0 + limiter.eighths($1) } }.max() ?? 0
    }
}
