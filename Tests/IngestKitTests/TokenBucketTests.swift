import Testing

@testable import IngestKit

/// A bucket behind a reference, so that `#expect`, which cannot mutate what it checks, can
/// take from it.
private final class Bucket {
    var bucket: TokenBucket
    init(rate: Int64, capacity: Int64, now: ContinuousClock.Instant) {
        bucket = TokenBucket(rate: rate, capacity: capacity, now: now)
    }
    func take(_ count: Int64, at now: ContinuousClock.Instant) -> Bool { bucket.take(count, at: now) }
    func giveBack(_ count: Int64) { bucket.giveBack(count) }
    func available(at now: ContinuousClock.Instant) -> Int64 { bucket.available(at: now) }
    func delay(until count: Int64, at now: ContinuousClock.Instant) -> Duration { bucket.delay(until: count, at: now) }
}

/// The bucket is given the time by each call: these tests move it by hand and never sleep.
@Suite struct TokenBucketTests {
    let start = ContinuousClock.now

    @Test func aNewBucketIsFullAndHoldsNoMoreThanItsCapacity() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start)
        #expect(bucket.available(at: start) == 250)
        #expect(bucket.available(at: start + .seconds(60)) == 250)
        #expect(!bucket.take(251, at: start + .seconds(60)))
        #expect(bucket.take(250, at: start + .seconds(60)))
        #expect(bucket.available(at: start + .seconds(60)) == 0)
    }

    @Test func tokensFlowBackAtTheRate() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start)
        #expect(bucket.take(250, at: start))
        #expect(bucket.available(at: start + .milliseconds(100)) == 100)
        #expect(!bucket.take(101, at: start + .milliseconds(100)))
        #expect(bucket.take(100, at: start + .milliseconds(100)))
        #expect(bucket.available(at: start + .milliseconds(100)) == 0)
        #expect(bucket.available(at: start + .milliseconds(350)) == 250)
    }

    @Test func aFailedTakeTakesNothing() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start)
        #expect(bucket.take(200, at: start))
        #expect(!bucket.take(100, at: start))
        #expect(bucket.take(50, at: start))
    }

    @Test func theDelayIsTheTimeTheMissingTokensTakeToFlowIn() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start)
        #expect(bucket.delay(until: 100, at: start) == .zero)
        #expect(bucket.take(250, at: start))
        #expect(bucket.delay(until: 100, at: start) == .milliseconds(100))
        #expect(bucket.delay(until: 100, at: start + .milliseconds(40)) == .milliseconds(60))
        let due = start + bucket.delay(until: 100, at: start)
        #expect(!bucket.take(100, at: start + .milliseconds(99)))
        #expect(bucket.take(100, at: due))
    }

    @Test func tokensGivenBackAreTakenAgainButNeverOverfillTheBucket() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start)
        #expect(bucket.take(250, at: start))
        bucket.giveBack(80)
        #expect(bucket.available(at: start) == 80)
        bucket.giveBack(1000)
        #expect(bucket.available(at: start) == 250)
    }

    @Test func anEarlierTimeAddsNothingAndTakesNothingAway() {
        let bucket = Bucket(rate: 1000, capacity: 250, now: start + .seconds(1))
        #expect(bucket.take(250, at: start + .seconds(1)))
        #expect(bucket.available(at: start) == 0)
        #expect(!bucket.take(1, at: start))
        #expect(bucket.available(at: start + .milliseconds(1100)) == 100)
    }

    /// However it is drawn on, in small takes or large, often or seldom (but before it
    /// overflows), what a bucket gives over a stretch of time is the rate times that time
    /// plus at most its capacity.
    @Test(arguments: [(1, 7), (13, 3), (64, 50), (100, 150)] as [(Int64, Int)])
    func overAnyStretchTheBucketGivesTheRateAndAtMostItsCapacityMore(size: Int64, stepMilliseconds: Int) {
        var bucket = TokenBucket(rate: 1000, capacity: 250, now: start)
        var taken: Int64 = 0
        var now = start
        let end = start + .seconds(10)
        while now < end {
            while bucket.take(size, at: now) { taken += size }
            now += .milliseconds(stepMilliseconds)
        }
        #expect(taken <= 10 * 1000 + 250)
        #expect(taken >= 10 * 1000 + 250 - size - Int64(stepMilliseconds), "took \(taken)")
    }
}
