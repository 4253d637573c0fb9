import Foundation
import Glibc
import IngestTestSupport
import Testing

/// What follows each card: the `[hooks] on_card_done` program and the metrics file, with
/// the real binary against a real SeaweedFS. The hooks are shell commands writing what they
/// read to a file; prometheus-client's parser reads the metrics.
@Suite(.serialized)
final class CardDoneTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    /// The destination and `[hooks]` with the given command and timeout.
    func config(hook: String?, timeout: String? = nil, in dir: TemporaryDirectory) throws -> String {
        var text = """
            [s3]
            endpoint = "\(server.endpoint)"
            bucket = "\(bucket)"
            stall_timeout = "5s"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            [hooks]

            """
        if let hook { text += "on_card_done = \"\(hook.replacingOccurrences(of: "\"", with: "\\\""))\"\n" }
        if let timeout { text += "timeout = \"\(timeout)\"\n" }
        return try dir.write("ingest.toml", Array(text.utf8))
    }

    func ingest(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        try IngestRun.ingest(
            arguments + ["--state-dir", state.path, "--json"],
            environment: server.awsEnvironment.merging(["INGEST_CONFIG": config]) { $1 }, timeout: 120)
    }

    /// A card of `count` small files (it is removed when the value goes: keep it while it is ingested).
    func card(files count: Int) throws -> TemporaryDirectory {
        let card = TemporaryDirectory()
        for i in 0..<count { _ = try card.write("DCIM/IMG_\(1000 + i).JPG", randomBytes(3_000 + i)) }
        return card
    }

    /// The JSON documents the hook wrote, one per line.
    func documents(_ path: String) throws -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func theHookReadsOneJSONDocumentPerCardWithTheCardsCounts() throws {
        let dir = TemporaryDirectory()
        let card = try card(files: 5)
        let state = TemporaryDirectory()
        let out = dir.path + "/documents.ndjson"
        let config = try config(hook: "cat >> '\(out)'", in: dir)

        let first = try ingest([card.path], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        var documents = try documents(out)
        try #require(documents.count == 1, "one document for one card: \(documents)")
        let done = documents[0]
        #expect(done["event"] as? String == "card_done")
        #expect(done["root"] as? String == (try realPath(card.path)))
        #expect(done["key"] as? String == first.events("volume").first?["key"] as? String)
        #expect(done.int("files") == 5)
        #expect(done.int("staged") == 5)
        #expect(done.int("uploaded") == first.summary?.int("uploaded"), "as the run's summary says")
        #expect(done.int("objects") == 5, "the card's files verified in the bucket")
        #expect(done.int("pending") == 0)
        #expect(done.int("failed") == 0)
        #expect(done.int("quarantined") == 0)
        #expect(done.int("exit_status") == 0)
        #expect((done["seconds"] as? NSNumber).map { $0.doubleValue > 0 } == true)
        #expect(done["manifest_key"] == nil, "no manifest yet")
        let bytes = (0..<5).reduce(0) { $0 + 3_000 + $1 }
        #expect(done.int("bytes") == bytes)
        #expect(done.int("objects_bytes") == bytes)

        // The same card again, with one new file: a second document, of this run.
        _ = try card.write("DCIM/IMG_2000.JPG", randomBytes(100))
        let second = try ingest([card.path], state: state, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        documents = try self.documents(out)
        try #require(documents.count == 2, "one more document for the second run: \(documents)")
        #expect(documents[1].int("files") == 6)
        #expect(documents[1].int("known") == 5)
        #expect(documents[1].int("staged") == 1)
        #expect(documents[1].int("objects") == 6)
    }

    @Test(.timeLimit(.minutes(5)), needsRoot)
    func aCardGivenByItsDeviceGetsOneDocumentWithItsUdevIdentity() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let (card, oracle) = try pulledOutCard(sizeMiB: 64, label: "HOOK_CARD", small: 4)
        try card.insert()
        defer { try? card.detach() }
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let out = dir.path + "/documents.ndjson"
        let config = try config(hook: "cat >> '\(out)'", in: dir)

        let run = try IngestRun.ingest(
            ["--device", card.device, "--state-dir", state.path, "--json"],
            environment: server.awsEnvironment.merging(["INGEST_CONFIG": config, "RUNTIME_DIRECTORY": ""]) { $1 }, timeout: 120)
        #expect(run.status == 0, "\(run.stderr)")
        let documents = try documents(out)
        try #require(documents.count == 1, "one document for one card: \(documents)")
        #expect(documents[0]["device"] as? String == card.device)
        #expect(documents[0]["fs_uuid"] as? String == card.uuid)
        #expect(documents[0]["fs_label"] as? String == "HOOK_CARD")
        #expect(documents[0]["key"] as? String == "uuid:\(card.uuid)")
        #expect(documents[0].int("files") == oracle.count)
        #expect(documents[0].int("objects") == oracle.count)
        #expect(documents[0].int("pending") == 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func rescanRunsTheHookOnceForEachOfItsCards() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let cards = [try card(files: 2), try card(files: 3)]
        let out = dir.path + "/documents.ndjson"
        let config = try config(hook: "cat >> '\(out)'", in: dir)

        let run = try ingest(["rescan", "--root", cards[0].path, "--root", cards[1].path], state: state, config: config)
        #expect(run.status == 0, "\(run.stderr)")
        let documents = try documents(out)
        try #require(documents.count == 2, "one document a card: \(documents)")
        #expect(documents.map { $0["root"] as? String } == (try cards.map { try realPath($0.path) }))
        #expect(documents.map { $0.int("objects") } == [2, 3])
    }

    @Test(.timeLimit(.minutes(3)))
    func aHookThatHangsIsKilledWithWhatItStartedAfterItsTimeoutAndTheRunEndsAsItWould() throws {
        let dir = TemporaryDirectory()
        let card = try card(files: 2)
        let state = TemporaryDirectory()
        let pids = dir.path + "/pids"
        // The shell and a child of its own in the background: both must go.
        let config = try config(hook: "sleep 1000 & echo $$ $! > '\(pids)'; sleep 1000", timeout: "1s", in: dir)

        let started = ContinuousClock.now
        let run = try ingest([card.path], state: state, config: config)
        let took = ContinuousClock.now - started
        #expect(run.status == 0, "the hook's timeout is not the ingest's failure: \(run.stderr)")
        #expect(run.summary?["uploaded"] as? Int == 2)
        #expect(took < .seconds(30), "the run waits for the hook its timeout, not 1000 s: \(took)")
        #expect(run.stderr.contains("on_card_done hook still ran after [hooks] timeout = 1s"), "\(run.stderr)")

        let written = try String(contentsOfFile: pids, encoding: .utf8)
        let both = written.split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
        #expect(both.count == 2)
        #expect(processesGone(both), "the hook's process group is killed")
        for pid in both where !processIsGone(pid) { kill(pid, SIGKILL) }
    }

    @Test(.timeLimit(.minutes(3)))
    func aFailingHookIsLoggedWithItsOutputAndLeavesTheExitStatusAsItWas() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let config = try config(hook: "cat > /dev/null; echo 'no route to the dashboard' >&2; exit 3", in: dir)

        let card = try card(files: 2)
        let clean = try ingest([card.path], state: state, config: config)
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(clean.stderr.contains("on_card_done hook exited with status 3"), "\(clean.stderr)")
        #expect(clean.stderr.contains("no route to the dashboard"), "\(clean.stderr)")

        // A run that ends with its own status after its card keeps it, whatever the hook says:
        // a scene file the card may not have (a link) is 65.
        let other = try self.card(files: 1)
        try FileManager.default.createSymbolicLink(atPath: other.path + "/ingest-scene.toml", withDestinationPath: "/etc/hostname")
        let refused = try ingest([other.path], state: state, config: config)
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("on_card_done hook exited with status 3"), "\(refused.stderr)")

        // A missing bucket stops the run before the card is read: 78, and no card, so no hook.
        let missing = try IngestRun.ingest(
            [other.path, "--state-dir", state.path, "--bucket", "no-such-bucket"],
            environment: server.awsEnvironment.merging(["INGEST_CONFIG": config]) { $1 }, timeout: 120)
        #expect(missing.status == 78, "\(missing.stderr)")
        #expect(!missing.stderr.contains("on_card_done hook"), "\(missing.stderr)")
    }

    @Test(.timeLimit(.minutes(3)))
    func aPlainRunRewritesTheMetricsFileAfterItsCard() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let metrics = dir.path + "/textfile/ingest.prom"
        try FileManager.default.createDirectory(atPath: dir.path + "/textfile", withIntermediateDirectories: true)
        let config = try config(hook: nil, in: dir)

        let cards = [try card(files: 3), try card(files: 2)]
        let first = try ingest([cards[0].path, "--metrics-file", metrics], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        var parsed = try parsePrometheus(metrics)
        #expect(parsed["ingest_files_uploaded_total"] == 3)
        #expect(parsed["ingest_cards_total"] == 1)
        #expect(parsed["ingest_last_card_files_staged"] == 3)
        // Sent now; a retried PUT whose first answer was lost finds its object there instead.
        #expect(parsed["ingest_last_card_objects_uploaded"] == first.summary?.int("uploaded").map(Double.init))
        #expect((first.summary?.int("uploaded") ?? 0) + (first.summary?.int("already_in_bucket") ?? 0) == 3, "\(first.result.stdoutText)")
        #expect(parsed["ingest_last_card_exit_status"] == 0)
        #expect(parsed["ingest_files_pending{waiting_for=upload}"] == 0)

        // Another card: the totals are the journal's, the last card is this one.
        let second = try ingest([cards[1].path, "--metrics-file", metrics], state: state, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        parsed = try parsePrometheus(metrics)
        #expect(parsed["ingest_files_uploaded_total"] == 5)
        #expect(parsed["ingest_cards_total"] == 2)
        #expect(parsed["ingest_last_card_files_staged"] == 2)
        #expect(parsed["ingest_rescan_last_run_timestamp_seconds"] == nil, "no rescan has run")
        var st = stat()
        #expect(stat(metrics, &st) == 0 && st.st_mode & 0o777 == 0o644)
    }

}
