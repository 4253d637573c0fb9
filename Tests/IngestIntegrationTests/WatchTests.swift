import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `ingest watch` on a real udevd: loop devices made to look like cards in a USB reader by
/// the test-only rule (``TestCardRule``), ingested into SeaweedFS.
@Suite(.serialized, needsRoot)
final class WatchTests {
    let destination: CardDestination

    init() throws { destination = try CardDestination() }

    /// Starts `ingest watch` and waits until it listens.
    func startWatch(state: TemporaryDirectory) throws -> ChildProcess {
        let watch = try IngestRun.start(
            ["watch", "--state-dir", state.path, "--json", "--max-cards", "2"] + destination.arguments,
            environment: destination.environment)
        try waitFor("that it watches", in: watch) { $0.stderr.contains("watching for cards") }
        return watch
    }

    /// SIGTERM, and what the daemon did until it exited.
    func stopWatch(_ watch: ChildProcess) throws -> IngestRun {
        kill(watch.pid, SIGTERM)
        return IngestRun(result: try watch.wait(timeout: 120))
    }

    func status(_ state: TemporaryDirectory) throws -> [String: Any] {
        try #require(try IngestRun.ingest(["status", "--state-dir", state.path, "--json"]).events("status").first)
    }

    /// The journal holds `files` files uploaded and nothing pending.
    func expectEverythingUploaded(
        _ state: TemporaryDirectory, files: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let journal = try status(state)
        #expect(journal.int("files_uploaded") == files, sourceLocation: sourceLocation)
        #expect(journal.int("files_pending") == 0, sourceLocation: sourceLocation)
        #expect(journal.int("uploads_pending") == 0, sourceLocation: sourceLocation)
    }

    /// The events printed before and after the `card` event of the `index`-th card to end.
    func split(_ run: IngestRun, atCard index: Int) -> (before: [[String: Any]], after: [[String: Any]]) {
        let events = run.events
        var seen = 0
        for (position, event) in events.enumerated() where event.string("event") == "card" {
            if seen == index { return (Array(events[...position]), Array(events[(position + 1)...])) }
            seen += 1
        }
        return (events, [])
    }

    @Test(.timeLimit(.minutes(5)))
    func aCardAttachedWhileWatchRunsLandsWithItsIdentityAndWatchStopsCleanlyOnSIGTERM() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            let (card, oracle) = try pulledOutCard(
                sizeMiB: 64, label: "WATCHED", imageName: TestCardRule.imageName("watched"), small: 12)
            let state = TemporaryDirectory()
            let watch = try startWatch(state: state)

            try card.insert()
            let name = card.kernelName
            let ended = try waitFor("the card's end", in: watch) { $0.events("card").contains { $0.string("card") == name } }

            let report = try #require(ended.events("card").first { $0.string("card") == name })
            #expect(report.string("outcome") == "done", "\(ended.stderr)")
            #expect(report.string("fs_uuid") == card.uuid)
            #expect(report.int("uploaded") == oracle.count)
            #expect(ended.events("uploaded").allSatisfy { $0.string("card") == name }, "every event names its card")
            #expect(try destination.keys().count == oracle.count)
            try destination.expectObjects(from: oracle, tagged: ["fs-uuid": card.uuid, "fs-label": "WATCHED"])
            #expect(try !mountPoints().contains("/run/ingest/cards/\(name)"), "unmounted after its ingest")

            let stopped = try stopWatch(watch)
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(stopped.stderr.contains(
                "card \(name) (\(card.device), label WATCHED, UUID \(card.uuid)): done: \(oracle.count) files staged"))
            try expectEverythingUploaded(state, files: oracle.count)
        }
    }

    @Test(.timeLimit(.minutes(10)))
    func aCardDetachedMidIngestLeavesTheJournalConsistentAndIsFinishedWhenAttachedAgainWithoutReuploading() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            let (card, oracle) = try pulledOutCard(
                sizeMiB: 900, label: "PULLED", imageName: TestCardRule.imageName("pulled"), small: 200, big: 4, bigMiB: 150, after: 100)
            let pristine = card.directory.path + "/pristine.copy"
            try sh("cp --sparse=always \(card.image) \(pristine); sync; echo 3 > /proc/sys/vm/drop_caches")
            let state = TemporaryDirectory()
            let watch = try startWatch(state: state)

            try card.insert()
            let first = card.kernelName
            let before = try waitFor("the card's first upload", in: watch) {
                $0.events("uploaded").contains { $0.string("card") == first }
            }
            kill(watch.pid, SIGSTOP)
            try #require(before.events("staged").count < oracle.count, "the card is pulled while it is still being read")
            // Pulled: the device shrinks to nothing, reads fail and udev sees the file system go.
            try sh("truncate -s 0 \(card.image) && losetup -c \(card.device) && sync && echo 3 > /proc/sys/vm/drop_caches")
            kill(watch.pid, SIGCONT)
            let pulled = try waitFor("the pulled card's end", in: watch) { !$0.events("card").isEmpty }

            let firstEvents = split(pulled, atCard: 0).before
            let report = try #require(firstEvents.last)
            #expect(report.string("outcome") == "removed", "\(pulled.stderr)")
            let staged = Set(firstEvents.filter { $0.string("event") == "staged" }.compactMap { $0.string("path") })
            let uploaded = Set(firstEvents.filter { $0.string("event") == "uploaded" }.compactMap { $0.string("path") })
            #expect(!staged.isEmpty)
            #expect(uploaded == staged, "what was staged before the pull was uploaded")
            let journal = try status(state)
            #expect(journal.int("files_uploaded") == staged.count, "the journal agrees with what was reported")
            #expect(journal.int("uploads_pending") == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.partial").isEmpty)
            #expect(try !mountPoints().contains("/run/ingest/cards/\(first)"), "a pulled card is unmounted")

            // Attached again, whole: the rest of the card lands, nothing twice.
            try card.detach()
            try sh("cp --sparse=always \(pristine) \(card.image)")
            try card.insert()
            let again = try waitFor("the second card's end", in: watch) { $0.events("card").count == 2 }
            let secondEvents = split(again, atCard: 0).after
            let second = try #require(secondEvents.last)
            #expect(second.string("outcome") == "done", "\(again.stderr)")
            #expect(second.int("known") == staged.count, "what was staged is not read again")
            let rest = Set(secondEvents.filter { $0.string("event") == "uploaded" }.compactMap { $0.string("path") })
            #expect(rest.isDisjoint(with: uploaded), "nothing uploaded twice")
            #expect(rest.count + uploaded.count == oracle.count)
            #expect(try destination.keys().count == oracle.count)

            let stopped = try stopWatch(watch)
            #expect(stopped.status == 0, "\(stopped.stderr)")
            try expectEverythingUploaded(state, files: oracle.count)
        }
    }

    @Test(.timeLimit(.minutes(8)))
    func sigtermMidUploadJournalsThePartsOnTheWireUnmountsAndExitsZeroAndResumeFinishes() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            let (card, oracle) = try pulledOutCard(
                sizeMiB: 300, label: "STOPPED", imageName: TestCardRule.imageName("stopped"), small: 2, big: 3, bigMiB: 60)
            let state = TemporaryDirectory()
            let watch = try startWatch(state: state)

            try card.insert()
            let name = card.kernelName
            try waitFor("a part uploaded", in: watch) { !$0.events("part_uploaded").isEmpty }
            let stopped = try stopWatch(watch)

            #expect(stopped.status == 0, "\(stopped.stderr)")
            let report = try #require(stopped.events("card").first)
            #expect(report.string("outcome") == "stopped")
            #expect(stopped.stderr.contains("card \(name) ("))
            #expect(try !mountPoints().contains("/run/ingest/cards/\(name)"), "unmounted on the way out")
            let pending = try IngestRun.ingest(["status", "--state-dir", state.path, "--json"]).events("pending_upload")
            #expect(!pending.isEmpty, "uploads were left for later, not failed")
            #expect(pending.allSatisfy { $0["last_error"] == nil }, "a stop is no error: \(pending)")

            // Resumed later: only the parts not acknowledged before the stop are sent.
            let resumed = try IngestRun.ingest(
                ["resume", "--state-dir", state.path, "--json"], environment: destination.environment)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(resumed.events("upload_resuming").count == pending.count)
            // Parts of journalled uploads; a file's parts streamed as it was copied have no upload
            // id yet, and a stop before its claim leaves them to be sent again.
            let parts = (stopped.events("part_uploaded") + resumed.events("part_uploaded")).compactMap { event in
                event.string("upload_id").map { "\($0)#\(event.int("part") ?? -1)" }
            }
            #expect(Set(parts).count == parts.count, "no part was sent twice: the ones on the wire at the stop were journalled")
            #expect(try IngestRun.ingest(["status", "--state-dir", state.path, "--json"]).events("pending_upload").isEmpty)
            try destination.expectObjects(from: oracle)
        }
    }
}
