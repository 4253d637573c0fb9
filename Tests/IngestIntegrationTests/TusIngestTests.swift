import Foundation
import Glibc
import IngestTestSupport
import Testing

/// `ingest PATH` end to end against a real tus server (tuspyserver on 127.0.0.1): what it
/// stores, byte for byte by `xxh128sum`, with the labels as upload metadata; what a kill -9
/// mid-file costs on `ingest resume`, counted at a loopback proxy; what resets and stalls
/// on the way cost. The server's own files are the oracle, never our journal.
@Suite(.serialized)
final class TusIngestTests {
    let server: TusServer

    init() throws { server = try TusServer() }

    deinit { server.stop() }

    static let chunk = 5 << 20

    func config(_ extra: String = "", url: String? = nil, in dir: TemporaryDirectory) throws -> String {
        let text = """
            [tus]
            url = "\(url ?? server.creationURL)"
            chunk_size = "5MiB"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            tags = { site = "north-dock" }
            \(extra)
            """
        return try dir.write("ingest.toml", Array(text.utf8))
    }

    func ingest(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        try IngestRun.ingest(arguments + ["--state-dir", state.path, "--json"], environment: ["INGEST_CONFIG": config])
    }

    /// Every upload the server holds, by its `filename` (the object's key): its bytes' path
    /// and what the server keeps of it. With `orphans`, uploads a lost creation answer left
    /// unfinished (they expire on the server) are counted there and left out; a key with two
    /// whole uploads, or with two uploads where no fault could leave one, fails the test.
    func stored(orphans: UnsafeMutablePointer<Int>? = nil) throws -> [String: (path: String, info: [String: Any])] {
        var found: [String: (path: String, info: [String: Any])] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: server.dataDirectory)) ?? []
        for name in names.sorted() where name.hasSuffix(".info") {
            let id = String(name.dropLast(".info".count))
            let info = try #require(try server.storedInfo(uploadURL: "/files/\(id)"))
            let metadata = info["metadata"] as? [String: Any] ?? [:]
            let key = try #require(metadata["filename"] as? String, "an upload without a filename: \(info)")
            let upload = (path: server.storedFile(uploadURL: "/files/\(id)"), info: info)
            guard let other = found[key] else {
                found[key] = upload
                continue
            }
            let whole = { (u: (path: String, info: [String: Any])) in u.info["offset"] as? Int == u.info["size"] as? Int }
            guard let orphans, !(whole(other) && whole(upload)) else {
                Issue.record("two uploads of \(key)")
                continue
            }
            orphans.pointee += 1
            if whole(upload) { found[key] = upload }
        }
        return found
    }

    @Test(.timeLimit(.minutes(3)))
    func aCardLandsOnATusServerByteForByteWithItsLabelsAsMetadata() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/DJI_0001.JPG", randomBytes(300_000))
        _ = try card.write("DCIM/DJI_0002.MP4", randomBytes(3 * Self.chunk + 12_345))  // four chunks
        _ = try card.write("DCIM/DJI_0003.MP4", randomBytes(Self.chunk))  // exactly one
        _ = try card.write("MISC/empty.marker", [])
        _ = try card.write("MISC/flight log – été.txt", Array("takeoff 12:03\n".utf8))
        let same = try Array(Data(contentsOf: URL(fileURLWithPath: card.path + "/DCIM/DJI_0001.JPG")))
        _ = try card.write("DCIM/copy of 0001.JPG", same)
        let state = TemporaryDirectory()

        let run = try ingest([card.path], state: state, config: try config(in: dir))
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.summary?.int("failed") ?? 0 == 0)

        let oracle = try xxh128sums(under: card.path)
        let uploads = try stored()
        // One upload per content: the copy of 0001 counts as its upload (dedupe by content).
        #expect(uploads.count == oracle.count - 1, "\(uploads.keys.sorted())")
        var contents: Set<String> = []
        for (key, upload) in uploads {
            let metadata = upload.info["metadata"] as? [String: Any] ?? [:]
            let digest = try #require(metadata["xxh128"] as? String, "\(key) carries its fingerprint")
            #expect(try xxh128sum(upload.path) == digest, "the server holds \(key)'s bytes")
            #expect(upload.info["offset"] as? Int == upload.info["size"] as? Int, "\(key) is whole")
            #expect(metadata["device"] as? String == "station-7")
            #expect(metadata["site"] as? String == "north-dock")
            #expect((metadata["original-path"] as? String).map { !$0.isEmpty } == true)
            #expect(key.hasSuffix((metadata["original-path"] as? String) ?? "?"), "the key ends with the card path")
            contents.insert(digest)
        }
        #expect(contents == Set(oracle.values), "every content of the card is on the server")

        // Nothing is left to send, and a second run sends nothing again.
        let again = try ingest([card.path], state: state, config: try config(in: dir))
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try stored().count == uploads.count, "no upload made twice")
        #expect(try ingest(["status"], state: state, config: try config(in: dir)).events("pending_upload").isEmpty)
    }

    /// `verify-card` asks the tus server, at the URL each completion recorded: a card whose
    /// uploads are all whole there is safe; an upload terminated on the server is missing
    /// (76); a server down is a check that cannot finish (69), never a verdict.
    @Test(.timeLimit(.minutes(3)))
    func verifyCardAsksTheTusServerAtEachUploadsRecordedURL() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/DJI_0001.JPG", randomBytes(300_000))
        _ = try card.write("DCIM/DJI_0002.MP4", randomBytes(Self.chunk + 77))
        _ = try card.write("DCIM/copy of 0001.JPG", try Array(Data(contentsOf: URL(fileURLWithPath: card.path + "/DCIM/DJI_0001.JPG"))))
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        #expect(try ingest([card.path], state: state, config: config).status == 0)
        func verify() throws -> IngestRun {
            try IngestRun.ingest(["verify-card", card.path, "--state-dir", state.path, "--json"], environment: [:])
        }

        let whole = try verify()
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(whole.events("verify_summary").last?.int("verified") == 3)

        // Terminated on the server (its files gone): the clip's upload is missing.
        let clip = try #require(try stored().first { $0.key.hasSuffix("DJI_0002.MP4") })
        try FileManager.default.removeItem(atPath: clip.value.path)
        try? FileManager.default.removeItem(atPath: clip.value.path + ".info")
        let lost = try verify()
        #expect(lost.status == 76, "\(lost.stderr)")
        let problems = lost.events("problem").map { "\($0.string("path") ?? "") \($0.string("code") ?? "")" }
        #expect(problems == ["DCIM/DJI_0002.MP4 object-missing"], "\(problems)")

        // The bucket check asks the server too (one HEAD an upload), and the rerun repairs.
        let checked = try ingest(["status", "--check-bucket"], state: state, config: config)
        let found = checked.events("bucket_checked").first?["problems"] as? [String] ?? []
        #expect(found.count == 1 && found.first?.contains("DJI_0002.MP4: missing") == true, "\(found)")
        #expect(checked.events("card").first?["safe_to_erase"] as? Bool == false)
        let rerun = try ingest([card.path], state: state, config: config)
        #expect(rerun.status == 0 && rerun.summary?["safe_to_erase"] as? Bool == true, "\(rerun.stderr)")
        #expect(try verify().status == 0)

        server.stop()
        let down = try verify()
        #expect(down.status == 69, "\(down.stderr)")
        #expect(down.events("verify_summary").last?["safe_to_erase"] as? Bool == false)
    }

    /// A kill -9 while a 48 MiB file streams to the server, at three points, then `ingest
    /// resume`: the server's offset is where sending goes on, so the bytes sent after the
    /// kill are what the server lacked, never more than one chunk beyond it.
    @Test(.timeLimit(.minutes(5)), arguments: [0.2, 0.5, 0.8])
    func aKilledUploadResumesFromTheServersOffsetAndSendsAtMostOneChunkAgain(at fraction: Double) throws {
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let size = 48 << 20
        _ = try card.write("DCIM/DJI_0100.MP4", randomBytes(size))
        let state = TemporaryDirectory()
        let config = try config("[upload]\nmax_rate = \"24MiB/s\"", url: proxy.endpoint + "/files/", in: dir)

        let running = try IngestRun.start([card.path, "--state-dir", state.path, "--json"], environment: ["INGEST_CONFIG": config])
        let target = Int(Double(size) * fraction)
        let deadline = Date().addingTimeInterval(60)
        var offset = 0
        while Date() < deadline, offset < target {
            offset = try stored().values.compactMap { $0.info["offset"] as? Int }.max() ?? 0
            usleep(20_000)
        }
        kill(running.pid, SIGKILL)
        _ = try running.wait(timeout: 10)
        usleep(300_000)  // the server writes what had arrived
        let held = try #require(try stored().values.first?.info["offset"] as? Int)
        #expect(held >= target && held < size, "killed mid-file: the server holds \(held) of \(size)")

        try proxy.resetStats()
        let resumed = try ingest(["resume"], state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let sent = try proxy.stats().bytesToUpstream
        let owed = size - held
        #expect(sent >= owed && sent <= owed + Self.chunk, "sent \(sent) bytes after the kill, the server lacked \(owed)")

        let upload = try #require(try stored().values.first)
        #expect(try stored().count == 1, "one upload, resumed, never a second")
        #expect(try xxh128sum(upload.path) == (try xxh128sums(under: card.path).values.first))
    }

    /// Resets mid-chunk and a stall between ingest and the server: every file lands whole,
    /// and each fault costs at most the chunk it cut.
    @Test(.timeLimit(.minutes(5)))
    func resetsAndStallsOnTheWayLoseNothingAndCostAtMostAChunkEach() throws {
        let proxy = try FaultProxy(
            upstreamPort: server.port,
            rules: [
                FaultRule(.reset, "PATCH", "*", every: 3, count: 3, fraction: 0.5),
                FaultRule(.stall, "PATCH", "*", after: 4, count: 1, seconds: 10),
                FaultRule(.reset, "POST", "*", after: 2, count: 1),
            ])
        defer { proxy.stop() }
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let size = 24 << 20
        _ = try card.write("DCIM/DJI_0200.MP4", randomBytes(size))
        for i in 0..<6 { _ = try card.write("DCIM/DJI_02\(10 + i).JPG", randomBytes(50_000 + i)) }
        let state = TemporaryDirectory()

        let run = try ingest([card.path], state: state, config: try config(url: proxy.endpoint + "/files/", in: dir))
        #expect(run.status == 0, "\(run.stderr)")
        let stats = try proxy.stats()
        let faults = stats.injected(.reset) + stats.injected(.stall)
        #expect(stats.injected(.reset) >= 2 && stats.injected(.stall) == 1, "the faults happened: \(stats.injected)")

        let oracle = try xxh128sums(under: card.path)
        var orphans = 0
        let uploads = try stored(orphans: &orphans)
        #expect(orphans <= 1, "one creation's answer was cut: at most one upload left to expire")
        let whole = uploads.values.filter { $0.info["offset"] as? Int == $0.info["size"] as? Int }
        #expect(Set(try whole.map { try xxh128sum($0.path) }) == Set(oracle.values), "every file is on the server, whole")
        let cardBytes = size + (0..<6).reduce(0) { $0 + 50_000 + $1 }
        #expect(
            stats.bytesToUpstream <= cardBytes + faults * Self.chunk + (1 << 20),
            "sent \(stats.bytesToUpstream) for a card of \(cardBytes) bytes through \(faults) faults")
    }

    /// `ingest check` of a tus station asks the server what it is (OPTIONS), needs no AWS
    /// credentials, and says why it skips the checks that only S3 needs.
    @Test(.timeLimit(.minutes(3)))
    func readBackOfATusCardSaysOnceThatTheServerCannotReadBackAndChecksWhatItCan() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        for i in 1...3 { _ = try card.write("DCIM/DJI_000\(i).JPG", randomBytes(100_000 * i)) }
        let config = try config(in: dir)
        let state = TemporaryDirectory()
        #expect(try ingest([card.path], state: state, config: config).status == 0)

        let labels = try ingest(["verify-card", card.path], state: state, config: config)
        let checked = try ingest(["verify-card", card.path, "--read-back"], state: state, config: config)
        #expect(checked.status == labels.status, "the read-back changes no verdict it cannot give: \(checked.stderr)")
        let unavailable = checked.events("read_back_unavailable")
        #expect(unavailable.count == 1, "said once, not per file: \(unavailable)")
        #expect(unavailable.first?.string("destination")?.contains("tus") == true, "\(unavailable)")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary.int("read_back_bytes") == 0)
        #expect((summary["read_back_unavailable"] as? [String])?.count == 1)
        #expect(summary.int("files") == 3)
    }

    @Test(.timeLimit(.minutes(1)))
    func checkOfATusStationAsksTheServerAndNeedsNoAWSCredentials() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let run = try IngestRun.ingest(
            ["check", "--json", "--no-station", "--state-dir", state.path],
            environment: ["INGEST_CONFIG": try config(in: dir), "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "HOME": dir.path])
        #expect(run.status == 0, "\(run.result.stdoutText)\(run.stderr)")
        var statuses: [String: String] = [:]
        for event in run.events("check") {
            if let name = event.string("check") { statuses[name] = event.string("status") }
        }
        #expect(statuses["credentials"] == "pass" && statuses["bucket"] == "pass", "\(statuses)")
        #expect(statuses["conditional_write"] == "skip" && statuses["clock"] == "skip", "\(statuses)")

        server.stop()
        let down = try IngestRun.ingest(
            ["check", "--json", "--no-station", "--state-dir", state.path], environment: ["INGEST_CONFIG": try config(in: dir)])
        #expect(down.status == 69, "a server that does not answer: unavailable (\(down.status))")
    }

    /// `ingest abort` of a pending tus upload terminates it on the server (DELETE).
    @Test(.timeLimit(.minutes(3)))
    func abortTerminatesAPendingUploadOnTheServer() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/DJI_0300.MP4", randomBytes(24 << 20))
        let state = TemporaryDirectory()
        let config = try config("[upload]\nmax_rate = \"4MiB/s\"", in: dir)
        let running = try IngestRun.start([card.path, "--state-dir", state.path, "--json"], environment: ["INGEST_CONFIG": config])
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, (try stored().values.compactMap { $0.info["offset"] as? Int }.max() ?? 0) < Self.chunk {
            usleep(20_000)
        }
        kill(running.pid, SIGKILL)
        _ = try running.wait(timeout: 10)
        #expect(try stored().count == 1)

        let pending = try ingest(["status"], state: state, config: config).events("pending_upload")
        let id = try #require(pending.first?.string("upload_id"), "\(pending)")
        let aborted = try ingest(["abort", id], state: state, config: config)
        #expect(aborted.status == 0, "\(aborted.stderr)")
        #expect(try stored().isEmpty, "the server forgot the upload and its bytes")
    }
}
