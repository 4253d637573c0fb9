import IngestKit
import Testing

/// Which configured gateways belong to a destination, from the id the journal recorded and
/// what each gateway shows: the URLs and their order decide nothing.
@Suite struct GatewayMembershipTests {
    let x = Array("id-of-x".utf8)
    let z = Array("id-of-z".utf8)

    @Test func theRecordedIdDecidesWhicheverGatewayIsListedFirst() {
        let membership = GatewayMembership(
            recorded: x, recognised: [x: "http://x-gw1"], anyGatewayKnown: true, sights: [.noMarker, .marker(x)])
        #expect(membership.verdicts == [.foreign(.noMarker), .belongs])
        #expect(membership.id == x && membership.basis == .recorded && !membership.isNew)
        #expect(membership.refusal == nil && !membership.needsMarker, "nothing is written where the journal knows the id")
    }

    @Test func aGatewayShowingAnIdTheJournalRecordedUnderAnotherNameMakesTheDestinationThatOne() {
        let membership = GatewayMembership(
            recorded: nil, recognised: [x: "http://x-gw1"], anyGatewayKnown: false,
            sights: [.marker(z), .noMarker, .marker(x)])
        #expect(membership.basis == .recognised(name: "http://x-gw1") && membership.id == x)
        #expect(membership.verdicts == [.foreign(.marker(z)), .foreign(.noMarker), .belongs])
        #expect(!membership.isNew && !membership.needsMarker)
    }

    @Test func gatewaysAllUnknownToTheJournalAreANewDestinationAndOnlyThenIsAMarkerWritten() {
        let fresh = GatewayMembership(recorded: nil, recognised: [x: "http://x-gw1"], anyGatewayKnown: false, sights: [.noMarker, .noMarker])
        #expect(fresh.isNew && fresh.needsMarker && fresh.id == nil)
        #expect(fresh.verdicts == [.belongs, .belongs])

        let marked = GatewayMembership(recorded: nil, recognised: [:], anyGatewayKnown: false, sights: [.noMarker, .marker(z)])
        #expect(marked.isNew && !marked.needsMarker, "another station's marker is the bucket's")
        #expect(marked.verdicts == [.foreign(.noMarker), .belongs])
    }

    @Test func aDestinationKnownByURLWithoutARecordedIdIsNotNew() {
        let membership = GatewayMembership(recorded: nil, recognised: [:], anyGatewayKnown: true, sights: [.noMarker])
        #expect(membership.basis == .known && !membership.isNew && membership.needsMarker)
    }

    @Test func whenNoGatewayShowsTheRecordedIdTheDestinationIsRefused() {
        let membership = GatewayMembership(
            recorded: x, recognised: [x: "http://x-gw1"], anyGatewayKnown: true, sights: [.marker(z), .noMarker])
        #expect(membership.refusal == .noGatewayShows(x))
        #expect(!membership.needsMarker)
    }

    @Test func whenEveryGatewayThatAnswersHasNoSuchBucketTheBucketIsMissingWhateverTheJournalKnows() {
        let known = GatewayMembership(
            recorded: x, recognised: [x: "http://x-gw1"], anyGatewayKnown: true, sights: [.noBucket, .noAnswer("refused")])
        #expect(known.refusal == .missingBucket)
        let fresh = GatewayMembership(recorded: nil, recognised: [:], anyGatewayKnown: false, sights: [.noBucket])
        #expect(fresh.refusal == .missingBucket && !fresh.needsMarker)
        let elsewhere = GatewayMembership(recorded: nil, recognised: [:], anyGatewayKnown: false, sights: [.noBucket, .noMarker])
        #expect(elsewhere.refusal == nil && elsewhere.verdicts == [.foreign(.noBucket), .belongs])
    }

    @Test func gatewaysThatDoNotAnswerAreLeftToTheirFirstRequestAndDecideNothing() {
        let silent = GatewayMembership(recorded: x, recognised: [:], anyGatewayKnown: true, sights: [.noAnswer("reset")])
        #expect(silent.verdicts == [.unchecked] && silent.refusal == nil && !silent.anyAnswered)
        let oneUp = GatewayMembership(recorded: x, recognised: [:], anyGatewayKnown: true, sights: [.noAnswer("reset"), .marker(x)])
        #expect(oneUp.verdicts == [.unchecked, .belongs] && oneUp.refusal == nil)
    }

    @Test func afterTheMarkerIsWrittenTheOtherGatewaysThatShowedNoneAreCheckedAgain() {
        var membership = GatewayMembership(recorded: nil, recognised: [:], anyGatewayKnown: false, sights: [.noMarker, .noMarker])
        membership.markerWritten(z, through: 0)
        #expect(membership.id == z && membership.verdicts == [.belongs, .unchecked])
    }

    @Test func theDestinationsRecordedIdIsFoundThroughAnyConfiguredGatewayOrItsName() {
        let records = [
            GatewayRecord(url: "http://x-gw1", name: "http://x-gw1", bucketID: "id-of-x"),
            GatewayRecord(url: "http://x-gw2", name: "http://x-gw1", bucketID: nil),
        ]
        let byName = DestinationIdentity.membership(
            of: ["http://y", "http://x-gw2"], records: records, sights: [.noMarker, .marker(x)])
        #expect(byName.basis == .recorded && byName.id == x, "x-gw2 is recorded under x-gw1, whose id it is")
        #expect(byName.verdicts == [.foreign(.noMarker), .belongs])
        let unknownURLs = DestinationIdentity.membership(
            of: ["http://y", "http://localhost-x"], records: records, sights: [.noMarker, .marker(x)])
        #expect(unknownURLs.basis == .recognised(name: "http://x-gw1"))
        #expect(unknownURLs.verdicts == [.foreign(.noMarker), .belongs])
    }
}
