import Testing

@testable import IngestKit

/// The life of one run of uploads, without threads: what is queued, what starts after a stop,
/// what the totals say and which failure decides the run's status.
@Suite struct UploadRunMachineTests {
    static let destinationDown = UploadError(exitStatus: .unavailable, scope: .destination, message: "cannot reach the endpoint")
    static let otherDestinationProblem = UploadError(exitStatus: .noPermission, scope: .destination, message: "refused")
    static let oneObject = UploadError(exitStatus: .partial, scope: .object, message: "one object failed")
    static let integrity = UploadError(exitStatus: .integrity, scope: .object, message: "did not verify")

    @Test func anUploadIsQueuedOnceHoweverManyFilesCarryItsContent() {
        var machine = UploadRunMachine()
        let queued = machine.submit("a")
        #expect(queued)
        let queuedAgain = machine.submit("a")
        #expect(!queuedAgain)
        let otherQueued = machine.submit("b")
        #expect(otherQueued)
    }

    @Test func aRunThatSendsEverythingCountsItsObjectsAndBytes() {
        var machine = UploadRunMachine()
        _ = machine.submit("a")
        _ = machine.submit("b")
        let firstRuns = machine.start()
        #expect(firstRuns)
        let secondRuns = machine.start()
        #expect(secondRuns)
        machine.ended(.uploaded(alreadyThere: false, bytes: 1000))
        machine.ended(.uploaded(alreadyThere: true, bytes: 500))
        machine.removedStagedCopies(2)
        machine.drain()
        let (totals, problem) = machine.finish()
        #expect(totals.uploaded == 1)
        #expect(totals.uploadedBytes == 1000)
        #expect(totals.alreadyThere == 1)
        #expect(totals.stagedCopiesRemoved == 2)
        #expect(problem == nil)
        #expect(machine.phase == .finished)
    }

    @Test func afterAStopNoQueuedUploadStartsAndEachCountsAsInterrupted() {
        var machine = UploadRunMachine()
        let runsBeforeTheStop = machine.start()
        #expect(runsBeforeTheStop)
        machine.stop()
        let runsAfterTheStop = machine.start()
        #expect(!runsAfterTheStop)
        let nextRunsAfterTheStop = machine.start()
        #expect(!nextRunsAfterTheStop)
        machine.ended(.interrupted)
        machine.drain()
        #expect(machine.phase == .draining(stopped: true))
        let (totals, _) = machine.finish()
        #expect(totals.interrupted == 3, "two never started, one stopped between parts")
    }

    @Test func aStopWhileDrainingStillHoldsBackWhatIsQueued() {
        var machine = UploadRunMachine()
        machine.drain()
        #expect(machine.phase == .draining(stopped: false))
        machine.stop()
        #expect(machine.phase == .draining(stopped: true))
        let runsWhileDrainingStopped = machine.start()
        #expect(!runsWhileDrainingStopped)
        _ = machine.finish()
        machine.stop()
        #expect(machine.phase == .finished, "a shutdown reaching a finished run changes nothing")
    }

    @Test func theFirstDestinationFailureDecidesTheStatusOverAnyObjectFailure() {
        var machine = UploadRunMachine()
        for _ in 0..<4 { _ = machine.start() }
        machine.ended(.failed(Self.oneObject, started: true))
        machine.ended(.failed(Self.destinationDown, started: true))
        machine.ended(.failed(Self.otherDestinationProblem, started: false))
        machine.ended(.failed(Self.integrity, started: true))
        machine.drain()
        let (totals, problem) = machine.finish()
        #expect(problem == Self.destinationDown)
        #expect(totals.failed == 3)
        #expect(totals.notAttempted == 1)
    }

    @Test func anIntegrityFailureOutranksOtherFailuresOfSingleObjects() {
        var machine = UploadRunMachine()
        for _ in 0..<3 { _ = machine.start() }
        machine.ended(.failed(Self.oneObject, started: true))
        machine.ended(.failed(Self.integrity, started: true))
        machine.ended(.failed(Self.oneObject, started: true))
        machine.drain()
        #expect(machine.finish().1 == Self.integrity)
    }

    @Test func uploadsLeftToAnotherProcessOrAbortedCountForNothing() {
        var machine = UploadRunMachine()
        _ = machine.start()
        _ = machine.start()
        machine.ended(.leftAlone)
        machine.ended(.aborted)
        machine.drain()
        let (totals, problem) = machine.finish()
        #expect(totals == UploadTotals())
        #expect(problem == nil)
    }
}
