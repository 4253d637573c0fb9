import Glibc
import Testing

@testable import IngestKit

private typealias Machine = CardWatchMachine

/// A machine as `run()` leaves it once the monitor listens.
private func listening(maxCards: Int = 2) -> Machine {
    var machine = Machine(maxCards: maxCards)
    #expect(machine.runStarted() == [.listen])
    #expect(machine.monitorOpened() == [])
    return machine
}

/// What `run()` throws when the monitor's events end without a shutdown.
private let monitorLost = IngestError.udevUnavailable(SystemError(call: "udev_monitor_receive_device", errno: .ioError))

@Suite struct CardWatchMachineTests {
    // MARK: the watcher

    @Test func aShutdownWhileIdleClosesTheMonitorAndStopsOnceItsEventsEnd() {
        var machine = listening()
        #expect(machine.shutdownRequested() == [.announceStop, .closeMonitor])
        #expect(machine.exit == nil, "the monitor's events have not ended yet")
        #expect(machine.eventsEnded() == [.exit(.stopped)])
        #expect(machine.exit == .stopped)
    }

    @Test func aShutdownAskedAgainDoesNothingMore() {
        var machine = listening()
        _ = machine.shutdownRequested()
        #expect(machine.shutdownRequested() == [])
        _ = machine.eventsEnded()
        #expect(machine.shutdownRequested() == [])
        #expect(machine.exit == .stopped)
    }

    @Test func aShutdownBeforeRunStopsAtOnceAndOneWhileTheMonitorOpensClosesIt() {
        var early = Machine(maxCards: 2)
        #expect(early.shutdownRequested() == [.announceStop, .exit(.stopped)])
        #expect(early.runStarted() == [.exit(.stopped)], "run returns at once")

        var opening = Machine(maxCards: 2)
        #expect(opening.runStarted() == [.listen])
        #expect(opening.shutdownRequested() == [.announceStop])
        #expect(opening.monitorOpened() == [.closeMonitor])
        #expect(opening.exit == nil)
        #expect(opening.eventsEnded() == [.exit(.stopped)])
    }

    @Test func theMonitorsEventsEndingUnaskedStopsTheRunningCardsAndEndsInFailure() {
        var machine = listening()
        let sdb1 = cardEvent("sdb1")
        #expect(machine.deviceEvent(sdb1) == [.startIngest(sdb1)])
        #expect(machine.eventsEnded() == [.announceStop, .stopIngest(card: "sdb1")])
        #expect(machine.exit == nil, "sdb1 has not ended yet")
        #expect(machine.deviceEvent(cardEvent("sdc1")) == [], "no new card")
        #expect(machine.ingestEnded("sdb1", outcome: .stopped) == [.exit(.failed(monitorLost))])
    }

    @Test func aMonitorThatCannotOpenEndsTheRunWithItsError() {
        var machine = Machine(maxCards: 2)
        _ = machine.runStarted()
        let error = IngestError.udevUnavailable(SystemError(call: "access", errno: .noSuchFileOrDirectory, path: "/run/udev/control"))
        #expect(machine.monitorFailed(error) == [.exit(.failed(error))])
    }

    // MARK: taking cards

    @Test func aCardIsIngestedOnceHoweverOftenItIsSeenWhileWaitingOrIngested() {
        var machine = listening(maxCards: 1)
        let present = cardEvent("sdb1", action: nil)
        #expect(machine.deviceEvent(present) == [.startIngest(present)])
        #expect(machine.deviceEvent(cardEvent("sdb1", action: "change")) == [])
        #expect(machine.deviceEvent(cardEvent("sdb1", action: "add")) == [])
        #expect(machine.card("sdb1") == .ingesting(present))
        let sdc1 = cardEvent("sdc1")
        #expect(machine.deviceEvent(sdc1) == [])
        #expect(machine.deviceEvent(cardEvent("sdc1", action: "change")) == [])
        #expect(machine.card("sdc1") == .waiting(sdc1), "the first event is the one ingested")
        #expect(machine.ingestEnded("sdb1", outcome: .done) == [.startIngest(sdc1)])
        #expect(machine.card("sdb1") == nil)
        #expect(machine.ingestEnded("sdc1", outcome: .done) == [])
        #expect(machine.running.isEmpty)
        #expect(machine.waiting.isEmpty)
    }

    @Test func atMostMaxCardsAreIngestedAndTheOthersWaitFirstComeFirstServed() {
        var machine = listening(maxCards: 2)
        let (sdb1, sdc1, sdd1, sde1) = (cardEvent("sdb1"), cardEvent("sdc1"), cardEvent("sdd1"), cardEvent("sde1"))
        #expect(machine.deviceEvent(sdb1) == [.startIngest(sdb1)])
        #expect(machine.deviceEvent(sdc1) == [.startIngest(sdc1)])
        #expect(machine.deviceEvent(sde1) == [])
        #expect(machine.deviceEvent(sdd1) == [])
        #expect(machine.running == ["sdb1", "sdc1"])
        #expect(machine.waiting == ["sde1", "sdd1"])
        #expect(machine.ingestEnded("sdc1", outcome: .partial) == [.startIngest(sde1)])
        #expect(machine.ingestEnded("sdb1", outcome: .failed) == [.startIngest(sdd1)])
        #expect(machine.waiting.isEmpty)
        #expect(Machine(maxCards: 0).maxCards == 1, "a bound below 1 would take no card")
    }

    @Test func whatIsNoCardIsIgnored() {
        var machine = listening()
        var disk = cardEvent("sda1")
        disk.properties["ID_BUS"] = "ata"
        var nodeless = cardEvent("sdb1")
        nodeless.node = nil
        let ignored = [
            disk, nodeless, cardEvent(""), cardEvent("sdc1", qualifies: false), cardEvent("sdd1", action: "remove"),
        ]
        for device in ignored {
            #expect(machine.deviceEvent(device) == [], "\(device)")
        }
        #expect(machine.running.isEmpty)
        #expect(machine.waiting.isEmpty)
    }

    // MARK: removal

    @Test func aCardRemovedWhileWaitingIsDroppedAndNeverStarts() {
        var machine = listening(maxCards: 1)
        _ = machine.deviceEvent(cardEvent("sdb1"))
        _ = machine.deviceEvent(cardEvent("sdc1"))
        #expect(machine.deviceEvent(cardEvent("sdc1", action: "remove")) == [])
        #expect(machine.waiting.isEmpty)
        #expect(machine.card("sdc1") == nil)
        #expect(machine.ingestEnded("sdb1", outcome: .done) == [], "nothing left to start")
    }

    @Test func aCardRemovedMidIngestStopsReadingOnceWhileItsStagedFilesUpload() {
        var machine = listening()
        let sdb1 = cardEvent("sdb1")
        _ = machine.deviceEvent(sdb1)
        // A loop device whose backing file shrank: a change after which it is no card.
        let shrunk = cardEvent("sdb1", action: "change", qualifies: false)
        #expect(machine.deviceEvent(shrunk) == [.stopReading(card: "sdb1")])
        #expect(machine.deviceEvent(cardEvent("sdb1", action: "remove")) == [], "told once")
        #expect(machine.card("sdb1") == .removed(sdb1, again: nil))
        #expect(machine.running == ["sdb1"], "its staged files still upload")
        #expect(machine.ingestEnded("sdb1", outcome: .removed) == [])
        #expect(machine.card("sdb1") == nil)
    }

    @Test func aCardInsertedAgainWhileItsStagedFilesUploadIsIngestedAnewAsTheLastEventSawIt() {
        var machine = listening()
        _ = machine.deviceEvent(cardEvent("sdb1"))
        _ = machine.deviceEvent(cardEvent("sdb1", action: "remove"))
        let back = cardEvent("sdb1", action: "add")
        let changed = cardEvent("sdb1", action: "change")
        #expect(machine.deviceEvent(back) == [])
        #expect(machine.deviceEvent(changed) == [])
        #expect(machine.running == ["sdb1"], "one ingest of a card at a time")
        #expect(machine.ingestEnded("sdb1", outcome: .removed) == [.startIngest(changed)])
        #expect(machine.card("sdb1") == .ingesting(changed))
    }

    @Test func aCardInsertedAgainThenRemovedAgainBeforeTheFirstIngestEndsIsNotIngestedAgain() {
        var machine = listening()
        _ = machine.deviceEvent(cardEvent("sdb1"))
        _ = machine.deviceEvent(cardEvent("sdb1", action: "remove"))
        _ = machine.deviceEvent(cardEvent("sdb1", action: "add"))
        #expect(machine.deviceEvent(cardEvent("sdb1", action: "remove")) == [])
        #expect(machine.ingestEnded("sdb1", outcome: .removed) == [])
        #expect(machine.running.isEmpty)
    }

    // MARK: a card found busy

    @Test func aCardFoundBusyWhileAnotherRunsIsLookedUpAgainWhenTheNextEndsAndTakenIfStillACard() {
        var machine = listening()
        let (sdb1, sdc1) = (cardEvent("sdb1"), cardEvent("sdc1"))
        _ = machine.deviceEvent(sdb1)
        _ = machine.deviceEvent(sdc1)
        #expect(machine.ingestEnded("sdc1", outcome: .busy) == [])
        #expect(machine.card("sdc1") == .parked(sdc1))
        #expect(machine.running == ["sdb1"])
        #expect(machine.ingestEnded("sdb1", outcome: .done) == [.recheck(sdc1)])
        #expect(machine.card("sdc1") == .rechecking)
        let now = cardEvent("sdc1", action: nil)
        #expect(machine.rechecked("sdc1", now: now) == [.startIngest(now)])
    }

    @Test func aParkedCardIsLookedUpAfterTheNextCardEndsNotAfterItsOwnEnd() {
        var machine = listening(maxCards: 3)
        let (sdb1, sdc1, sdd1) = (cardEvent("sdb1"), cardEvent("sdc1"), cardEvent("sdd1"))
        for card in [sdb1, sdc1, sdd1] { _ = machine.deviceEvent(card) }
        #expect(machine.ingestEnded("sdc1", outcome: .busy) == [])
        #expect(machine.ingestEnded("sdd1", outcome: .busy) == [.recheck(sdc1)])
        #expect(machine.card("sdd1") == .parked(sdd1))
        #expect(machine.ingestEnded("sdb1", outcome: .done) == [.recheck(sdd1)])
    }

    @Test func aParkedCardThatIsGoneNoCardOrAnotherDeviceNowIsDropped() {
        let answers = [nil, cardEvent("sdd1", action: nil), cardEvent("sdc1", action: nil, qualifies: false)]
        for answer in answers {
            var machine = listening()
            _ = machine.deviceEvent(cardEvent("sdb1"))
            _ = machine.deviceEvent(cardEvent("sdc1"))
            _ = machine.ingestEnded("sdc1", outcome: .busy)
            _ = machine.ingestEnded("sdb1", outcome: .done)
            #expect(machine.rechecked("sdc1", now: answer) == [], "\(String(describing: answer))")
            #expect(machine.card("sdc1") == nil)
            #expect(machine.card("sdd1") == nil)
        }
    }

    @Test func aCardFoundBusyWithNothingElseRunningIsLeftToTheOtherProcess() {
        var machine = listening()
        _ = machine.deviceEvent(cardEvent("sdb1"))
        #expect(machine.ingestEnded("sdb1", outcome: .busy) == [])
        #expect(machine.card("sdb1") == nil)
    }

    @Test func aCardFoundBusyAfterItWasInsertedAgainIsIngestedAgainAtOnce() {
        var machine = listening()
        _ = machine.deviceEvent(cardEvent("sdb1"))
        _ = machine.deviceEvent(cardEvent("sdc1"))
        _ = machine.deviceEvent(cardEvent("sdc1", action: "remove"))
        let back = cardEvent("sdc1", action: "add")
        _ = machine.deviceEvent(back)
        #expect(machine.ingestEnded("sdc1", outcome: .busy) == [.startIngest(back)])
    }

    @Test func anEventForAParkedOrRecheckedCardDecidesAndTheLateLookUpIsIgnored() {
        var machine = listening(maxCards: 3)
        for name in ["sdb1", "sdc1", "sdd1"] { _ = machine.deviceEvent(cardEvent(name)) }
        _ = machine.ingestEnded("sdc1", outcome: .busy)
        let back = cardEvent("sdc1", action: "change")
        #expect(machine.deviceEvent(back) == [.startIngest(back)], "parked, then seen again: taken")
        _ = machine.ingestEnded("sdc1", outcome: .busy)
        _ = machine.ingestEnded("sdd1", outcome: .done)
        #expect(machine.card("sdc1") == .rechecking)
        #expect(machine.deviceEvent(cardEvent("sdc1", action: "remove")) == [])
        #expect(machine.card("sdc1") == nil)
        let stale = cardEvent("sdc1", action: nil)
        #expect(machine.rechecked("sdc1", now: stale) == [], "the look-up predates the removal")
        #expect(machine.running == ["sdb1"])
    }

    // MARK: shutdown

    @Test func aShutdownWhileIngestingStopsTheRunningCardsDropsTheOthersAndStopsWhenTheLastEnds() {
        var machine = listening(maxCards: 2)
        let sdd1 = cardEvent("sdd1")
        for card in [cardEvent("sdb1"), cardEvent("sdc1"), sdd1] { _ = machine.deviceEvent(card) }
        #expect(machine.ingestEnded("sdc1", outcome: .busy) == [.startIngest(sdd1)])
        #expect(machine.card("sdc1") == .parked(cardEvent("sdc1")))
        _ = machine.deviceEvent(cardEvent("sde1"))
        #expect(machine.waiting == ["sde1"])
        #expect(machine.deviceEvent(cardEvent("sdd1", action: "remove")) == [.stopReading(card: "sdd1")])

        #expect(
            machine.shutdownRequested() == [
                .announceStop, .stopIngest(card: "sdb1"), .stopIngest(card: "sdd1"), .closeMonitor,
            ])
        #expect(machine.waiting.isEmpty)
        #expect(machine.card("sdc1") == nil, "a parked card is no longer looked for")
        #expect(machine.card("sde1") == nil)
        #expect(machine.deviceEvent(cardEvent("sdf1")) == [], "no new card")
        #expect(machine.deviceEvent(cardEvent("sdb1", action: "remove")) == [], "stopping already")
        #expect(machine.ingestEnded("sdb1", outcome: .busy) == [])
        #expect(machine.card("sdb1") == nil)
        #expect(machine.eventsEnded() == [], "sdd1 still stops")
        #expect(machine.ingestEnded("sdd1", outcome: .stopped) == [.exit(.stopped)])
    }

    @Test func aLookUpAnsweredAfterAShutdownIsIgnored() {
        var machine = listening()
        _ = machine.deviceEvent(cardEvent("sdb1"))
        _ = machine.deviceEvent(cardEvent("sdc1"))
        _ = machine.ingestEnded("sdc1", outcome: .busy)
        #expect(machine.ingestEnded("sdb1", outcome: .done) == [.recheck(cardEvent("sdc1"))])
        #expect(machine.shutdownRequested() == [.announceStop, .closeMonitor])
        #expect(machine.rechecked("sdc1", now: cardEvent("sdc1", action: nil)) == [])
        #expect(machine.eventsEnded() == [.exit(.stopped)])
        #expect(machine.rechecked("sdc1", now: cardEvent("sdc1", action: nil)) == [], "nor after the end")
    }

    // MARK: impossible transitions trap

    @Test func anIngestEndingThatNeverStartedIsAProgrammingErrorNamingEventAndState() async throws {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            var machine = CardWatchMachine(maxCards: 1)
            _ = machine.deviceEvent(cardEvent("sdb1"))
            _ = machine.ingestEnded("sdc1", outcome: .done)
        }
        let stderr = String(decoding: try #require(result).standardErrorContent, as: UTF8.self)
        #expect(
            stderr.contains(
                "event ingestEnded(sdc1) is impossible in state watching, monitor notOpened, cards [sdb1: ingesting]"),
            "\(stderr)")
    }

    @Test func runningTwiceIsAProgrammingError() async {
        await #expect(processExitsWith: .failure) {
            var machine = CardWatchMachine(maxCards: 1)
            _ = machine.runStarted()
            _ = machine.runStarted()
        }
    }
}
