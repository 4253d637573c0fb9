import IngestTestSupport
import Synchronization
import Testing

@testable import IngestKit

/// A udev event for a card in a USB reader; `qualifies: false` takes away its file system.
func cardEvent(_ kernelName: String, action: String? = "add", qualifies: Bool = true) -> UdevDevice {
    var properties = ["ID_BUS": "usb", "ID_FS_TYPE": "vfat", "ID_FS_UUID": "UUID-\(kernelName)", "ID_FS_LABEL": "CARD"]
    if qualifies { properties["ID_FS_USAGE"] = "filesystem" }
    return UdevDevice(action: action, kernelName: kernelName, node: "/dev/\(kernelName)", properties: properties)
}

/// Card ingests the test ends when it wants: each start is announced, then waits for `finish`.
private final class ScriptedIngests: Sendable {
    struct Start: Sendable {
        let device: UdevDevice
        let stop: IngestStop
    }

    let starts: AsyncStream<Start>
    private let started: AsyncStream<Start>.Continuation
    let reports: AsyncStream<CardReport>
    private let reported: AsyncStream<CardReport>.Continuation
    private let gates = Mutex<[String: CheckedContinuation<Void, Never>]>([:])

    init() {
        (starts, started) = AsyncStream.makeStream()
        (reports, reported) = AsyncStream.makeStream()
    }

    func watcher(maxCards: Int) -> CardWatcher {
        CardWatcher(
            maxCards: maxCards, logger: .init(label: "test"),
            ingest: { [self] device, stop in
                await withCheckedContinuation { gate in
                    gates.withLock { $0[device.kernelName] = gate }
                    started.yield(Start(device: device, stop: stop))
                }
                return CardReport.make(
                    device: device, outcome: IngestOutcome(summary: RunSummary(volume: "CARD")), stop: stop, seconds: 1)
            },
            report: { [reported] in reported.yield($0) })
    }

    func finish(_ name: String) { gates.withLock { $0.removeValue(forKey: name) }?.resume() }
}

extension AsyncStream {
    fileprivate func first() async -> Element? {
        var iterator = makeAsyncIterator()
        return await iterator.next()
    }
}

@Suite struct CardWatcherTests {
    @Test func aCardSeenAtStartAndAgainInAnEventIsIngestedOnce() async throws {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 2)
        await watcher.handle(cardEvent("sdb1", action: nil))
        await watcher.handle(cardEvent("sdb1", action: "change"))
        await watcher.handle(cardEvent("sdb1", action: "add"))
        #expect(await watcher.cards.running == ["sdb1"])
        #expect(await watcher.cards.waiting.isEmpty)
        let start = try #require(await ingests.starts.first())
        #expect(start.device.kernelName == "sdb1")
        ingests.finish("sdb1")
        #expect(await ingests.reports.first()?.outcome == .done)
        #expect(await watcher.cards.running.isEmpty)
        #expect(await watcher.cards.waiting.isEmpty)
    }

    @Test func noMoreThanMaxCardsAreIngestedAtOnceAndTheOthersWaitTheirTurn() async throws {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 1)
        await watcher.handle(cardEvent("sdb1"))
        await watcher.handle(cardEvent("sdc1"))
        #expect(await watcher.cards.running == ["sdb1"])
        #expect(await watcher.cards.waiting == ["sdc1"])
        var starts = ingests.starts.makeAsyncIterator()
        #expect(await starts.next()?.device.kernelName == "sdb1")
        ingests.finish("sdb1")
        #expect(await starts.next()?.device.kernelName == "sdc1")
        #expect(await watcher.cards.running == ["sdc1"])
        ingests.finish("sdc1")
    }

    @Test func somethingThatIsNotACardIsIgnored() async {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 2)
        var disk = cardEvent("sda1")
        disk.properties["ID_BUS"] = "ata"
        await watcher.handle(disk)
        await watcher.handle(cardEvent("sdb1", qualifies: false))
        #expect(await watcher.cards.running.isEmpty)
        #expect(await watcher.cards.waiting.isEmpty)
    }

    @Test func aCardRemovedMidIngestIsToldToStopReadingAndOneRemovedWhileWaitingNeverStarts() async throws {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 1)
        await watcher.handle(cardEvent("sdb1"))
        await watcher.handle(cardEvent("sdc1"))
        let start = try #require(await ingests.starts.first())
        await watcher.handle(cardEvent("sdc1", action: "remove"))
        #expect(await watcher.cards.waiting.isEmpty)
        #expect(start.stop.reason == nil)
        // A loop device whose backing file shrank: a change after which it is no card.
        await watcher.handle(cardEvent("sdb1", action: "change", qualifies: false))
        #expect(start.stop.reason == .cardRemoved)
        ingests.finish("sdb1")
        #expect(await ingests.reports.first()?.outcome == .removed)
        #expect(await watcher.cards.running.isEmpty)
    }

    @Test func aCardInsertedAgainWhileItsStagedFilesFinishUploadingIsIngestedAgain() async throws {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 2)
        var starts = ingests.starts.makeAsyncIterator()
        await watcher.handle(cardEvent("sdb1"))
        let first = try #require(await starts.next())
        await watcher.handle(cardEvent("sdb1", action: "remove"))
        await watcher.handle(cardEvent("sdb1", action: "add"))
        #expect(await watcher.cards.running == ["sdb1"], "the first session still uploads")
        ingests.finish("sdb1")
        let second = try #require(await starts.next())
        #expect(second.device.kernelName == "sdb1")
        #expect(first.stop.reason == .cardRemoved)
        #expect(second.stop.reason == nil, "a fresh ingest")
        ingests.finish("sdb1")
    }

    @Test func shutdownStopsTheRunningCardsDropsTheWaitingOnesAndTakesNoMore() async throws {
        let ingests = ScriptedIngests()
        let watcher = ingests.watcher(maxCards: 1)
        await watcher.handle(cardEvent("sdb1"))
        await watcher.handle(cardEvent("sdc1"))
        let start = try #require(await ingests.starts.first())
        await watcher.shutdown()
        #expect(start.stop.reason == .shutdown)
        #expect(await watcher.cards.waiting.isEmpty)
        await watcher.handle(cardEvent("sdd1"))
        #expect(await watcher.cards.running == ["sdb1"])
        ingests.finish("sdb1")
        #expect(await ingests.reports.first()?.outcome == .stopped)
        #expect(await watcher.cards.running.isEmpty)
        #expect(await watcher.cards.waiting.isEmpty)
    }
}

@Suite struct CardReportTests {
    let device = UdevDevice(
        kernelName: "sdb1", node: "/dev/sdb1", properties: ["ID_FS_LABEL": "DRONE", "ID_FS_UUID": "1B6E-2F0A"])

    func summary(staged: Int, failed: Int = 0, uploaded: Int = 0, interrupted: Int = 0) -> RunSummary {
        var summary = RunSummary(volume: "DRONE")
        summary.staged = staged
        summary.stagedBytes = Int64(staged) * 1000
        summary.failed = failed
        var uploads = UploadTotals()
        uploads.uploaded = uploaded
        uploads.uploadedBytes = Int64(uploaded) * 1000
        uploads.interrupted = interrupted
        summary.uploads = uploads
        return summary
    }

    @Test func aCardIngestedWholeIsDoneAndItsLineSaysWhatAndHowMuch() {
        let report = CardReport.make(device: device, outcome: IngestOutcome(summary: summary(staged: 12, uploaded: 12)), stop: nil, seconds: 3.25)
        #expect(report.outcome == .done)
        #expect(report.line.hasPrefix("card sdb1 (/dev/sdb1, label DRONE, UUID 1B6E-2F0A): done: "))
        #expect(report.line.contains("12 files staged"))
        #expect(report.line.contains("12 uploaded"))
        #expect(report.line.contains("0 failed"))
        #expect(report.line.contains("in 3.2 s") || report.line.contains("in 3.3 s"))
        #expect(!report.line.contains("\n"))
        #expect(report.json["outcome"] == .string("done"))
        #expect(report.json["fs_uuid"] == .string("1B6E-2F0A"))
    }

    @Test func failedFilesMakeItPartial() {
        let report = CardReport.make(device: device, outcome: IngestOutcome(summary: summary(staged: 10, failed: 2)), stop: nil, seconds: 1)
        #expect(report.outcome == .partial)
        #expect(report.line.contains("2 failed"))
    }

    @Test func aStopSaysWhetherTheCardWentOrTheDaemonStopped() {
        let removed = IngestStop()
        removed.cardRemoved()
        #expect(CardReport.make(device: device, outcome: IngestOutcome(summary: summary(staged: 3)), stop: removed, seconds: 1).outcome == .removed)
        let lost = CardReport.make(
            device: device,
            outcome: IngestOutcome(
                summary: summary(staged: 3),
                error: .volumeLost(volume: "DRONE", cause: SystemError(call: "read", errno: .ioError), evidence: "its block device is gone")),
            stop: removed, seconds: 1)
        #expect(lost.outcome == .removed)
        #expect(lost.summary?.staged == 3, "a run that ended with an error still reports its counts")
        let shutdown = IngestStop()
        shutdown.shutdown()
        let stopped = CardReport.make(device: device, outcome: IngestOutcome(summary: summary(staged: 3, interrupted: 4)), stop: shutdown, seconds: 1)
        #expect(stopped.outcome == .stopped)
        #expect(stopped.line.contains("4 uploads pending"))
    }

    @Test func aBusyOrRefusedDeviceIsNamedSo() {
        let busy = CardReport.make(
            device: device, outcome: IngestOutcome(error: .deviceBusy(device: "/dev/sdb1", lockPath: "/x")), stop: nil, seconds: 0)
        #expect(busy.outcome == .busy)
        #expect(busy.line.contains("busy: /dev/sdb1 is being ingested by another ingest process"))
        let refused = CardReport.make(
            device: device, outcome: IngestOutcome(error: .systemDevice(device: "/dev/mmcblk0p2", mountPoint: "/")), stop: nil,
            seconds: 0)
        #expect(refused.outcome == .refused)
        #expect(refused.line.contains("mounted at /"))
    }
}

@Suite struct IngestStopTests {
    func cancelled(_ stager: Stager) -> Bool { stager.isCancelled.load(ordering: .relaxed) }

    let directory = TemporaryDirectory()

    func stager() throws -> Stager {
        Stager(area: try StagingArea(root: directory.path + "/staging"))
    }

    @Test func aRemovedCardStopsEveryStagerOfTheRunIncludingOnesAttachedLater() throws {
        let stop = IngestStop()
        let early = try stager()
        stop.attach(early)
        #expect(!cancelled(early))
        stop.cardRemoved()
        #expect(cancelled(early))
        let late = try stager()
        stop.attach(late)
        #expect(cancelled(late))
        #expect(stop.reason == .cardRemoved)
    }

    @Test func aShutdownOutranksARemovalAndNotTheOtherWayRound() {
        let stop = IngestStop()
        stop.cardRemoved()
        stop.shutdown()
        #expect(stop.reason == .shutdown)
        stop.cardRemoved()
        #expect(stop.reason == .shutdown)
    }
}
