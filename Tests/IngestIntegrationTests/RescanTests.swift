import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `ingest rescan`, the nightly job, end to end against a real SeaweedFS behind the fault
/// proxy (with no rules: it only counts the requests that reach the server). External
/// oracles: the aws CLI and xxh128sum for what landed, strace for what was read, the proxy
/// for what was sent, prometheus-client's parser for the metrics file.
@Suite(.serialized)
final class RescanTests {
    let server: SeaweedFS
    let proxy: FaultProxy
    var bucket: String { server.bucket }

    init() throws {
        server = try SeaweedFS()
        proxy = try FaultProxy(upstreamPort: server.s3Port)
    }

    deinit { proxy.stop() }

    /// Small parts (a few MiB make a multipart upload), sent once staged (the rescan's resume
    /// step follows journalled uploads), the destination through the proxy, and the
    /// `[rescan]` section given.
    /// `bucketCheckDays` 0: the rescan lists no card's folder (for the rescans that must
    /// send the server nothing).
    func config(roots: [String], metricsFile: String? = nil, bucketCheckDays: Int = 30, in dir: TemporaryDirectory) throws -> String {
        let text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            stream_parts = false
            parts_in_flight = 4
            [s3]
            endpoint = "\(proxy.endpoint)"
            bucket = "\(bucket)"
            stall_timeout = "5s"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            [rescan]
            roots = [\(roots.map { "\"\($0)\"" }.joined(separator: ", "))]
            bucket_check_days = \(bucketCheckDays)
            \(metricsFile.map { "metrics_file = \"\($0)\"" } ?? "")
            """
        return try dir.write("ingest.toml", Array(text.utf8))
    }

    func environment(config: String, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = IngestRun.environment.merging(server.awsEnvironment) { $1 }
        environment["INGEST_CONFIG"] = config
        return environment.merging(extra) { $1 }
    }

    func ingest(
        _ arguments: [String], state: TemporaryDirectory, config: String, environment extra: [String: String] = [:]
    ) throws -> IngestRun {
        IngestRun(
            result: try run(
                IngestBinary.path, arguments + ["--state-dir", state.path, "--json"],
                environment: environment(config: config, extra)))
    }

    func status(_ state: TemporaryDirectory, config: String) throws -> [String: Any] {
        try #require(try ingest(["status"], state: state, config: config).events("status").first)
    }

    func json(_ arguments: [String]) throws -> [String: Any] { try server.json(arguments) }

    func openMultipartUploads() throws -> [[String: Any]] { try server.openMultipartUploads(bucket: bucket) }

    /// Every object of the cards in the bucket (their ASC MHL histories and the bucket's
    /// marker aside), downloaded (`aws s3 cp --recursive`) and fingerprinted with xxh128sum,
    /// by key.
    func objectDigests(into dir: TemporaryDirectory) throws -> [String: String] {
        let download = dir.path + "/download-\(UUID().uuidString)"
        let result = try server.aws(
            ["s3", "cp", "--recursive", "--only-show-errors", "--exclude", ".ingest/*", "s3://\(bucket)/", download])
        guard result.status == 0 else { throw CommandFailed(command: "aws s3 cp --recursive", result: result) }
        guard FileManager.default.fileExists(atPath: download) else { return [:] }
        defer { try? FileManager.default.removeItem(atPath: download) }
        return Dictionary(
            uniqueKeysWithValues: try xxh128sums(under: download).map { (String(decoding: $0.key, as: UTF8.self), $0.value) }
                .filter { !$0.0.contains("/ascmhl/") })
    }

    /// Every file under `card` has an object whose key ends with its path and whose bytes
    /// xxh128sum the same.
    func expectEveryFileLandedByteForByte(
        _ card: String, in objects: [String: String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for (path, digest) in try xxh128sums(under: card) {
            let relative = String(decoding: path, as: UTF8.self)
            let key = objects.keys.first { $0.hasSuffix("/" + relative) }
            #expect(key != nil, "no object for \(relative)", sourceLocation: sourceLocation)
            if let key { #expect(objects[key] == digest, "\(key)", sourceLocation: sourceLocation) }
        }
    }

    /// A card being recorded: one long clip (six parts of 5 MiB) that sorts first, photos, a
    /// scene file, and a second folder the killed run is kept from reaching: 19 files.
    func makeCard() throws -> TemporaryDirectory {
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/100MEDIA/A_FLIGHT.MP4", randomBytes((30 << 20) - 11))
        for i in 1...12 { _ = try card.write("DCIM/100MEDIA/IMG_\(1000 + i).JPG", randomBytes(100_000 * i)) }
        for i in 1...5 { _ = try card.write("DCIM/101MEDIA/LATE_\(i).JPG", randomBytes(150_000 + i)) }
        _ = try card.write("ingest-scene.toml", Array("scene = \"night-survey\"\n".utf8))
        return card
    }

    /// `ingest CARD` killed -9 after two parts of the clip are journalled. The files under
    /// 101MEDIA stand for those the kill came before: which files a real kill leaves
    /// unstaged depends on timing, so the killed run is kept from them (`--exclude`), which
    /// leaves the journal exactly as a run killed before reaching them would.
    func killMidIngest(_ card: String, state: TemporaryDirectory, config: String) throws {
        let killed = try ingest(
            [card, "--exclude", "101MEDIA"], state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-parts:2"])
        #expect(killed.status == SIGKILL, "the hook kills the process: \(killed.stderr)")
        #expect(killed.events("staged").allSatisfy { !($0.string("path") ?? "").contains("LATE") })
        let pending = try ingest(["status"], state: state, config: config).events("pending_upload")
        let clip = try #require(pending.first { $0.string("path") == "DCIM/100MEDIA/A_FLIGHT.MP4" })
        #expect(clip.string("phase") == "uploading", "the clip is partly uploaded")
        let open = try openMultipartUploads()
        #expect(open.count == 1)
        let parts = try json([
            "s3api", "list-parts", "--bucket", bucket, "--key", try #require(open.first?["Key"] as? String),
            "--upload-id", try #require(open.first?["UploadId"] as? String),
        ])["Parts"] as? [[String: Any]] ?? []
        #expect(parts.count >= 2, "the server holds the journalled parts")
        let known = try status(state, config: config)
        let knownFiles = ["files_pending", "files_staged", "files_uploaded"].compactMap { known.int($0) }.reduce(0, +)
        #expect(knownFiles <= 14, "the killed run never saw 101MEDIA: \(known)")
    }

    @Test(.timeLimit(.minutes(5)))
    func aRescanAfterAKillFinishesEveryUploadAndASecondRescanReadsAndSendsNothing() throws {
        let dir = TemporaryDirectory()
        let card = try makeCard()
        let cardPath = try realPath(card.path)
        let state = TemporaryDirectory()
        let config = try config(roots: [cardPath], bucketCheckDays: 0, in: dir)
        try killMidIngest(cardPath, state: state, config: config)

        // Another card, killed mid-upload too, then taken away: its upload finishes from staging.
        let gone = TemporaryDirectory()
        let goneClip = try gone.write("DCIM/GONE.MP4", randomBytes(12 << 20))
        let goneDigest = try xxh128sum(goneClip)
        let goneRun = try ingest([gone.path], state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-parts:1"])
        #expect(goneRun.status == SIGKILL)
        try FileManager.default.removeItem(atPath: gone.path + "/DCIM")

        let first = try straced(["rescan"], state: state, config: config, card: cardPath, trace: dir.path + "/first.trace")
        #expect(first.run.status == 0, "\(first.run.stderr)")
        let resumed = try #require(first.run.events("resume_summary").first)
        #expect(resumed.int("pending") == 1, "the absent card's upload; the present card finishes its own")
        #expect(resumed.int("uploaded") == 1)
        let resuming = first.run.events("upload_resuming").compactMap { $0.string("path") }
        #expect(resuming.contains("DCIM/GONE.MP4"))
        #expect(resuming.contains("DCIM/100MEDIA/A_FLIGHT.MP4"))
        #expect(first.run.events("upload_reconciling").count == 2, "the two clips had parts on the server")
        let staged = first.run.events("staged")
        #expect(staged.filter { $0.string("path")!.contains("LATE") }.count == 5, "what the killed run had not reached")
        #expect(
            first.cardFilesOpened == Set(staged.map { $0.string("path")! } + ["ingest-scene.toml"]),
            "strace sees each file staged opened, and the scene file the new uploads are labelled from: the observer works")
        #expect(first.cardFileReads >= staged.count)
        let cardEvent = try #require(first.run.events("rescan_card").first)
        #expect(first.run.events("rescan_card").count == 1)
        #expect(cardEvent.string("origin") == "root")
        #expect(cardEvent.string("status") == "ingested")
        #expect(cardEvent.int("staged") == staged.count)
        #expect(cardEvent.int("pending") == 0)
        let summary = try #require(first.run.events("rescan_summary").first)
        #expect(summary.int("exit_status") == 0)
        #expect(summary.int("pending") == 0)
        #expect(summary.int("uploads_pending") == 0)

        let objects = try objectDigests(into: dir)
        #expect(objects.count == 20, "19 files on the card and the clip of the card taken away")
        try expectEveryFileLandedByteForByte(cardPath, in: objects)
        #expect(objects.first { $0.key.hasSuffix("/DCIM/GONE.MP4") }?.value == goneDigest)
        #expect(try openMultipartUploads().isEmpty)
        let after = try status(state, config: config)
        #expect(after.int("files_uploaded") == 20)
        #expect(after.int("uploads_pending") == 0)

        try proxy.resetStats()
        let second = try straced(["rescan"], state: state, config: config, card: cardPath, trace: dir.path + "/second.trace")
        #expect(second.run.status == 0, "\(second.run.stderr)")
        let sent = second.run.events.filter { ($0.string("event") ?? "").hasPrefix("upload") || $0.string("event") == "part_uploaded" }
        #expect(sent.isEmpty, "no upload: \(sent)")
        #expect(second.run.events("staged").isEmpty)
        #expect(second.run.events("scanned").first?.int("known") == 19)
        #expect(second.cardFilesOpened.isEmpty, "no card file was opened, not even the scene file: the scan only stat()s")
        #expect(second.cardFileReads == 0, "no card file was read")
        let traffic = try proxy.stats()
        // Only the destination's identity is asked, as on every run: one GET of its marker.
        #expect(traffic.requests == 1 && traffic.bytesToUpstream < 4096, "only the marker was asked: \(traffic.requests) requests")
        #expect(second.run.events("rescan_summary").first?.int("uploaded") == 0)
    }

    @Test(.timeLimit(.minutes(5)))
    func theMetricsFileParsesAsPrometheusTextAndAgreesWithTheJournal() throws {
        let dir = TemporaryDirectory()
        let card = try makeCard()
        let cardPath = try realPath(card.path)
        let state = TemporaryDirectory()
        let metrics = dir.path + "/textfile/ingest.prom"
        try FileManager.default.createDirectory(atPath: dir.path + "/textfile", withIntermediateDirectories: true)
        let config = try config(roots: [cardPath], metricsFile: metrics, in: dir)
        try killMidIngest(cardPath, state: state, config: config)

        // The endpoint is down: the rescan stages the rest, uploads nothing, and says so.
        let port = try SeaweedFS.freePorts(1)[0]
        let down = try ingest(["rescan", "--endpoint", "http://127.0.0.1:\(port)"], state: state, config: config)
        #expect(down.status == 69, "\(down.stderr)")
        var parsed = try parsePrometheus(metrics)
        var journal = try status(state, config: config)
        #expect(parsed["ingest_files_uploaded_total"] == Double(journal.int("files_uploaded")!))
        #expect(parsed["ingest_files_pending{waiting_for=upload}"] == Double(journal.int("files_staged")!))
        #expect(parsed["ingest_files_pending{waiting_for=upload}"]! >= 5, "101MEDIA waits for its uploads")
        #expect(parsed["ingest_uploads_pending"] == Double(journal.int("uploads_pending")!))
        #expect(parsed["ingest_rescan_last_exit_status"] == 69)
        #expect(parsed["ingest_rescan_last_success_timestamp_seconds"] == nil, "no rescan has finished everything yet")

        let before = Date().timeIntervalSince1970.rounded(.down)
        let fixed = try ingest(["rescan"], state: state, config: config)
        let afterwards = Date().timeIntervalSince1970
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(fixed.events("rescan_summary").first?.string("metrics_file") == metrics)
        parsed = try parsePrometheus(metrics)
        journal = try status(state, config: config)
        #expect(parsed["ingest_files_uploaded_total"] == 19)
        #expect(parsed["ingest_files_uploaded_total"] == Double(journal.int("files_uploaded")!))
        #expect(parsed["ingest_uploaded_bytes_total"] == Double(journal.int("bytes_uploaded")!))
        #expect(parsed["ingest_files_staged_total"] == 19)
        #expect(parsed["ingest_staged_bytes_total"] == Double(try totalBytes(under: cardPath)))
        #expect(parsed["ingest_files_pending{waiting_for=stage}"] == Double(journal.int("files_pending")!))
        #expect(parsed["ingest_files_pending{waiting_for=upload}"] == 0)
        #expect(parsed["ingest_uploads_pending"] == 0)
        #expect(parsed["ingest_files_failed"] == 0)
        #expect(parsed["ingest_staging_bytes"] == 0, "retention 0s: verified copies are gone")
        #expect(parsed["ingest_rescan_last_exit_status"] == 0)
        let success = try #require(parsed["ingest_rescan_last_success_timestamp_seconds"])
        #expect(success >= before && success <= afterwards, "the rescan that just ended")
        let lastUpload = try #require(parsed["ingest_last_upload_timestamp_seconds"])
        #expect(lastUpload >= before && lastUpload <= success)
        var st = stat()
        #expect(stat(metrics, &st) == 0 && st.st_mode & 0o777 == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/textfile") == ["ingest.prom"])
    }

    @Test(.timeLimit(.minutes(5)))
    func aMissingRootIsReportedABusyCardIsSkippedAndTheRestGoesOn() throws {
        let dir = TemporaryDirectory()
        let readyCard = try makeCard()
        let ready = try realPath(readyCard.path)
        let busyCard = TemporaryDirectory()
        _ = try busyCard.write("DCIM/BUSY.JPG", randomBytes(200_000))
        let busy = try realPath(busyCard.path)
        let missing = dir.path + "/not-mounted-today"
        let state = TemporaryDirectory()
        let config = try config(roots: [missing, busy, ready], in: dir)

        // Another ingest holds the busy card: its lock file, named by the xxh128 of its key.
        try FileManager.default.createDirectory(atPath: state.path + "/locks", withIntermediateDirectories: true)
        let lockName = String(try sh("printf %s \(shellQuoted("path:" + busy)) | xxh128sum").prefix(32))
        let lock = open(state.path + "/locks/\(lockName).lock", O_RDWR | O_CREAT, 0o640)
        #expect(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)

        let run = try ingest(["rescan"], state: state, config: config)
        close(lock)
        #expect(run.status == 66, "a configured root is missing: \(run.stderr)")
        let cards = Dictionary(run.events("rescan_card").map { ($0.string("path")!, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(cards[missing]?.string("status") == "unavailable")
        #expect(cards[missing]?.string("message")?.contains(missing) == true)
        #expect(cards[missing]?.string("message")?.contains("No such file or directory") == true)
        #expect(cards[busy]?.string("status") == "busy")
        #expect(cards[busy]?.int("exit_status") == 0, "a busy card is not a failure")
        #expect(cards[busy]?.string("message")?.contains("another ingest process") == true)
        #expect(cards[ready]?.string("status") == "ingested")
        #expect(cards[ready]?.int("uploaded") == 19)
        let keys = try objectDigests(into: dir).keys
        #expect(keys.count == 19)
        #expect(!keys.contains { $0.hasSuffix("BUSY.JPG") }, "the busy card was left to its ingest")

        let again = try ingest(["rescan"], state: state, config: config)
        #expect(again.status == 66)
        let busyAgain = try #require(again.events("rescan_card").first { $0.string("path") == busy })
        #expect(busyAgain.string("status") == "ingested")
        #expect(busyAgain.int("uploaded") == 1)
        #expect(try objectDigests(into: dir).keys.contains { $0.hasSuffix("DCIM/BUSY.JPG") })
    }

    @Test(.timeLimit(.minutes(5)))
    func aMetricsFileThatCannotBeWrittenIsAClearErrorAndTheWorkIsDone() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/a.JPG", randomBytes(300_000))
        let cardPath = try realPath(card.path)
        let state = TemporaryDirectory()
        let unwritable = dir.path + "/no-such-directory/ingest.prom"
        let config = try config(roots: [cardPath], metricsFile: unwritable, in: dir)

        let run = try ingest(["rescan"], state: state, config: config)
        #expect(run.status == 73, "\(run.stderr)")
        #expect(run.stderr.contains("cannot write the metrics file \(unwritable)"))
        #expect(run.stderr.contains("metrics_file"), "the error names the fix")
        #expect(run.events("error").first?.int("exit_status") == 73)
        #expect(run.events("rescan_summary").first?.int("exit_status") == 73)
        try expectEveryFileLandedByteForByte(cardPath, in: try objectDigests(into: dir))
        #expect(try status(state, config: config).int("files_uploaded") == 1, "the work is done and recorded")

        let elsewhere = dir.path + "/ingest.prom"
        let flag = try ingest(["rescan", "--metrics-file", elsewhere], state: state, config: config)
        #expect(flag.status == 0, "--metrics-file overrides the configuration: \(flag.stderr)")
        #expect(try parsePrometheus(elsewhere)["ingest_files_uploaded_total"] == 1)
    }

    @Test(.timeLimit(.minutes(5)), needsRoot)
    func aKnownCardIsFoundByItsUUIDWhereverItIsMountedAndFinished() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let dir = TemporaryDirectory()
        let card = try LoopCard(sizeMiB: 96, label: "RESCAN_ME")
        try sh("""
            cd \(card.mountPoint) && mkdir -p DCIM/100MEDIA DCIM/101MEDIA
            head -c 12M /dev/urandom > DCIM/100MEDIA/A_CLIP.MP4
            for i in 1 2 3 4; do head -c $((i * 70000)) /dev/urandom > DCIM/100MEDIA/IMG_$i.JPG; done
            for i in 1 2 3; do head -c $((i * 50000)) /dev/urandom > DCIM/101MEDIA/LATE_$i.JPG; done
            """)
        try card.seal()
        let state = TemporaryDirectory()
        let config = try config(roots: [], bucketCheckDays: 0, in: dir)

        let killed = try ingest(
            [card.mountPoint, "--exclude", "101MEDIA"], state: state, config: config,
            environment: ["INGEST_TEST_STOP_AT": "after-parts:1"])
        #expect(killed.status == SIGKILL, "\(killed.stderr)")
        #expect(killed.events("volume").first?.string("key") == "uuid:\(card.uuid)")

        // The card comes back elsewhere, as a reader in another port or an automounter does:
        // under /media, where rescan looks for cards (never at a system place).
        try card.detach()
        let media = "/media/ingest-test-\(UUID().uuidString.prefix(8))"
        let elsewhere = media + "/RESCAN_ME"
        let device = try sh("losetup -f --show \(card.image)").trimmingCharacters(in: .whitespacesAndNewlines)
        defer { _ = try? sh("umount \(elsewhere) || umount -l \(elsewhere) || true; losetup -d \(device) || true; rm -rf \(media)") }
        try sh("mkdir -p \(elsewhere) && udevadm settle -t 10 || true; mount -o ro \(device) \(elsewhere)")

        let rescan = try ingest(["rescan"], state: state, config: config)
        #expect(rescan.status == 0, "\(rescan.stderr)")
        let found = try #require(rescan.events("rescan_card").first)
        #expect(rescan.events("rescan_card").count == 1, "only the card the journal knows")
        #expect(found.string("origin") == "known-card")
        #expect(found.string("key") == "uuid:\(card.uuid)")
        #expect(found.string("path") == elsewhere)
        #expect(found.string("name") == "RESCAN_ME")
        #expect(rescan.events("staged").filter { $0.string("path")!.contains("LATE") }.count == 3)
        #expect(rescan.events("upload_resuming").contains { $0.string("path") == "DCIM/100MEDIA/A_CLIP.MP4" })
        let objects = try objectDigests(into: dir)
        #expect(objects.count == 8)
        try expectEveryFileLandedByteForByte(elsewhere, in: objects)

        try proxy.resetStats()
        let again = try ingest(["rescan"], state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.events("rescan_card").first?.int("staged") == 0)
        #expect(again.events("scanned").first?.int("known") == 8)
        #expect(try proxy.stats().requests == 1, "only the marker is asked, as on every run")
    }

    /// A card the journal knows, mounted by hand outside the places rescan takes cards from:
    /// rescan leaves it alone and says so, naming where it is and the command that ingests it.
    @Test(.timeLimit(.minutes(5)), needsRoot)
    func aKnownCardMountedElsewhereIsNamedWithTheCommandThatIngestsIt() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let dir = TemporaryDirectory()
        let card = try LoopCard(sizeMiB: 32, label: "BY_HAND")
        defer { try? card.detach() }
        try sh("mkdir -p \(card.mountPoint)/DCIM && head -c 70000 /dev/urandom > \(card.mountPoint)/DCIM/IMG_1.JPG")
        try card.seal()
        let state = TemporaryDirectory()
        let config = try config(roots: [], bucketCheckDays: 0, in: dir)
        let first = try ingest([card.mountPoint], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.events("volume").first?.string("key") == "uuid:\(card.uuid)")

        // Mounted under the test's directory, as by hand at /mnt/sd: not where cards are taken from.
        let mountPoint = try realPath(card.mountPoint)
        let rescan = try ingest(["rescan"], state: state, config: config)
        #expect(rescan.status == 0, "\(rescan.stderr)")
        #expect(rescan.events("rescan_card").isEmpty, "not ingested")
        let note = try #require(rescan.events("known_card_elsewhere").first, "\(rescan.result.stdoutText)")
        #expect(note.string("key") == "uuid:\(card.uuid)")
        #expect(note.string("name") == "BY_HAND")
        #expect(note["mount_points"] as? [String] == [mountPoint])
        #expect(note.string("command") == "ingest \(mountPoint)")
        #expect(rescan.events("rescan_summary").first?.int("known_cards_elsewhere") == 1)

        let people = try run(
            IngestBinary.path, ["rescan", "--state-dir", state.path], environment: environment(config: config))
        #expect(people.status == 0, "\(people.stderr)")
        #expect(people.stderr.contains(
            "BY_HAND (uuid:\(card.uuid)), a card the journal knows, is mounted at \(mountPoint), not where rescan takes "
                + "cards from (/media, /run/media, /run/ingest): not ingested. To ingest it: ingest \(mountPoint)"),
                "\(people.stderr)")
        #expect(people.stderr.contains("known cards mounted elsewhere, not ingested: BY_HAND (ingest \(mountPoint))"))
    }

    /// A rescan configuration with a key prefix and an orphan age, no roots.
    func orphanConfig(age: String, metricsFile: String, in dir: TemporaryDirectory) throws -> String {
        let text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            stream_parts = false
            [s3]
            endpoint = "\(proxy.endpoint)"
            bucket = "\(bucket)"
            prefix = "fleet/"
            stall_timeout = "5s"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            [rescan]
            metrics_file = "\(metricsFile)"
            orphan_upload_age = "\(age)"
            """
        return try dir.write("ingest-\(age).toml", Array(text.utf8))
    }

    func createMultipartUpload(_ key: String) throws -> String {
        try #require(try json(["s3api", "create-multipart-upload", "--bucket", bucket, "--key", key])["UploadId"] as? String)
    }

    func openUploadIDs() throws -> Set<String> { Set(try openMultipartUploads().compactMap { $0["UploadId"] as? String }) }

    @Test(.timeLimit(.minutes(5)))
    func rescanAbortsMultipartUploadsNoJournalKnowsOnceOldEnoughAndKeepsTheRest() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/CLIP.MP4", randomBytes(12 << 20))
        let state = TemporaryDirectory()
        let metrics = dir.path + "/ingest.prom"
        let patient = try orphanConfig(age: "1h", metricsFile: metrics, in: dir)
        let eager = try orphanConfig(age: "0s", metricsFile: metrics, in: dir)

        // The journal knows this one: a run killed after its first part.
        let killed = try ingest([card.path], state: state, config: patient, environment: ["INGEST_TEST_STOP_AT": "after-parts:1"])
        #expect(killed.status == SIGKILL, "\(killed.stderr)")
        let pending = try #require(try ingest(["status"], state: state, config: patient).events("pending_upload").first)
        let logicalID = try #require(pending.string("upload_id"))
        let known = try #require(try openUploadIDs().first)
        #expect(try openUploadIDs().count == 1)
        // These no journal knows: one under the prefix (what a run killed before journalling
        // its upload id leaves), one outside it (someone else's).
        let orphan = try createMultipartUpload("fleet/station-7/lost/DCIM/LOST.MP4")
        let outside = try createMultipartUpload("elsewhere/DCIM/LOST.MP4")
        // Another process runs the known upload: the rescan leaves it to that one.
        let lock = try #require(try StateDirectory(path: state.path).lockUpload(logicalID))
        defer { lock.release() }

        let young = try ingest(["rescan"], state: state, config: patient)
        #expect(young.status == 0, "\(young.stderr)")
        let firstSweep = try #require(young.events("orphan_uploads_swept").first)
        #expect(young.events("orphan_uploads_swept").count == 1, "one destination: the configured one, which the journal uses")
        #expect(firstSweep.string("bucket") == bucket && firstSweep.string("prefix") == "fleet/")
        #expect(firstSweep.int("listed") == 2, "the known upload and the orphan; not the one outside the prefix")
        #expect(firstSweep.int("aborted") == 0)
        #expect(firstSweep.int("kept_young") == 1, "the orphan is younger than an hour")
        #expect(try openUploadIDs() == [known, orphan, outside], "nothing was aborted")
        #expect(try parsePrometheus(metrics)["ingest_orphan_uploads_young"] == 1)

        // A day's sweep is done: a rescan soon after does not list again (an age of an hour
        // sweeps at most hourly; an age of 0, every rescan).
        let soon = try ingest(["rescan"], state: state, config: patient)
        #expect(soon.status == 0, "\(soon.stderr)")
        #expect(soon.events("orphan_uploads_swept").isEmpty)
        #expect(soon.events("orphan_uploads_sweep_deferred").first?.string("next_after") != nil)

        let old = try ingest(["rescan"], state: state, config: eager)
        #expect(old.status == 0, "\(old.stderr)")
        let secondSweep = try #require(old.events("orphan_uploads_swept").first)
        #expect(secondSweep.int("aborted") == 1)
        #expect(secondSweep.int("kept_young") == 0)
        #expect(secondSweep.string("message") == nil)
        #expect(old.events("rescan_summary").first?.int("orphan_uploads_aborted") == 1)
        #expect(try openUploadIDs() == [known, outside], "the orphan is gone; the known one and the one outside stay")
        let parsed = try parsePrometheus(metrics)
        #expect(parsed["ingest_orphan_uploads_aborted_total"] == 1)
        #expect(parsed["ingest_orphan_uploads_young"] == 0)
        #expect(parsed["ingest_orphan_sweep_failures"] == 0)

        // The other process lets go: the known upload finishes from where it was.
        lock.release()
        let finished = try ingest(["rescan"], state: state, config: eager)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.events("upload_reconciling").count == 1, "resumed with its parts, not restarted")
        #expect(finished.events("orphan_uploads_swept").first?.int("aborted") == 0)
        #expect(try openUploadIDs() == [outside])
        let objects = try json(["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "fleet/"])["Contents"] as? [[String: Any]] ?? []
        let cardObjects = objects.filter { ($0["Key"] as? String)?.contains("/ascmhl/") != true }  // its history aside
        #expect(cardObjects.count == 1 && (cardObjects.first?["Key"] as? String)?.hasSuffix("/DCIM/CLIP.MP4") == true)
    }

    // MARK: external observers

    /// Runs `ingest` under `strace -f -y` and lists, from the kernel's side, the card files
    /// opened other than as directories (the scan opens directories only), and counts the
    /// reads (of every read call) of descriptors that point into the card. `-y` prints each descriptor's path, so
    /// an open relative to a directory and a read are attributed to their file.
    func straced(
        _ arguments: [String], state: TemporaryDirectory, config: String, card: String, trace: String
    ) throws -> (run: IngestRun, cardFilesOpened: Set<String>, cardFileReads: Int) {
        let result = try run(
            "/usr/bin/strace",
            ["-f", "-y", "-qq", "-e", "trace=open,openat,openat2,read,pread64,readv,preadv,preadv2", "-o", trace, IngestBinary.path]
                + arguments + ["--state-dir", state.path, "--json"],
            environment: environment(config: config))
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        var opened: Set<String> = []
        for line in lines where !line.contains("O_DIRECTORY") {
            // `openat(5</card>, "DCIM/a.JPG", …)` or `openat(AT_FDCWD</…>, "/card/ingest-scene.toml", …)`
            guard let call = line.range(of: #"open(at2?)?\((AT_FDCWD|\d+)(<[^>]*>)?, ""#, options: .regularExpression),
                let end = line[call.upperBound...].firstIndex(of: "\"")
            else { continue }
            let name = String(line[call.upperBound..<end])
            let directory = line[call].firstIndex(of: "<").map { String(line[line.index(after: $0)..<line[call].lastIndex(of: ">")!]) }
            let full = name.hasPrefix("/") ? name : (directory ?? "") + "/" + name
            if full.hasPrefix(card + "/") { opened.insert(String(full.dropFirst(card.count + 1))) }
        }
        let reads = lines.filter { line in
            [" read(", " pread64(", " readv(", " preadv(", " preadv2("].contains { line.contains($0) }
                && (line.contains("<\(card)/") || line.contains("<\(card)>"))
        }
        return (IngestRun(result: result), opened, reads.count)
    }

    /// Parses a metrics file with prometheus-client's parser (the one Prometheus' Python
    /// client ships), which rejects anything that is not the text format; returns each
    /// sample as `name` or `name{label=value}`.

    func totalBytes(under root: String) throws -> Int64 {
        Int64(try sh("find \(shellQuoted(root)) -type f -printf '%s\\n' | awk '{s+=$1} END {print s}'")
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}
