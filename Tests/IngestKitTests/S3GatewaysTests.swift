import IngestTestSupport
import Logging
import Testing

@testable import IngestKit

/// Which gateway a request goes through, on a clock moved by hand: nothing here sleeps.
@Suite struct S3GatewaysTests {
    let clock = ManualClock()
    let urls = ["http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003"]

    func gateways() throws -> S3Gateways {
        try S3Gateways(urls: urls, logger: Logger(label: "test")) { [clock] in clock.now }
    }

    @Test func requestsGoThroughTheFirstGatewayWhileItIsUp() throws {
        let gateways = try gateways()
        #expect(gateways.pick()?.url == urls[0])
        #expect(gateways.pick()?.url == urls[0])
        #expect(gateways.all.map(\.url) == urls)
    }

    @Test func aGatewayMarkedDownIsSkippedUntilItsTimeIsUp() throws {
        let gateways = try gateways()
        let first = try #require(gateways.pick())
        #expect(gateways.markDown(first, reason: "refused"), "another gateway is up")
        #expect(gateways.isDown(first))
        #expect(gateways.pick()?.url == urls[1])
        clock.advance(by: .milliseconds(999))
        #expect(gateways.pick()?.url == urls[1])
        clock.advance(by: .milliseconds(1))
        #expect(gateways.pick()?.url == urls[0], "tried again after its first second down")
    }

    @Test func eachFailureInARowDoublesTheDownTimeUpToAMinute() throws {
        let gateways = try gateways()
        let first = try #require(gateways.pick())
        var expected: [Duration] = []
        var measured: [Duration] = []
        var downTime = S3Gateways.firstDownTime
        for _ in 0..<9 {
            gateways.markDown(first, reason: "timed out")
            var waited = Duration.zero
            while gateways.isDown(first) {
                clock.advance(by: .milliseconds(250))
                waited += .milliseconds(250)
            }
            measured.append(waited)
            expected.append(downTime)
            downTime = min(downTime * 2, S3Gateways.longestDownTime)
        }
        #expect(measured == expected)
        #expect(measured.last == .seconds(60))
    }

    @Test func anAnswerThroughAGatewayResetsItsDownTime() throws {
        let gateways = try gateways()
        let first = try #require(gateways.pick())
        gateways.markDown(first, reason: "reset")
        clock.advance(by: .seconds(1))
        gateways.markDown(first, reason: "reset")  // 2 s now
        clock.advance(by: .seconds(2))
        gateways.markUp(first)
        gateways.markDown(first, reason: "reset")
        clock.advance(by: .seconds(1))
        #expect(!gateways.isDown(first), "back to one second after an answer")
    }

    @Test func failuresOfRequestsInFlightTogetherMarkTheGatewayDownOnce() throws {
        let gateways = try gateways()
        let first = try #require(gateways.pick())
        for _ in 0..<10 { gateways.markDown(first, reason: "refused") }
        clock.advance(by: .seconds(1))
        #expect(!gateways.isDown(first), "ten failures at once count as one: down for one second, not 512")
    }

    @Test func withEveryGatewayDownTheOneBackFirstIsPickedAndNoneIsUp() throws {
        let gateways = try gateways()
        let all = gateways.all
        #expect(gateways.markDown(all[1], reason: "refused"))
        clock.advance(by: .seconds(1))
        #expect(gateways.markDown(all[1], reason: "refused"))  // 2 s: until t = 3 s
        #expect(gateways.markDown(all[2], reason: "refused"))  // 1 s: until t = 2 s
        #expect(!gateways.markDown(all[0], reason: "refused"), "no other gateway is up")  // until t = 2 s
        #expect(gateways.pick()?.url == urls[0], "of those back at t = 2 s, the first listed")
        clock.advance(by: .seconds(1))
        #expect(gateways.pick()?.url == urls[0])
    }

    @Test func gatewaysAddedLaterComeAfterAndDuplicatesAreDropped() throws {
        let gateways = try gateways()
        try gateways.add(urls: ["http://127.0.0.1:8002/", "http://127.0.0.1:8004"])
        #expect(gateways.all.map(\.url) == urls + ["http://127.0.0.1:8004"])
    }

    @Test func theFirstIdentityShownIsTheBucketsAndAGatewayShowingAnotherIsNeverPickedAgain() throws {
        let gateways = try gateways()
        let all = gateways.all
        #expect(gateways.needsCheck(all[0]))
        #expect(gateways.settle(all[0], shows: Array("id-1".utf8)) == Array("id-1".utf8), "learned from the first")
        #expect(!gateways.needsCheck(all[0]))
        #expect(gateways.settle(all[1], shows: Array("id-2".utf8)) == nil)
        #expect(gateways.settle(all[2], shows: Array("id-1".utf8)) == nil, "already known")
        gateways.markDown(all[0], reason: "refused")
        #expect(gateways.pick()?.url == urls[2], "the gateway of another bucket is skipped though it is up")
        #expect(gateways.refusals.contains(urls[1]) && gateways.refusals.contains("another bucket"), "\(gateways.refusals)")
    }

    @Test func aGatewayWithoutTheMarkerWhileTheBucketHasOneIsRefused() throws {
        let gateways = try gateways()
        let all = gateways.all
        gateways.expect(bucketID: Array("journalled".utf8))
        #expect(gateways.settle(all[0], shows: nil) == nil)
        #expect(gateways.settle(all[1], shows: Array("journalled".utf8)) == nil)
        #expect(gateways.pick()?.url == urls[1])
        #expect(gateways.refusals.contains("no .ingest/bucket-id"), "\(gateways.refusals)")
    }

    @Test func withEveryGatewayRefusedNoneIsPicked() throws {
        let gateways = try S3Gateways(urls: Array(urls.prefix(2)), logger: Logger(label: "test"))
        gateways.expect(bucketID: Array("a".utf8))
        for gateway in gateways.all { gateways.settle(gateway, shows: Array("b".utf8)) }
        #expect(gateways.pick() == nil)
    }

    @Test func aLoneGatewayIsNotChecked() throws {
        let gateways = try S3Gateways(urls: [urls[0]], logger: Logger(label: "test"))
        #expect(!gateways.needsCheck(try #require(gateways.pick())))
    }

    @Test func aLoneGatewayIsCheckedOnceTheBucketsIdIsKnown() throws {
        let gateways = try S3Gateways(urls: [urls[0]], logger: Logger(label: "test"))
        gateways.expect(bucketID: Array("journalled".utf8))
        #expect(gateways.needsCheck(try #require(gateways.pick())))
    }

    @Test func theDecisionOnTheGatewaysHoldsForEveryRequest() throws {
        let gateways = try gateways()
        let id = Array("x".utf8)
        let membership = GatewayMembership(
            recorded: id, recognised: [:], anyGatewayKnown: true, sights: [.noMarker, .noAnswer("refused"), .marker(id)])
        gateways.apply(membership, to: urls)
        let all = gateways.all
        #expect(gateways.bucketID == id)
        #expect(gateways.pick()?.url == urls[1], "the foreign gateway listed first is never picked")
        #expect(gateways.needsCheck(all[1]), "the one that did not answer is checked by its first request")
        #expect(!gateways.needsCheck(all[2]), "the one that showed the id is not asked again")
        #expect(gateways.refusals.contains(urls[0]) && gateways.refusals.contains("bucket id is x"), "\(gateways.refusals)")
        gateways.markDown(all[1], reason: "refused")
        #expect(gateways.pick()?.url == urls[2])
    }

    @Test func withoutAKnownIdAGatewayShowingNoMarkerIsUsedAndNothingIsWritten() throws {
        let gateways = try gateways()
        let all = gateways.all
        #expect(gateways.settle(all[0], shows: nil) == nil)
        #expect(gateways.pick()?.url == urls[0] && gateways.refusals.isEmpty)
        #expect(gateways.bucketID == nil)
    }
}
