import Foundation
import Testing

@testable import IngestKit

/// Which multipart uploads `ingest rescan` aborts, and where it looks for them.
@Suite struct OrphanSweepTests {
    let configured = S3Destination(endpoint: "https://s3.example.net", bucket: "cards", region: "eu-west-1", addressing: .path)
    let older = S3Destination(endpoint: "http://10.0.0.5:8333", bucket: "archive", region: "us-east-1", addressing: .path)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func upload(_ id: String, hoursAgo: Double) -> ListedUpload {
        ListedUpload(key: "fleet/\(id).MP4", uploadID: id, initiated: now.addingTimeInterval(-hoursAgo * 3600))
    }

    @Test func onlyUploadsTheJournalDoesNotKnowAndOldEnoughAreOrphans() {
        let listed = [
            upload("known-old", hoursAgo: 400), upload("unknown-old", hoursAgo: 200), upload("unknown-young", hoursAgo: 1),
            upload("unknown-at-the-age", hoursAgo: 168),
        ]
        let orphans = OrphanSweeper.orphans(listed, known: ["known-old"], cutoff: now.addingTimeInterval(-168 * 3600))
        #expect(orphans.map(\.uploadID) == ["unknown-old", "unknown-at-the-age"])
    }

    @Test func anAgeOfZeroTakesEveryUnknownUploadAlreadyBegun() {
        let listed = [upload("a", hoursAgo: 0), upload("b", hoursAgo: 0.01), upload("c", hoursAgo: -0.01)]
        #expect(OrphanSweeper.orphans(listed, known: [], cutoff: now).map(\.uploadID) == ["a", "b"])
    }

    @Test func theConfiguredDestinationComesFirstAndEachBucketIsSweptOnce() {
        var sameBucketOtherRegion = configured
        sameBucketOtherRegion.region = "us-east-1"
        let destinations = OrphanSweeper.destinations(configured: configured, journal: [older, sameBucketOtherRegion, older])
        #expect(destinations == [configured, older])
        #expect(OrphanSweeper.destinations(configured: nil, journal: [older]) == [older])
    }

    @Test func theSweepsTotalsAddUpItsDestinations() {
        var sweep = OrphanSweep(age: .seconds(3600))
        var a = OrphanSweepOutcome(target: configured, prefix: "")
        a.aborted = 2
        a.young = 3
        var b = OrphanSweepOutcome(target: older, prefix: "")
        b.problem = "refused"
        sweep.destinations = [a, b]
        #expect(sweep.aborted == 2 && sweep.young == 3 && sweep.failures == 1)
    }

    @Test func eachDestinationIsReportedAsOneEventAndOneLine() {
        var outcome = OrphanSweepOutcome(target: configured, prefix: "fleet/")
        outcome.listed = 5
        outcome.aborted = 2
        outcome.young = 1
        let event = RescanEvent.orphansSwept(outcome, age: .seconds(7 * 86400))
        #expect(event.json["event"] == "orphan_uploads_swept")
        #expect(event.json["aborted"] == .int(2) && event.json["kept_young"] == .int(1) && event.json["listed"] == .int(5))
        #expect(event.json["bucket"] == "cards" && event.json["prefix"] == "fleet/")
        #expect(event.json["message"] == nil)
        #expect(event.text.contains("older than 7d"))
        #expect(event.text.contains("s3://cards/fleet/ at https://s3.example.net: 5 unfinished listed, 2 aborted, 1 younger kept"))
    }

    @Test(arguments: [
        (Duration.seconds(7 * 86400), "7d"), (.seconds(36 * 3600), "36h"), (.seconds(90), "90s"), (.seconds(120), "2m"),
        (.zero, "0s"), (.milliseconds(250), "250ms"),
    ])
    func durationsAreWrittenAsTheConfigurationWritesThem(duration: Duration, text: String) {
        #expect(duration.configText == text)
    }
}
