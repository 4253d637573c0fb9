import Testing

@testable import IngestKit

private typealias Machine = CardRunMachine
private typealias Event = CardRunMachine.Event
private typealias Action = CardRunMachine.Action
private typealias State = CardRunMachine.State

private let labelProblem = IngestError.labels("scene.toml: `name` is not a string")
private let journalFailed = IngestError.journal(JournalError(path: "/var/lib/ingest/journal.sqlite", operation: .write, reason: "disk I/O error"))
private let scanFailed = IngestError.sourceUnavailable(path: "/media/sd", reason: "gone")

/// Tells the machine `event` as the run does and checks what comes back is a list the run can
/// perform: steps come last, one of them, whose end is the next event.
@discardableResult
private func step(_ machine: inout Machine, _ event: Event, sourceLocation: SourceLocation = #_sourceLocation) -> [Action] {
    let actions = machine.handle(event)
    if case .stopRequested = event {
        let steps = actions.filter(\.isStep)
        #expect(steps.isEmpty, "a stop adds actions to the next event's", sourceLocation: sourceLocation)
    } else {
        #expect(actions.last?.isStep == true, "\(actions) ends with a step", sourceLocation: sourceLocation)
        let steps = actions.filter(\.isStep)
        #expect(steps.count == 1, "\(actions) has one step", sourceLocation: sourceLocation)
    }
    return actions
}

/// A run that uploads and streams large files, up to `state` by the usual way there.
private func machine(in state: State, newCard: Bool = false) -> Machine {
    var run = Machine(uploading: true, streaming: true)
    func go(_ events: Event...) { for event in events { step(&run, event) } }
    switch state {
    case .starting: break
    case .waitingForLabels(.toStream): go(.volumeNoted(firstSeen: true))
    case .waitingForLabels(.toPlan): go(.volumeNoted(firstSeen: false), .scanned(filesToStage: true), .uploadsStarted, .pendingQueued(unplanned: false))
    case .startingUploads: go(.volumeNoted(firstSeen: false), .scanned(filesToStage: true))
    case .scanning: newCard ? go(.volumeNoted(firstSeen: true), .labelsRead(problem: nil), .uploadsStarted) : go(.volumeNoted(firstSeen: false))
    case .queueing: go(.volumeNoted(firstSeen: true), .labelsRead(problem: nil), .uploadsStarted, .scanned(filesToStage: true))
    case .copying: go(.volumeNoted(firstSeen: true), .labelsRead(problem: nil), .uploadsStarted, .scanned(filesToStage: true), .pendingQueued(unplanned: false))
    case .streaming: return advanced(machine(in: .copying), .copied)
    case .endingCopy: return advanced(machine(in: .streaming), .streamsEnded)
    case .uploading: return advanced(machine(in: .endingCopy), .copyingNoted)
    case .closing: return advanced(machine(in: .uploading), .uploadsFinished)
    case .judging: return advanced(machine(in: .closing), .synced)
    case .failing: return advanced(machine(in: .scanning, newCard: true), .failed(scanFailed))
    case .done: return advanced(machine(in: .judging), .judged)
    case .stopped: go(.volumeNoted(firstSeen: false), .failed(scanFailed))
    }
    #expect(run.state == state)
    return run
}

private func advanced(_ machine: Machine, _ event: Event) -> Machine {
    var machine = machine
    step(&machine, event)
    return machine
}

/// Every state, once.
private let allStates: [State] = [
    .starting, .waitingForLabels(.toStream), .waitingForLabels(.toPlan), .startingUploads, .scanning, .queueing, .copying,
    .streaming, .endingCopy, .uploading, .closing, .judging, .failing(scanFailed), .done, .stopped,
]

/// An event of each kind.
private func event(_ kind: Event.Kind) -> Event {
    switch kind {
    case .volumeNoted: .volumeNoted(firstSeen: false)
    case .labelsRead: .labelsRead(problem: nil)
    case .uploadsStarted: .uploadsStarted
    case .scanned: .scanned(filesToStage: true)
    case .pendingQueued: .pendingQueued(unplanned: false)
    case .copied: .copied
    case .streamsEnded: .streamsEnded
    case .copyingNoted: .copyingNoted
    case .uploadsFinished: .uploadsFinished
    case .synced: .synced
    case .judged: .judged
    case .failed: .failed(journalFailed)
    case .stopRequested: .stopRequested(.shutdown)
    }
}

@Suite struct CardRunMachineTests {
    // MARK: cards

    @Test func aCardSeenBeforeIsScannedThenItsUploadsStartThenItsLabelsAreReadThenItIsCopied() {
        var machine = Machine(uploading: true, streaming: true)
        #expect(step(&machine, .volumeNoted(firstSeen: false)) == [.scan])
        #expect(!machine.isCopyingEarly)
        #expect(step(&machine, .scanned(filesToStage: true)) == [.startUploads])
        #expect(step(&machine, .uploadsStarted) == [.queuePending])
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.readLabels])
        #expect(machine.state == .waitingForLabels(.toPlan))
        #expect(step(&machine, .labelsRead(problem: nil)) == [.startCopying(forUpload: true, streams: true), .journalCopies])
        #expect(step(&machine, .copied) == [.awaitStreams])
        #expect(machine.state == .streaming)
        #expect(step(&machine, .streamsEnded) == [.noteCopyingEnded])
        #expect(step(&machine, .copyingNoted) == [.finishUploads])
        #expect(step(&machine, .uploadsFinished) == [.sync])
        #expect(step(&machine, .synced) == [.writeHistory, .judge])
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: nil)])
        #expect(machine.state == .done)
    }

    @Test func aNewCardIsCopiedWhileItIsScannedWhenNothingStreams() {
        var machine = Machine(uploading: true, streaming: false)
        #expect(step(&machine, .volumeNoted(firstSeen: true)) == [.startCopying(forUpload: true, streams: false), .scan])
        #expect(machine.isCopyingEarly)
        #expect(step(&machine, .scanned(filesToStage: true)) == [.startUploads])
        #expect(step(&machine, .uploadsStarted) == [.queuePending])
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.readLabels])
        #expect(step(&machine, .labelsRead(problem: nil)) == [.journalCopies], "the copy runs already")
        #expect(step(&machine, .copied) == [.awaitStreams])
    }

    @Test func aNewCardWhoseLargeFilesStreamHasItsLabelsReadAndItsUploadsStartedBeforeItsCopy() {
        var machine = Machine(uploading: true, streaming: true)
        #expect(step(&machine, .volumeNoted(firstSeen: true)) == [.readLabels])
        #expect(machine.state == .waitingForLabels(.toStream))
        #expect(step(&machine, .labelsRead(problem: nil)) == [.startUploads])
        #expect(step(&machine, .uploadsStarted) == [.startCopying(forUpload: true, streams: true), .scan])
        #expect(machine.state == .scanning && machine.isCopyingEarly)
        #expect(step(&machine, .scanned(filesToStage: true)) == [.queuePending], "the uploads started already")
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.journalCopies], "labels known, copy running")
        #expect(step(&machine, .copied) == [.awaitStreams])
        #expect(step(&machine, .streamsEnded) == [.noteCopyingEnded])
        #expect(step(&machine, .copyingNoted) == [.finishUploads])
        #expect(step(&machine, .uploadsFinished) == [.sync])
        #expect(step(&machine, .synced) == [.writeHistory, .judge])
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: nil)])
    }

    @Test func aNewCardWhoseLabelsFailIsCopiedEarlyWithoutStreamsAndTheRunEndsWithTheProblem() {
        var machine = Machine(uploading: true, streaming: true)
        step(&machine, .volumeNoted(firstSeen: true))
        #expect(step(&machine, .labelsRead(problem: labelProblem)) == [.startUploads])
        #expect(step(&machine, .uploadsStarted) == [.startCopying(forUpload: true, streams: false), .scan])
        step(&machine, .scanned(filesToStage: true))
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.journalCopies])
        step(&machine, .copied)
        step(&machine, .streamsEnded)
        step(&machine, .copyingNoted)
        step(&machine, .uploadsFinished)
        step(&machine, .synced)
        #expect(step(&machine, .judged) == [.report(error: labelProblem, stoppedBy: nil)])
        #expect(machine.state == .done, "staged, not stopped")
    }

    @Test func labelsReadEarlyCountOnlyWhenTheCardHasFilesToStage() {
        var machine = Machine(uploading: true, streaming: true)
        step(&machine, .volumeNoted(firstSeen: true))
        step(&machine, .labelsRead(problem: labelProblem))
        step(&machine, .uploadsStarted)
        step(&machine, .scanned(filesToStage: false))
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.abandonCopy, .noteCopyingEnded])
        step(&machine, .copyingNoted)
        step(&machine, .uploadsFinished)
        step(&machine, .synced)
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: nil)])
    }

    @Test func aCardSeenBeforeWithNothingToPlanHasNoLabelsReadAndItsHistoryWritten() {
        var machine = Machine(uploading: true, streaming: true)
        step(&machine, .volumeNoted(firstSeen: false))
        step(&machine, .scanned(filesToStage: false))
        step(&machine, .uploadsStarted)
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.noteCopyingEnded])
        #expect(step(&machine, .copyingNoted) == [.finishUploads])
        step(&machine, .uploadsFinished)
        #expect(step(&machine, .synced) == [.writeHistory, .judge])
    }

    @Test func filesStagedWithoutAnUploadNeedTheLabelsAndArePlannedBeforeTheCopy() {
        var unplannedOnly = machine(in: .queueing)
        var machine = Machine(uploading: true, streaming: true)
        step(&machine, .volumeNoted(firstSeen: false))
        step(&machine, .scanned(filesToStage: false))
        step(&machine, .uploadsStarted)
        #expect(step(&machine, .pendingQueued(unplanned: true)) == [.readLabels])
        #expect(step(&machine, .labelsRead(problem: nil)) == [.queueUnplanned, .noteCopyingEnded])

        #expect(step(&unplannedOnly, .pendingQueued(unplanned: true)) == [.queueUnplanned, .journalCopies])
        var problem = Machine(uploading: true, streaming: true)
        step(&problem, .volumeNoted(firstSeen: false))
        step(&problem, .scanned(filesToStage: false))
        step(&problem, .uploadsStarted)
        step(&problem, .pendingQueued(unplanned: true))
        #expect(step(&problem, .labelsRead(problem: labelProblem)) == [.noteCopyingEnded], "nothing to plan them with")
    }

    @Test func aCardSeenBeforeWhoseLabelsFailIsStagedAsWithoutUploads() {
        var machine = machine(in: .waitingForLabels(.toPlan))
        #expect(step(&machine, .labelsRead(problem: labelProblem)) == [.startCopying(forUpload: false, streams: false), .journalCopies])
    }

    @Test func aRunThatUploadsNothingCopiesANewCardEarlyAndNeverTouchesUploadsOrHistory() {
        var machine = Machine(uploading: false, streaming: true)
        #expect(step(&machine, .volumeNoted(firstSeen: true)) == [.startCopying(forUpload: false, streams: false), .scan])
        #expect(step(&machine, .scanned(filesToStage: true)) == [.journalCopies])
        step(&machine, .copied)
        #expect(step(&machine, .streamsEnded) == [.noteCopyingEnded])
        #expect(step(&machine, .copyingNoted) == [.sync])
        #expect(step(&machine, .synced) == [.judge])
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: nil)])

        var known = Machine(uploading: false, streaming: false)
        step(&known, .volumeNoted(firstSeen: false))
        #expect(step(&known, .scanned(filesToStage: true)) == [.startCopying(forUpload: false, streams: false), .journalCopies])
    }

    // MARK: stops

    @Test(arguments: [IngestStop.Reason.cardRemoved, .shutdown])
    func aStopBeforeTheVolumeIsNotedCopiesNothingEarly(reason: IngestStop.Reason) {
        var machine = Machine(uploading: true, streaming: true)
        #expect(step(&machine, .stopRequested(reason)) == [])
        #expect(step(&machine, .volumeNoted(firstSeen: true)) == [.scan])
        step(&machine, .scanned(filesToStage: true))
        step(&machine, .uploadsStarted)
        step(&machine, .pendingQueued(unplanned: false))
        #expect(step(&machine, .labelsRead(problem: nil)) == [.finishUploads], "no copy, copying not noted as ended")
        #expect(step(&machine, .uploadsFinished) == [.sync])
        #expect(step(&machine, .synced) == [.judge], "no history")
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: reason.rawValue)])
        #expect(machine.state == .stopped)
    }

    @Test func aStopWhileANewCardsLabelsAreReadStartsNeitherCopyNorUploadsBeforeTheScan() {
        var machine = machine(in: .waitingForLabels(.toStream))
        #expect(step(&machine, .stopRequested(.cardRemoved)) == [])
        #expect(step(&machine, .labelsRead(problem: nil)) == [.scan])
        #expect(step(&machine, .scanned(filesToStage: true)) == [.startUploads])
        step(&machine, .uploadsStarted)
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.finishUploads], "labels known: nothing read again")
    }

    @Test func aStopWhileTheUploadsStartBeforeTheScanCopiesNothingEarly() {
        var machine = Machine(uploading: true, streaming: true)
        step(&machine, .volumeNoted(firstSeen: true))
        step(&machine, .labelsRead(problem: nil))
        #expect(step(&machine, .stopRequested(.shutdown)) == [])
        #expect(step(&machine, .uploadsStarted) == [.scan])
        #expect(step(&machine, .scanned(filesToStage: true)) == [.queuePending])
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.finishUploads])
    }

    @Test func aStopAfterTheScanStartsNoCopy() {
        var machine = machine(in: .startingUploads)
        #expect(step(&machine, .stopRequested(.shutdown)) == [])
        step(&machine, .uploadsStarted)
        #expect(step(&machine, .pendingQueued(unplanned: false)) == [.readLabels])
        #expect(step(&machine, .labelsRead(problem: nil)) == [.finishUploads])
    }

    @Test func aStopEndsACopyStartedEarlyAtOnceWhileScanningOrQueueing() {
        var scanning = machine(in: .scanning, newCard: true)
        #expect(step(&scanning, .stopRequested(.cardRemoved)) == [.abandonCopy])
        #expect(!scanning.isCopyingEarly)
        #expect(step(&scanning, .stopRequested(.shutdown)) == [], "ended already")
        #expect(step(&scanning, .scanned(filesToStage: true)) == [.queuePending])
        #expect(step(&scanning, .pendingQueued(unplanned: false)) == [.finishUploads])

        var queueing = machine(in: .queueing)
        #expect(step(&queueing, .stopRequested(.cardRemoved)) == [.abandonCopy])
        #expect(step(&queueing, .pendingQueued(unplanned: false)) == [.finishUploads])

        var planning = Machine(uploading: true, streaming: false)
        step(&planning, .volumeNoted(firstSeen: true))
        step(&planning, .scanned(filesToStage: true))
        step(&planning, .uploadsStarted)
        step(&planning, .pendingQueued(unplanned: false))
        #expect(step(&planning, .stopRequested(.cardRemoved)) == [.abandonCopy])
        #expect(step(&planning, .labelsRead(problem: nil)) == [.finishUploads])
    }

    @Test func aStopWhileCopyingLetsTheCopyEndByItselfAndLeavesItsEndUnnoted() {
        var machine = machine(in: .copying)
        #expect(step(&machine, .stopRequested(.cardRemoved)) == [], "the stager is cancelled by IngestStop")
        #expect(step(&machine, .copied) == [.awaitStreams])
        #expect(step(&machine, .streamsEnded) == [.finishUploads])
        step(&machine, .uploadsFinished)
        #expect(step(&machine, .synced) == [.judge])
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: IngestStop.Reason.cardRemoved.rawValue)])
    }

    @Test func aStopWhileStreamingNotingUploadingClosingOrJudgingOnlySkipsWhatIsLeft() {
        var streaming = machine(in: .streaming)
        #expect(step(&streaming, .stopRequested(.shutdown)) == [])
        #expect(step(&streaming, .streamsEnded) == [.finishUploads])

        var noting = machine(in: .endingCopy)
        #expect(step(&noting, .stopRequested(.shutdown)) == [])
        #expect(step(&noting, .copyingNoted) == [.finishUploads])

        var uploading = machine(in: .uploading)
        #expect(step(&uploading, .stopRequested(.shutdown)) == [])
        #expect(step(&uploading, .uploadsFinished) == [.sync])
        #expect(step(&uploading, .synced) == [.judge])

        var closing = machine(in: .closing)
        #expect(step(&closing, .stopRequested(.shutdown)) == [])
        #expect(step(&closing, .synced) == [.judge])

        var judging = machine(in: .judging)
        #expect(step(&judging, .stopRequested(.cardRemoved)) == [])
        #expect(step(&judging, .judged) == [.report(error: nil, stoppedBy: IngestStop.Reason.cardRemoved.rawValue)])
        #expect(judging.state == .stopped)

        var failing = machine(in: .failing(scanFailed))
        #expect(step(&failing, .stopRequested(.shutdown)) == [])
        #expect(step(&failing, .uploadsFinished) == [.fail(scanFailed)])
    }

    @Test func aLaterStopReasonReplacesTheFirst() {
        var machine = machine(in: .judging)
        step(&machine, .stopRequested(.cardRemoved))
        step(&machine, .stopRequested(.shutdown))
        #expect(step(&machine, .judged) == [.report(error: nil, stoppedBy: IngestStop.Reason.shutdown.rawValue)])
    }

    // MARK: failures

    @Test func aScanThatFailsEndsTheEarlyCopyAndTheRunWithoutASummary() {
        var copying = Machine(uploading: true, streaming: false)
        step(&copying, .volumeNoted(firstSeen: true))
        #expect(step(&copying, .failed(scanFailed)) == [.abandonCopy, .fail(scanFailed)])
        #expect(copying.state == .stopped)

        var streaming = machine(in: .scanning, newCard: true)
        #expect(step(&streaming, .failed(scanFailed)) == [.abandonCopy, .finishUploads], "its uploads started: they end first")
        #expect(streaming.state == .failing(scanFailed))
        #expect(step(&streaming, .uploadsFinished) == [.fail(scanFailed)])
        #expect(streaming.state == .stopped)
    }

    @Test func recoveryThatFailsEndsTheRunWithoutASummary() {
        var machine = machine(in: .startingUploads)
        #expect(step(&machine, .failed(journalFailed)) == [.fail(journalFailed)])
        var early = Machine(uploading: true, streaming: true)
        step(&early, .volumeNoted(firstSeen: true))
        step(&early, .labelsRead(problem: nil))
        #expect(step(&early, .failed(journalFailed)) == [.fail(journalFailed)])
    }

    @Test func aFailureFromThePendingUploadsToTheEndOfCopyingStopsTheRunWhichStillWaitsForItsUploads() {
        var queueing = machine(in: .queueing)
        #expect(step(&queueing, .failed(journalFailed)) == [.abandonCopy, .finishUploads])
        var copying = machine(in: .copying)
        #expect(step(&copying, .failed(journalFailed)) == [.abandonCopy, .finishUploads])
        var streaming = machine(in: .streaming)
        #expect(step(&streaming, .failed(journalFailed)) == [.abandonCopy, .finishUploads])
        var noting = machine(in: .endingCopy)
        #expect(step(&noting, .failed(journalFailed)) == [.finishUploads])
        #expect(step(&noting, .uploadsFinished) == [.sync])
        #expect(step(&noting, .synced) == [.judge], "no history")
        #expect(step(&noting, .judged) == [.report(error: journalFailed, stoppedBy: journalFailed.description)])
        #expect(noting.state == .stopped)

        var offline = Machine(uploading: false, streaming: false)
        step(&offline, .volumeNoted(firstSeen: false))
        step(&offline, .scanned(filesToStage: true))
        #expect(step(&offline, .failed(journalFailed)) == [.abandonCopy, .sync])
    }

    @Test func aFailureOnceTheUploadsEndedIsTheRunsErrorButNotWhatStoppedIt() {
        var closing = machine(in: .closing)
        #expect(step(&closing, .failed(journalFailed)) == [.judge], "no history")
        #expect(step(&closing, .judged) == [.report(error: journalFailed, stoppedBy: nil)])
        #expect(closing.state == .done)

        var judging = machine(in: .judging)
        #expect(step(&judging, .failed(journalFailed)) == [.report(error: journalFailed, stoppedBy: nil)])

        var both = machine(in: .endingCopy)
        let first = IngestError.journal(JournalError(path: "/var/lib/ingest/journal.sqlite", operation: .write, reason: "database or disk is full"))
        step(&both, .failed(first))
        step(&both, .uploadsFinished)
        step(&both, .failed(journalFailed))
        #expect(step(&both, .judged) == [.report(error: first, stoppedBy: first.description)], "the first error counts")
    }

    // MARK: the table

    /// What each state takes, written out: the machine's table must say the same, and every
    /// event it takes must be handled without a trap.
    @Test func eachStateTakesExactlyTheEventsTheRunCanSendThere() {
        let expected: [(State, Set<Event.Kind>)] = [
            (.starting, [.volumeNoted]),
            (.waitingForLabels(.toStream), [.labelsRead]),
            (.waitingForLabels(.toPlan), [.labelsRead]),
            (.startingUploads, [.uploadsStarted, .failed]),
            (.scanning, [.scanned, .failed]),
            (.queueing, [.pendingQueued, .failed]),
            (.copying, [.copied, .failed]),
            (.streaming, [.streamsEnded, .failed]),
            (.endingCopy, [.copyingNoted, .failed]),
            (.uploading, [.uploadsFinished]),
            (.closing, [.synced, .failed]),
            (.judging, [.judged, .failed]),
            (.failing(scanFailed), [.uploadsFinished]),
            (.done, []),
            (.stopped, []),
        ]
        #expect(expected.map(\.0) == allStates)
        for (state, events) in expected {
            #expect(machine(in: state).state == state)
            let terminal = state == .done || state == .stopped
            let takes = events.union(terminal ? [] : [.stopRequested])
            for kind in Event.Kind.allCases {
                #expect(Machine.accepts(kind, in: state) == takes.contains(kind), "\(kind) in \(state)")
                guard takes.contains(kind) else { continue }
                var machine = machine(in: state)
                _ = machine.handle(event(kind))
            }
        }
    }
}

