import Foundation
import Testing

@testable import IngestKit

private typealias Machine = UploadStateMachine

/// Four parts of 16 MiB and a last one of 100 bytes.
private let mebibytes16: Int64 = 16_777_216
private let fileSize: Int64 = 4 * mebibytes16 + 100
private let fingerprint = Fingerprint(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210)

private func plan() throws -> PartPlan { try PartPlan.recorded(fileSize: fileSize, partSize: mebibytes16) }

/// A stream whose upload `U1` is created and journalled, waiting for its first part.
private func begunStream(window: Int = 2) throws -> Machine {
    var machine = Machine(
        streaming: "7", file: "/staging/.partial/7-stream.partial", plan: try plan(),
        configuration: .init(partsInFlight: window))
    #expect(machine.startStreaming() == [.lookAtKey(.beforeStream)])
    #expect(machine.keyFree() == [.createUpload])
    #expect(machine.uploadCreated(uploadID: "U1") == [.beginStream(uploadID: "U1")], "journalled before any part is sent")
    #expect(machine.streamBegun() == [.waitForPart(1)])
    return machine
}

/// The bytes the copy holds once part `number` is written.
private func end(ofPart number: Int) -> Int64 { min(Int64(number) * mebibytes16, fileSize) }

/// The streaming phase of ``UploadStateMachine``, step by step: parts offered as the copy
/// grows, within the window, a part given up, the copy's end, a stop, the claim.
@Suite struct UploadStateMachineStreamingTests {
    @Test func partsGoOutAsTheCopyGrowsWithinTheWindowAndTheCompleteCopyIsHandedToItsClaim() throws {
        var machine = try begunStream(window: 2)
        #expect(machine.staged(upTo: end(ofPart: 1)) == [.streamParts(uploadID: "U1", parts: [1]), .waitForPart(2)])
        #expect(machine.staged(upTo: end(ofPart: 2)) == [.streamParts(uploadID: "U1", parts: [2])], "the window is full")
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1", digest: "c1") == [.waitForPart(3)])
        #expect(machine.staged(upTo: end(ofPart: 3)) == [.streamParts(uploadID: "U1", parts: [3])])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 2, etag: "e2") == [.waitForPart(4)])
        #expect(machine.staged(upTo: end(ofPart: 4)) == [.streamParts(uploadID: "U1", parts: [4])])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 3, etag: "e3") == [.waitForPart(5)])
        #expect(machine.staged(upTo: fileSize) == [.streamParts(uploadID: "U1", parts: [5])])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 4, etag: "e4") == [])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 5, etag: "e5") == [.waitForCopyEnd])
        #expect(machine.copyComplete(fingerprint: fingerprint) == [.awaitClaim])
        #expect(machine.holdsStream)

        let actions = machine.claimed(fingerprint: fingerprint, partSize: mebibytes16)
        guard case let .handOff(uploadID, parts)? = actions.first, actions.count == 1 else {
            Issue.record("expected a hand-off, got \(actions)")
            return
        }
        #expect(uploadID == "U1")
        #expect(parts.map(\.number) == [1, 2, 3, 4, 5])
        #expect(parts[0].digest == "c1", "the stager's CRC32C goes with the part")
        #expect(machine.phase == .uploading, "the normal path goes on from uploading")
    }

    @Test func aCopyThatGrowsByManyPartsAtOnceOffersThemAllWithinTheWindow() throws {
        var machine = try begunStream(window: 3)
        #expect(machine.staged(upTo: end(ofPart: 4)) == [.streamParts(uploadID: "U1", parts: [1, 2, 3])])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 2, etag: "e2") == [.streamParts(uploadID: "U1", parts: [4]), ])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1") == [.waitForPart(5)])
    }

    @Test func aPartGivenUpStopsTheStreamAndWhatWasAcknowledgedIsHandedOn() throws {
        var machine = try begunStream(window: 2)
        _ = machine.staged(upTo: end(ofPart: 1))
        _ = machine.staged(upTo: end(ofPart: 2))
        #expect(machine.partFailed(uploadID: "U1", number: 2, decision: .fail(.attemptsExhausted(attempts: 3))) == [])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1") == [.waitForCopyEnd], "no more parts")
        #expect(machine.copyComplete(fingerprint: fingerprint) == [.awaitClaim])
        guard case let .handOff(_, parts)? = machine.claimed(fingerprint: fingerprint, partSize: mebibytes16).first else {
            Issue.record("the stream's part goes to the claim")
            return
        }
        #expect(parts.map(\.number) == [1], "the upload sends parts 2 to 5 once the file is staged")
    }

    @Test func aCopyThatFailsAbortsTheStreamOnceThePartsOnTheWireAreAnswered() throws {
        var machine = try begunStream(window: 2)
        _ = machine.staged(upTo: end(ofPart: 1))
        #expect(machine.copyFailed() == [], "part 1 is still on the wire")
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1") == [.abort(uploadID: "U1")])
        #expect(machine.abortConfirmed() == [.finish(.aborted)], "no snapshot: the stream's row is its journal")
        #expect(!machine.holdsStream)
    }

    @Test func aStopMidStreamSendsNoMorePartsAndTheCopysEndDecides() throws {
        var machine = try begunStream(window: 2)
        _ = machine.staged(upTo: end(ofPart: 1))
        #expect(machine.stopped() == [], "the stop answers the wait for part 2; part 1 is on the wire")
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1") == [.waitForCopyEnd])
        #expect(machine.copyFailed() == [.abort(uploadID: "U1")], "the stager stopped too: its copy failed")
    }

    @Test func aStopWithTheCopyCompleteStillHandsTheStreamOn() throws {
        var machine = try begunStream(window: 2)
        _ = machine.staged(upTo: end(ofPart: 1))
        _ = machine.stopped()
        _ = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1")
        #expect(machine.copyComplete(fingerprint: fingerprint) == [.awaitClaim])
        #expect(machine.claimed(fingerprint: fingerprint, partSize: mebibytes16).count == 1)
    }

    @Test func anythingAtTheKeyOrARequestGivenUpMeansNoStream() throws {
        var taken = Machine(streaming: "1", file: "f", plan: try plan())
        _ = taken.startStreaming()
        #expect(taken.keyTaken(size: 3, fingerprint: nil) == [.finish(.notStreamed)])

        var ours = Machine(streaming: "2", file: "f", plan: try plan())
        _ = ours.startStreaming()
        #expect(ours.keyOurs() == [.finish(.notStreamed)])

        var unlooked = Machine(streaming: "3", file: "f", plan: try plan())
        _ = unlooked.startStreaming()
        #expect(unlooked.requestFailed(.fail(.notRetryable)) == [.finish(.notStreamed)])

        var uncreated = Machine(streaming: "4", file: "f", plan: try plan())
        _ = uncreated.startStreaming()
        _ = uncreated.keyFree()
        #expect(uncreated.requestFailed(.fail(.attemptsExhausted(attempts: 3))) == [.finish(.notStreamed)])
    }

    @Test func aStreamTheJournalRefusesIsAbortedBeforeAnyPartIsSent() throws {
        var machine = Machine(streaming: "1", file: "f", plan: try plan())
        _ = machine.startStreaming()
        _ = machine.keyFree()
        _ = machine.uploadCreated(uploadID: "U1")
        #expect(machine.ownerFailed() == [.abort(uploadID: "U1")])
        #expect(machine.requestFailed(.fail(.notRetryable)).last?.isFinish == true, "a failed abort leaves it to recovery")
    }

    @Test func aClaimOfOtherContentOrAnotherCutAbortsTheStream() throws {
        for (found, partSize) in [(Fingerprint(high: 9, low: 9), mebibytes16), (fingerprint, 2 * mebibytes16)] {
            var machine = try begunStream(window: 5)
            _ = machine.staged(upTo: fileSize)
            for number in 1...5 { _ = machine.partAcknowledged(uploadID: "U1", number: number, etag: "e\(number)") }
            _ = machine.copyComplete(fingerprint: fingerprint)
            #expect(machine.claimed(fingerprint: found, partSize: partSize) == [.abort(uploadID: "U1")])
        }
    }

    @Test func aStreamHandedOffIsAbortedWhenItsClaimDoesNotAdoptIt() throws {
        var machine = try begunStream(window: 5)
        _ = machine.staged(upTo: fileSize)
        for number in 1...5 { _ = machine.partAcknowledged(uploadID: "U1", number: number, etag: "e\(number)") }
        _ = machine.copyComplete(fingerprint: fingerprint)
        _ = machine.claimed(fingerprint: fingerprint, partSize: mebibytes16)
        #expect(machine.abortRequested() == [.abort(uploadID: "U1")])
        #expect(machine.uploadGone(uploadID: "U1") == [.finish(.aborted)], "NoSuchUpload confirms an abort")
    }

    @Test func aPartAnsweredForAnotherUploadIsStale() throws {
        var machine = try begunStream(window: 2)
        _ = machine.staged(upTo: end(ofPart: 1))
        #expect(machine.partAcknowledged(uploadID: "U0", number: 1, etag: "e1") == [])
    }
}

extension UploadStateMachine.Action {
    fileprivate var isFinish: Bool {
        if case .finish = self { return true }
        return false
    }
}

/// The decisions around an upload that used to be taken outside the machine: the key looked
/// at and found taken (the alternative key, once), ours, or refused; the staged copy gone;
/// a stop.
@Suite struct UploadStateMachineKeyTests {
    private static func machine(conditionalWrites: Bool = true, onAlternativeKey: Bool = false) throws -> Machine {
        Machine(
            logicalUploadID: "L1", file: "/staging/ab/cd", fingerprint: fingerprint, plan: try plan(),
            configuration: .init(partsInFlight: 5, conditionalWrites: conditionalWrites), onAlternativeKey: onAlternativeKey)
    }

    /// A machine whose five parts are acknowledged: the next action is about `Complete`.
    private static func allPartsAcknowledged(_ machine: inout Machine) -> [Machine.Action] {
        _ = machine.keyFree()
        _ = machine.uploadCreated(uploadID: "U1")
        var actions: [Machine.Action] = []
        for number in 1...5 { actions = machine.partAcknowledged(uploadID: "U1", number: number, etag: "e\(number)") }
        return actions
    }

    @Test func aKeyTakenBeforeTheFirstWriteStartsTheUploadAgainAtTheAlternativeKeyLookingThereFirst() throws {
        var machine = try Self.machine()
        #expect(machine.start(.fresh) == [.lookAtKey(.beforeWriting)], "a multipart upload looks before its parts go")
        #expect(
            machine.keyTaken(size: 10, fingerprint: "ff")
                == [.startAgain(.alternative(foundSize: 10, foundFingerprint: "ff"))])
        #expect(machine.startedAgain() == [.lookAtKey(.beforeWriting)])
        #expect(machine.onAlternativeKey)
        #expect(machine.keyFree() == [.createUpload])
    }

    @Test func theAlternativeKeyTakenTooFailsAndReplacesNothing() throws {
        var machine = try Self.machine(onAlternativeKey: true)
        _ = machine.start(.fresh)
        let failure = UploadFailure.keyTakenTwice(foundSize: 10, foundFingerprint: nil)
        #expect(machine.keyTaken(size: 10, fingerprint: nil) == [.finish(.failed(failure))], "no write, no persist")
    }

    @Test func aKeyTakenByOtherBytesGoesToTheAlternativeKeyOnceForAnUploadAndACopyAlike() {
        #expect(
            Machine.afterKeyTaken(onAlternativeKey: false, foundSize: 3, foundFingerprint: "ab")
                == .startAgain(.alternative(foundSize: 3, foundFingerprint: "ab")))
        #expect(
            Machine.afterKeyTaken(onAlternativeKey: true, foundSize: 3, foundFingerprint: nil)
                == .finish(.failed(.keyTakenTwice(foundSize: 3, foundFingerprint: nil))))
    }

    @Test func ourBytesAtTheKeyEndTheUploadWithNothingSent() throws {
        var machine = try Self.machine()
        _ = machine.start(.fresh)
        #expect(machine.keyOurs() == [.finish(.foundAtKey)])
        #expect(machine.phase == .completed)
    }

    @Test func aSinglePutOnAServerThatHonoursIfNoneMatchIsSentWithoutALook() throws {
        var machine = Machine(
            logicalUploadID: "L1", file: "f", fingerprint: fingerprint, plan: try PartPlan.recorded(fileSize: 1_000, partSize: nil))
        #expect(machine.start(.fresh) == [.putObject])
        #expect(machine.writeRefused() == [.lookAtKey(.afterRefusedPut)])
        #expect(machine.keyOurs() == [.finish(.foundAtKey)], "the lost answer of an earlier write")
    }

    @Test func aCompleteRefusedAsTakenDiscardsItsUploadAndLooksAtTheKey() throws {
        var taken = try Self.machine()
        _ = taken.start(.fresh)
        _ = Self.allPartsAcknowledged(&taken)
        #expect(taken.writeRefused() == [.discard(uploadID: "U1"), .lookAtKey(.afterRefusedComplete)])
        #expect(taken.keyTaken(size: 7, fingerprint: "ff") == [.startAgain(.alternative(foundSize: 7, foundFingerprint: "ff"))])

        var free = try Self.machine()
        _ = free.start(.fresh)
        _ = Self.allPartsAcknowledged(&free)
        _ = free.writeRefused()
        #expect(free.keyFree() == [.finish(.failed(.refusedThenFree))], "another writer is at work on the key")
    }

    @Test func onAServerThatIgnoresIfNoneMatchTheKeyIsLookedAtBeforeComplete() throws {
        var machine = try Self.machine(conditionalWrites: false)
        _ = machine.start(.fresh)
        let actions = Self.allPartsAcknowledged(&machine)
        guard case let .persist(snapshot)? = actions.first else {
            Issue.record("completing is journalled first: \(actions)")
            return
        }
        #expect(snapshot.phase == .completing)
        #expect(actions.last == .lookAtKey(.beforeComplete))
        #expect(
            machine.keyTaken(size: 7, fingerprint: nil)
                == [.discard(uploadID: "U1"), .startAgain(.alternative(foundSize: 7, foundFingerprint: nil))])
    }

    @Test func anObjectTheJournalCountedOnThatIsGoneIsSentAgainToTheSameKey() throws {
        var snapshot = try Self.machine().snapshot
        snapshot.phase = .completed
        var machine = Machine(resuming: snapshot, configuration: .init(partsInFlight: 5))
        #expect(machine.start(.confirming) == [.lookAtKey(.confirming)])
        #expect(machine.keyFree() == [.startAgain(.same)])
        #expect(machine.startedAgain() == [.lookAtKey(.beforeWriting)])
        #expect(!machine.onAlternativeKey)
    }

    @Test func aResumedUploadWhoseStagedCopyIsGoneCountsTheObjectIfThereElseSendsItsFilesBackToTheirCard() throws {
        var snapshot = try Self.machine().snapshot
        snapshot.phase = .uploading
        snapshot.uploadID = "U1"
        var gone = Machine(resuming: snapshot)
        #expect(gone.start(.resumed) == [.checkStagedCopy])
        #expect(gone.stagedCopyFailed(.gone) == [.lookAtKey(.stagedCopyGone)])
        #expect(gone.keyFree() == [.restage(.gone, uploadID: "U1")])
        #expect(gone.restaged() == [.finish(.restaged(.gone))])

        var there = Machine(resuming: snapshot)
        _ = there.start(.resumed)
        _ = there.stagedCopyFailed(.gone)
        #expect(there.keyOurs() == [.finish(.foundAtKey)])
    }

    @Test func aStagedCopyThatChangedIsRestagedAndOneUnreadableNowIsKept() throws {
        var changed = try Self.machine()
        _ = changed.start(.resumed)
        let other = Fingerprint(high: 5, low: 6)
        #expect(changed.stagedCopyFailed(.changed(found: other)) == [.restage(.changed(found: other), uploadID: nil)])

        var unreadable = try Self.machine()
        _ = unreadable.start(.resumed)
        #expect(unreadable.stagedCopyFailed(.unreadable) == [.finish(.failed(.stagedCopy(.unreadable)))])
    }

    @Test func aPartRefusedAsNotTheCardsBytesDropsThePartsOnTheWireAndRereadsTheCopy() throws {
        var machine = try Self.machine()
        _ = machine.start(.fresh)
        _ = machine.keyFree()
        _ = machine.uploadCreated(uploadID: "U1")
        #expect(machine.partFailed(uploadID: "U1", number: 2, trouble: .refusedByServer(part: 2)) == [.cancelParts, .checkStagedCopy])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1") == [], "dropped: stale")
        #expect(machine.stagedCopyChecked(nil) == [.finish(.failed(.stagedCopy(.refusedByServer(part: 2))))])
    }

    @Test func aStopLeavesTheUploadAsTheJournalHasIt() throws {
        var machine = try Self.machine()
        _ = machine.start(.fresh)
        _ = machine.keyFree()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1")
        #expect(machine.stopped() == [.finish(.interrupted)], "nothing persisted")
        #expect(machine.phase == .uploading)
        #expect(machine.partAcknowledged(uploadID: "U1", number: 2, etag: "e2") == [], "a late answer is stale")
    }

    @Test func aJournalWriteThatFailsEndsTheUploadWithoutPersisting() throws {
        var machine = try Self.machine()
        _ = machine.start(.fresh)
        _ = machine.keyFree()
        _ = machine.uploadCreated(uploadID: "U1")
        #expect(machine.ownerFailed() == [.finish(.failed(.ownerFailed))])
    }
}
