import Foundation
import Testing

@testable import IngestKit

private typealias Machine = UploadStateMachine
private typealias Part = UploadStateMachine.AcknowledgedPart

/// A five-part plan: four parts of 16 MiB (16,777,216 bytes) and a last one of 100 bytes.
private let fileSize: Int64 = 4 * 16_777_216 + 100
private let fingerprint = Fingerprint(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210)
private let otherFingerprint = Fingerprint(high: 1, low: 2)

private func fivePartPlan() throws -> PartPlan {
    let plan = try PartPlan.plan(fileSize: fileSize)
    try #require(!plan.isSinglePut, "\(fileSize) bytes should be a multipart upload")
    return plan
}

private func newMachine(maxRestarts: Int = 3, window: Int = 2) throws -> Machine {
    Machine(
        logicalUploadID: "L1", file: "/var/lib/ingest/staging/ab/cd", fingerprint: fingerprint,
        plan: try fivePartPlan(), configuration: .init(maxRestarts: maxRestarts, partsInFlight: window))
}

/// The snapshot of the action at `index`, which must be a `persist`.
private func persisted(_ actions: [Machine.Action], at index: Int = 0) throws -> Machine.Snapshot {
    guard actions.indices.contains(index), case let .persist(snapshot) = actions[index] else {
        Issue.record("expected persist at \(index) in \(actions)")
        throw CancellationError()
    }
    return snapshot
}

private func part(_ number: Int, _ etag: String) -> Part {
    Part(number: number, etag: etag, size: number == 5 ? 100 : 16_777_216)
}

/// Every part number in the `sendParts` actions.
private func sent(_ actions: [Machine.Action]) -> [Int] {
    actions.flatMap { action -> [Int] in
        if case let .sendParts(_, parts) = action { return parts }
        return []
    }
}

@Suite struct UploadStateMachineTests {
    // MARK: the happy path

    @Test func aWholeUploadStepByStepJournalsEachPartBeforeSendingTheNext() throws {
        var machine = try newMachine(window: 2)
        #expect(machine.phase == .created)

        #expect(machine.start() == [.createUpload])

        var actions = machine.uploadCreated(uploadID: "U1")
        #expect(actions.count == 2)
        var snapshot = try persisted(actions)
        #expect(snapshot.phase == .initiated)
        #expect(snapshot.uploadID == "U1")
        #expect(snapshot.parts.isEmpty)
        #expect(actions[1] == .sendParts(uploadID: "U1", parts: [1, 2]))  // the window is 2

        actions = machine.partAcknowledged(uploadID: "U1", number: 2, etag: "\"e2\"")
        snapshot = try persisted(actions)
        #expect(snapshot.phase == .uploading)
        #expect(snapshot.parts == [part(2, "\"e2\"")])
        #expect(actions[1] == .sendParts(uploadID: "U1", parts: [3]))

        actions = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "\"e1\"")
        #expect(try persisted(actions).parts == [part(1, "\"e1\""), part(2, "\"e2\"")])
        #expect(actions[1] == .sendParts(uploadID: "U1", parts: [4]))

        actions = machine.partAcknowledged(uploadID: "U1", number: 3, etag: "\"e3\"")
        #expect(actions[1] == .sendParts(uploadID: "U1", parts: [5]))

        // Nothing left to send, part 5 still in flight: journal only.
        actions = machine.partAcknowledged(uploadID: "U1", number: 4, etag: "\"e4\"")
        #expect(actions.count == 1)
        #expect(try persisted(actions).parts.count == 4)

        // The last acknowledgement: journal `completing`, then Complete with every part in order.
        actions = machine.partAcknowledged(uploadID: "U1", number: 5, etag: "\"e5\"")
        #expect(actions.count == 2)
        snapshot = try persisted(actions)
        #expect(snapshot.phase == .completing)
        let all = [part(1, "\"e1\""), part(2, "\"e2\""), part(3, "\"e3\""), part(4, "\"e4\""), part(5, "\"e5\"")]
        #expect(snapshot.parts == all)
        #expect(actions[1] == .complete(uploadID: "U1", parts: all))

        actions = machine.completed(etag: "\"abc-5\"")
        #expect(try persisted(actions).phase == .completing, "completed only once verified: a kill now leaves it pending")
        #expect(actions.last == .verify)

        // The owner records the success in one write with the finish: no persist first.
        actions = machine.objectAlreadyExists(size: fileSize, fingerprint: fingerprint)
        #expect(actions == [.finish(.uploaded(etag: "\"abc-5\""))])
        #expect(machine.phase == .completed)
    }

    @Test func partSizesInTheJournalAreThePlannedLengths() throws {
        var machine = try newMachine(window: 5)
        _ = machine.start()
        #expect(sent(machine.uploadCreated(uploadID: "U1")) == [1, 2, 3, 4, 5])
        let actions = machine.partAcknowledged(uploadID: "U1", number: 5, etag: "e5")
        #expect(try persisted(actions).parts == [Part(number: 5, etag: "e5", size: 100)])
    }

    @Test func aCompletedObjectThatIsNotOursFailsVerification() throws {
        var machine = try newMachine(window: 5)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        for n in 1...5 { _ = machine.partAcknowledged(uploadID: "U1", number: n, etag: "e\(n)") }
        _ = machine.completed(etag: "x")
        let actions = machine.objectAlreadyExists(size: fileSize, fingerprint: otherFingerprint)
        guard case .finish(.failed(.verificationFailed(fileSize, fileSize, otherFingerprint))) = actions.last else {
            Issue.record("expected a verification failure, got \(actions)")
            return
        }
        #expect(try persisted(actions).phase == .failed)
    }

    // MARK: a single PUT: one part, the same life

    private func singlePut(_ size: Int64 = 1_000) throws -> Machine {
        let plan = try PartPlan.plan(fileSize: size)
        try #require(plan.isSinglePut && plan.partCount == 1)
        return Machine(logicalUploadID: "L1", file: "/var/lib/ingest/staging/ab/cd", fingerprint: fingerprint, plan: plan)
    }

    @Test func aSinglePutIsSentWithNoJournalWriteBeforeItThenVerified() throws {
        var machine = try singlePut()
        var actions = machine.start()
        #expect(actions == [.putObject], "a conditional write finds a landed object again: nothing to journal first")
        #expect(machine.abortRequested().isEmpty, "the PutObject is on the wire: the object is the user's once it lands")

        actions = machine.objectPut(etag: "\"e\"", digest: "crc32c:AAAAAA==")
        #expect(actions == [.verify])
        #expect(machine.acknowledgedParts == [Part(number: 1, etag: "\"e\"", size: 1_000, digest: "crc32c:AAAAAA==")])
        #expect(machine.objectAlreadyExists(size: 1_000, fingerprint: fingerprint) == [.finish(.uploaded(etag: "\"e\""))])
        #expect(machine.phase == .completed)
    }

    @Test func anEmptyFileIsASinglePutOfNoBytes() throws {
        var machine = try singlePut(0)
        #expect(machine.start().last == .putObject)
        #expect(machine.objectPut(etag: "\"d41d8cd98f00b204e9800998ecf8427e\"") == [.verify])
        #expect(machine.objectAlreadyExists(size: 0, fingerprint: fingerprint).last == .finish(.uploaded(etag: "\"d41d8cd98f00b204e9800998ecf8427e\"")))
    }

    @Test func aSinglePutThatLandsOtherBytesFailsVerification() throws {
        var machine = try singlePut()
        _ = machine.start()
        _ = machine.objectPut(etag: "\"e\"")
        let actions = machine.objectAlreadyExists(size: 1_000, fingerprint: otherFingerprint)
        #expect(actions.last == .finish(.failed(.verificationFailed(expectedSize: 1_000, foundSize: 1_000, foundFingerprint: otherFingerprint))))
    }

    @Test func aSinglePutGivenUpIsJournalledAsItWasAndSentAgainByTheNextRun() throws {
        var machine = try singlePut()
        _ = machine.start()
        let failure = UploadFailure.requestFailed(request: "PutObject", reason: "all 3 attempts failed")
        #expect(machine.putFailed(.fail(.attemptsExhausted(attempts: 3))) == [.finish(.failed(failure))])

        var resumed = try singlePut()
        #expect(resumed.start() == [.putObject])
    }

    @Test func aSinglePutResumedFromAnotherPhaseLooksForTheObjectFirst() throws {
        let snapshot = try singlePut().snapshot
        for phase in [Machine.Phase.completing, .failed, .completed] {
            var journalled = snapshot
            journalled.phase = phase
            var found = Machine(resuming: journalled)
            #expect(found.start() == [.verify])
            #expect(found.objectAlreadyExists(size: 1_000, fingerprint: fingerprint) == [.finish(.alreadyUploaded)])
            var missing = Machine(resuming: journalled)
            _ = missing.start()
            #expect(missing.objectNotFound() == [.putObject])
        }
    }

    // MARK: resume

    @Test func afterAKillWhileUploadingOnlyTheMissingPartsAreSent() throws {
        var first = try newMachine(window: 2)
        _ = first.start()
        _ = first.uploadCreated(uploadID: "U1")
        _ = first.partAcknowledged(uploadID: "U1", number: 1, etag: "\"e1\"")
        let lastJournaled = try persisted(first.partAcknowledged(uploadID: "U1", number: 2, etag: "\"e2\""))
        // kill -9 here: parts 3 and 4 were in flight, and the server got part 3.

        var resumed = Machine(resuming: lastJournaled, configuration: .init(partsInFlight: 2))
        #expect(resumed.phase == .uploading)
        #expect(resumed.start() == [.listParts(uploadID: "U1")])

        let remote: [Int: Machine.RemotePart] = [
            1: .init(etag: "\"e1\"", size: 16_777_216),
            2: .init(etag: "\"e2\"", size: 16_777_216),
            3: .init(etag: "\"e3\"", size: 16_777_216),
        ]
        var actions = resumed.partsListed(remote)
        #expect(try persisted(actions).parts == [part(1, "\"e1\""), part(2, "\"e2\"")])
        // Part 3 was never journaled: resent with the others the server lacks.
        var resent = sent(actions)
        #expect(resent == [3, 4])
        actions = resumed.partAcknowledged(uploadID: "U1", number: 3, etag: "\"e3\"")
        resent += sent(actions)
        actions = resumed.partAcknowledged(uploadID: "U1", number: 4, etag: "\"e4\"")
        actions = resumed.partAcknowledged(uploadID: "U1", number: 5, etag: "\"e5\"")
        #expect(resent == [3, 4, 5])
        #expect(
            actions.last
                == .complete(
                    uploadID: "U1",
                    parts: [part(1, "\"e1\""), part(2, "\"e2\""), part(3, "\"e3\""), part(4, "\"e4\""), part(5, "\"e5\"")]))
    }

    /// A machine resumed in `uploading` with these journal parts, waiting for `ListParts`.
    private func reconciling(journal parts: [Part]) throws -> Machine {
        var snapshot = try newMachine().snapshot
        snapshot.phase = .uploading
        snapshot.uploadID = "U1"
        snapshot.parts = parts
        var machine = Machine(resuming: snapshot, configuration: .init(partsInFlight: 10))
        _ = machine.start()
        return machine
    }

    @Test func aServerPartOfTheWrongSizeIsResent() throws {
        var machine = try reconciling(journal: [part(1, "e1"), part(2, "e2")])
        let actions = machine.partsListed([
            1: .init(etag: "e1", size: 16_777_216),
            2: .init(etag: "e2", size: 5_242_880),  // cut with another part size
        ])
        #expect(try persisted(actions).parts == [part(1, "e1")])
        #expect(sent(actions) == [2, 3, 4, 5])
    }

    @Test func aServerPartWithAnotherETagThanTheJournalsIsResent() throws {
        var machine = try reconciling(journal: [part(1, "\"e1\""), part(2, "\"e2\"")])
        let actions = machine.partsListed([
            1: .init(etag: "e1", size: 16_777_216),  // the same ETag without quotes: kept
            2: .init(etag: "\"other\"", size: 16_777_216),
        ])
        #expect(try persisted(actions).parts == [part(1, "\"e1\"")])
        #expect(sent(actions) == [2, 3, 4, 5])
    }

    @Test func aJournalPartTheServerLacksIsResent() throws {
        var machine = try reconciling(journal: [part(1, "e1"), part(2, "e2")])
        let actions = machine.partsListed([2: .init(etag: "e2", size: 16_777_216)])
        #expect(sent(actions) == [1, 3, 4, 5])
    }

    @Test func whenTheServerHasEveryPartTheResumeCompletesWithoutSending() throws {
        var snapshot = try newMachine().snapshot
        snapshot.phase = .uploading
        snapshot.uploadID = "U1"
        let all = (1...5).map { part($0, "e\($0)") }
        snapshot.parts = all
        var machine = Machine(resuming: snapshot)
        _ = machine.start()
        let remote = Dictionary(uniqueKeysWithValues: all.map { ($0.number, Machine.RemotePart(etag: $0.etag, size: $0.size)) })
        let actions = machine.partsListed(remote)
        #expect(sent(actions).isEmpty)
        #expect(try persisted(actions).phase == .completing)
        #expect(actions.last == .complete(uploadID: "U1", parts: all))
    }

    @Test func aResumeWithoutAnUploadIDCreatesOne() throws {
        let snapshot = try newMachine().snapshot
        var machine = Machine(resuming: snapshot)
        #expect(machine.start() == [.createUpload])
    }

    @Test func aFailedUploadResumesByReconciling() throws {
        var machine = try newMachine()
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1")
        let actions = machine.partFailed(uploadID: "U1", number: 2, decision: .fail(.attemptsExhausted(attempts: 8)))
        let snapshot = try persisted(actions)
        #expect(snapshot.phase == .failed)
        #expect(snapshot.uploadID == "U1")
        #expect(snapshot.parts == [part(1, "e1")])
        guard case .finish(.failed(.requestFailed(let request, let reason))) = actions.last else {
            Issue.record("expected a failed request, got \(actions)")
            return
        }
        #expect(request.contains("part 2"))
        #expect(reason.contains("8 attempts"))
        // A late answer for part 3, still in flight, changes nothing.
        #expect(machine.partAcknowledged(uploadID: "U1", number: 3, etag: "e3") == [])

        var resumed = Machine(resuming: snapshot)
        #expect(resumed.start() == [.listParts(uploadID: "U1")])
    }

    // MARK: NoSuchUpload

    @Test func aLostUploadRestartsUntilTheBoundThenFailsNamingIt() throws {
        var machine = try newMachine(maxRestarts: 2)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1")

        var actions = machine.uploadGone(uploadID: "U1")
        var snapshot = try persisted(actions)
        #expect(snapshot.phase == .created)
        #expect(snapshot.restartCount == 1)
        #expect(snapshot.uploadID == nil)
        #expect(snapshot.parts.isEmpty)
        // The upload may be gone because its object was completed: the key is looked at first.
        #expect(actions.last == .lookAtKey(.beforeWriting))

        // Answers from the lost upload, still arriving, are ignored.
        #expect(machine.uploadGone(uploadID: "U1") == [])
        #expect(machine.partAcknowledged(uploadID: "U1", number: 2, etag: "e2") == [])
        #expect(machine.keyFree() == [.createUpload])

        #expect(sent(machine.uploadCreated(uploadID: "U2")) == [1, 2])  // every part again
        #expect(machine.partAcknowledged(uploadID: "U1", number: 1, etag: "old") == [])
        actions = machine.partFailed(uploadID: "U2", number: 1, decision: .restartUpload)
        #expect(try persisted(actions).restartCount == 2)
        #expect(actions.last == .lookAtKey(.beforeWriting))
        _ = machine.keyFree()

        _ = machine.uploadCreated(uploadID: "U3")
        actions = machine.uploadGone(uploadID: "U3")
        snapshot = try persisted(actions)
        #expect(snapshot.phase == .failed)
        #expect(snapshot.failure == .restartLimitExceeded(maxRestarts: 2))
        #expect(actions.last == .finish(.failed(.restartLimitExceeded(maxRestarts: 2))))
        let message = UploadFailure.restartLimitExceeded(maxRestarts: 2).description
        #expect(message.contains("2 times"))
        #expect(message.contains("upload.max_restarts"))
    }

    @Test func zeroRestartsAllowedFailsOnTheFirstLoss() throws {
        var machine = try newMachine(maxRestarts: 0)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        #expect(machine.uploadGone(uploadID: "U1").last == .finish(.failed(.restartLimitExceeded(maxRestarts: 0))))
        #expect(UploadFailure.restartLimitExceeded(maxRestarts: 0).description.contains("upload.max_restarts allows no"))
    }

    @Test func theRestartCountSurvivesAResume() throws {
        var machine = try newMachine(maxRestarts: 1)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.uploadGone(uploadID: "U1")
        _ = machine.keyFree()
        let snapshot = try persisted(machine.uploadCreated(uploadID: "U2"))
        #expect(snapshot.restartCount == 1)

        var resumed = Machine(resuming: snapshot, configuration: .init(maxRestarts: 1))
        #expect(resumed.start() == [.listParts(uploadID: "U2")])
        #expect(resumed.uploadGone(uploadID: "U2").last == .finish(.failed(.restartLimitExceeded(maxRestarts: 1))))
    }

    @Test func noSuchUploadOnCompleteLooksForTheObjectBeforeStartingOver() throws {
        var machine = try newMachine(window: 5)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        for n in 1...5 { _ = machine.partAcknowledged(uploadID: "U1", number: n, etag: "e\(n)") }
        #expect(machine.completeFailed(.restartUpload) == [.verify])
        let actions = machine.objectNotFound()
        #expect(try persisted(actions).restartCount == 1)
        #expect(actions.last == .createUpload)
    }

    /// A Complete given up after its retries may have reached the server: the journal keeps
    /// `completing`, so the next run looks for the object before listing an upload that may
    /// be gone and sending every part again.
    @Test func aCompleteGivenUpLeavesCompletingSoTheNextRunLooksForTheObjectFirst() throws {
        var machine = try newMachine(window: 5)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        var snapshot: Machine.Snapshot?
        for n in 1...5 {
            let actions = machine.partAcknowledged(uploadID: "U1", number: n, etag: "e\(n)")
            if let persisted = try? persisted(actions), persisted.phase == .completing { snapshot = persisted }
        }
        #expect(snapshot?.phase == .completing)
        let failure = UploadFailure.requestFailed(request: "CompleteMultipartUpload", reason: "all 3 attempts failed")
        #expect(machine.completeFailed(.fail(.attemptsExhausted(attempts: 3))) == [.finish(.failed(failure))])

        var resumed = Machine(resuming: try #require(snapshot), configuration: .init())
        #expect(resumed.start() == [.verify])
    }

    // MARK: the object already exists

    @Test func aKillBetweenCompleteAndTheJournalEndsWithoutSendingAPart() throws {
        var first = try newMachine(window: 5)
        _ = first.start()
        _ = first.uploadCreated(uploadID: "U1")
        for n in 1...4 { _ = first.partAcknowledged(uploadID: "U1", number: n, etag: "e\(n)") }
        let lastJournaled = try persisted(first.partAcknowledged(uploadID: "U1", number: 5, etag: "e5"))
        #expect(lastJournaled.phase == .completing)
        // kill -9 after the server completed the object, before `completed` was journaled.

        var resumed = Machine(resuming: lastJournaled)
        #expect(resumed.start() == [.verify])
        let actions = resumed.objectAlreadyExists(size: fileSize, fingerprint: fingerprint)
        #expect(actions == [.finish(.alreadyUploaded)])
        #expect(resumed.phase == .completed)
    }

    @Test func anotherObjectAtTheKeyOnResumeMeansReconcileAndGoOn() throws {
        var snapshot = try newMachine().snapshot
        snapshot.phase = .completing
        snapshot.uploadID = "U1"
        snapshot.parts = (1...5).map { part($0, "e\($0)") }
        var machine = Machine(resuming: snapshot)
        _ = machine.start()
        #expect(machine.objectAlreadyExists(size: fileSize, fingerprint: otherFingerprint) == [.listParts(uploadID: "U1")])
    }

    @Test func anObjectFoundBeforeStartingIsRecognisedWithoutAnUpload() throws {
        var machine = try newMachine()
        let actions = machine.objectAlreadyExists(size: fileSize, fingerprint: fingerprint)
        #expect(actions.last == .finish(.alreadyUploaded))
        #expect(!actions.contains(.createUpload))
    }

    @Test func anObjectOfAnotherSizeBeforeStartingChangesNothing() throws {
        var machine = try newMachine()
        #expect(machine.objectAlreadyExists(size: fileSize - 1, fingerprint: fingerprint) == [])
        #expect(machine.start() == [.createUpload])
    }

    // MARK: abort

    @Test func abortBeforeAnythingIsOnTheServerSendsNoRequest() throws {
        var machine = try newMachine()
        let actions = machine.abortRequested()
        #expect(try persisted(actions).phase == .aborted)
        #expect(actions.last == .finish(.aborted))
        #expect(!actions.contains { if case .abort = $0 { true } else { false } })
    }

    @Test func abortWhileCreatingAbortsTheUploadWhenItsIDArrives() throws {
        var machine = try newMachine()
        _ = machine.start()
        #expect(machine.abortRequested().last == .finish(.aborted))
        #expect(machine.uploadCreated(uploadID: "U9") == [.abort(uploadID: "U9")])
        #expect(machine.abortConfirmed() == [])
    }

    @Test func abortOfAnInitiatedUploadJournalsAbortingThenAborts() throws {
        var machine = try newMachine()
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        var actions = machine.abortRequested()
        #expect(try persisted(actions).phase == .aborting)
        #expect(actions.last == .abort(uploadID: "U1"))
        actions = machine.abortConfirmed()
        #expect(try persisted(actions).phase == .aborted)
        #expect(actions.last == .finish(.aborted))
    }

    @Test func abortWhileUploadingIgnoresPartsStillInFlight() throws {
        var machine = try newMachine()
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.partAcknowledged(uploadID: "U1", number: 1, etag: "e1")
        #expect(machine.abortRequested().last == .abort(uploadID: "U1"))
        #expect(machine.partAcknowledged(uploadID: "U1", number: 2, etag: "e2") == [])
        #expect(machine.partFailed(uploadID: "U1", number: 3, decision: .restartUpload) == [])
        // NoSuchUpload in answer to the abort confirms it.
        #expect(machine.uploadGone(uploadID: "U1").last == .finish(.aborted))
    }

    @Test func anAbortInterruptedByAKillIsFinishedNotResumedAsAnUpload() throws {
        var machine = try newMachine()
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        let journaled = try persisted(machine.abortRequested())
        var resumed = Machine(resuming: journaled)
        #expect(resumed.start() == [.abort(uploadID: "U1")])
    }

    @Test func abortOfACompletedUploadIsRefusedAsANoOp() throws {
        var machine = try newMachine(window: 5)
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        for n in 1...5 { _ = machine.partAcknowledged(uploadID: "U1", number: n, etag: "e\(n)") }
        #expect(machine.abortRequested() == [])  // Complete on the wire
        _ = machine.completed(etag: "E")
        _ = machine.objectAlreadyExists(size: fileSize, fingerprint: fingerprint)
        #expect(machine.abortRequested() == [])
        #expect(machine.phase == .completed)
    }

    @Test func abortOfAFailedUploadFreesTheServersParts() throws {
        var machine = try newMachine()
        _ = machine.start()
        _ = machine.uploadCreated(uploadID: "U1")
        _ = machine.partFailed(uploadID: "U1", number: 1, decision: .fail(.notRetryable))
        #expect(machine.abortRequested().last == .abort(uploadID: "U1"))
    }

    // MARK: impossible transitions trap

    @Test func startingTwiceIsAProgrammingErrorNamingStateAndEvent() async throws {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            guard let plan = try? PartPlan.plan(fileSize: 100_000_000) else { return }
            var machine = UploadStateMachine(
                logicalUploadID: "L", file: "f", fingerprint: Fingerprint(high: 0, low: 0), plan: plan)
            _ = machine.start()
            _ = machine.start()
        }
        let stderr = String(decoding: try #require(result).standardErrorContent, as: UTF8.self)
        #expect(stderr.contains("event start is impossible in state creating"))
    }

    @Test func acknowledgingAPartNeverSentIsAProgrammingError() async {
        await #expect(processExitsWith: .failure) {
            guard let plan = try? PartPlan.plan(fileSize: 100_000_000) else { return }
            var machine = UploadStateMachine(
                logicalUploadID: "L", file: "f", fingerprint: Fingerprint(high: 0, low: 0), plan: plan,
                configuration: .init(partsInFlight: 1))
            _ = machine.start()
            _ = machine.uploadCreated(uploadID: "U1")
            _ = machine.partAcknowledged(uploadID: "U1", number: 4, etag: "e")
        }
    }

    @Test func reportingARetryDecisionForAPartIsAProgrammingError() async {
        await #expect(processExitsWith: .failure) {
            guard let plan = try? PartPlan.plan(fileSize: 100_000_000) else { return }
            var machine = UploadStateMachine(
                logicalUploadID: "L", file: "f", fingerprint: Fingerprint(high: 0, low: 0), plan: plan)
            _ = machine.start()
            _ = machine.uploadCreated(uploadID: "U1")
            _ = machine.partFailed(uploadID: "U1", number: 1, decision: .retry(after: .seconds(1)))
        }
    }
}
