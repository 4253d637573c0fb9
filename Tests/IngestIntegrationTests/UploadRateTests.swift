import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `[upload] max_rate` end to end, against the suite's SeaweedFS: the rate the server sees,
/// measured through the fault proxy (with no rules, it only relays and counts): every byte
/// sent to SeaweedFS, over the time from the first to the last.
extension UploadTests {
    /// Six files of 10 MiB (each one PutObject), 12 s at the cap, with at most the cap's 4 s
    /// worth on the wire at once (two of them). The bytes relayed include the requests' heads and the few requests
    /// around the bodies (HeadBucket, the probe of conditional writes, the HEADs that verify):
    /// a few KiB next to 60 MiB.
    @Test(.timeLimit(.minutes(2)))
    func concurrentUploadsTogetherHoldTheMaxRateAndLandWholeWhileCopyingRunsAtFullSpeed() throws {
        let card = TemporaryDirectory()
        let downloads = TemporaryDirectory()
        let state = TemporaryDirectory()
        var sources: [String: String] = [:]
        for index in 1...6 {
            let name = "DCIM/CLIP\(index).MP4"
            sources[name] = try card.write(name, randomBytes(10 << 20))
        }
        let proxy = try FaultProxy(upstreamPort: server.s3Port)
        defer { proxy.stop() }
        let config = try state.write("ingest.toml", Array("[upload]\nmax_rate = \"5MiB/s\"\n[device]\nid = \"station-7\"\n".utf8))
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config

        let process = try IngestRun.start(
            [card.path, "--endpoint", proxy.endpoint, "--bucket", bucket, "--state-dir", state.path + "/state", "--json"],
            environment: environment)
        defer { if process.isRunning { kill(process.pid, SIGKILL) } }
        // The run first reads, then writes, the bucket's marker (a new destination), before
        // the card is read: the rate is the uploads', so the proxy counts from after them.
        while process.isRunning, try proxy.stats().forwarded < 2 { usleep(10_000) }
        try proxy.resetStats()
        // Copying is not slowed by the cap: the card is staged while most of it is still to send.
        var sentWhenStaged: Int?
        while process.isRunning, sentWhenStaged == nil {
            if process.standardOutputSoFar.components(separatedBy: "\"event\":\"staged\"").count - 1 == sources.count {
                sentWhenStaged = try proxy.stats().bytesToUpstream
            }
            usleep(50_000)
        }
        let run = IngestRun(result: try process.wait(timeout: 60))
        #expect(run.status == 0, "\(run.stderr)")
        let sent = try #require(sentWhenStaged, "the run ended before its files were staged: \(run.stderr)")
        #expect(sent < 30 << 20, "\(ByteCount(sent)) of 60 MiB were sent before the card was staged")

        let stats = try proxy.stats()
        #expect(stats.bytesToUpstream >= 60 << 20)
        let rate = Double(stats.bytesToUpstream) / stats.upstreamSeconds
        let cap = Double(5 << 20)
        #expect(abs(rate - cap) <= cap / 10, "\(ByteCount(Int64(rate)))/s at the server, for a cap of 5 MiB/s")

        // Every object of the card, downloaded in one go and compared byte for byte with its file.
        let uploaded = run.events("uploaded")
        #expect(uploaded.count == sources.count)
        let cardPrefix = try #require(uploaded.first?.string("key")?.components(separatedBy: "/DCIM/").first)
        let copy = try server.aws([
            "s3", "cp", "--recursive", "--only-show-errors", "s3://\(bucket)/\(cardPrefix)/", "\(downloads.path)/\(cardPrefix)/",
        ])
        #expect(copy.status == 0, "\(copy.stderr)")
        for event in uploaded {
            let key = try #require(event.string("key"))
            let source = try #require(sources.first { key.hasSuffix("/" + $0.key) }?.value, "\(key)")
            #expect(FileManager.default.contentsEqual(atPath: downloads.path + "/" + key, andPath: source), "\(key) differs from \(source)")
        }
    }

    /// Under a cap, what shows is what leaves: the uploaded figure follows the bytes libcurl
    /// sends, not the parts acknowledged (eight 16 MiB parts sharing 5 MiB/s once stood still
    /// for 25 s), and the time left holds from the first 10 s on. A 200 MiB card: eight
    /// clips of 25 MiB, two parts each, about 40 s at the cap.
    @Test(.timeLimit(.minutes(3)))
    func underACapTheUploadedFigureGrowsEveryTwoSecondsAndTheTimeLeftHolds() throws {
        let card = TemporaryDirectory()
        for index in 1...8 { _ = try card.write("DCIM/CLIP\(index).MP4", randomBytes(25 << 20)) }
        let state = TemporaryDirectory()
        let run = try IngestRun.ingest(
            [card.path, "--endpoint", server.endpoint, "--bucket", bucket, "--state-dir", state.path, "--max-rate", "5MiB/s",
             "--json", "--progress-interval", "500ms"],
            environment: server.awsEnvironment, timeout: 150)
        #expect(run.status == 0, "\(run.stderr)")
        let total = 200 << 20
        let ended = try #require(run.summary?["seconds"] as? Double)
        let progress = run.events("progress").compactMap { event -> (seconds: Double, uploaded: Int, eta: Int?)? in
            guard let seconds = event["seconds"] as? Double, let uploaded = event["bytes_uploaded"] as? Int else { return nil }
            return (seconds, uploaded, event["eta_seconds"] as? Int)
        }
        #expect(progress.count >= 60, "one each 500 ms of a 40 s run: \(progress.count)")
        for (index, event) in progress.enumerated() where event.uploaded < total && event.seconds < ended - 2 {
            let grew = progress[(index + 1)...].contains { $0.seconds - event.seconds <= 2.05 && $0.uploaded > event.uploaded }
            #expect(grew, "stood at \(event.uploaded) bytes from \(event.seconds) s for more than 2 s")
        }
        // The time left, from 10 s on: within 20 % of what was left of the sending, or a
        // second (it is told in whole seconds). The sending ends at the first progress event
        // that counts every byte; what the run does after it (the card's history, its verdict)
        // is no part of the rate, and takes longer on a loaded machine.
        let sent = progress.first { $0.uploaded >= total }?.seconds ?? ended
        #expect(ended - sent < 10, "the run went on \(ended - sent) s after its last byte was sent")
        for event in progress where event.seconds >= 10 && event.uploaded < total {
            let left = sent - event.seconds
            let eta = try #require(event.eta, "no time left told at \(event.seconds) s")
            #expect(abs(Double(eta) - left) <= max(0.2 * left, 1), "at \(event.seconds) s: ETA \(eta) s, \(left) s were left")
        }
        let acknowledged = run.events("progress").compactMap { $0["bytes_acknowledged"] as? Int }
        #expect(acknowledged.count == progress.count && acknowledged == acknowledged.sorted())
        #expect(zip(acknowledged, progress).allSatisfy { $0 <= $1.uploaded }, "acknowledged bytes were on the wire first")
    }

    /// Ctrl-C under a cap of 2 MiB/s: the run ends within 2 s, not once its parts on the wire
    /// have crawled to their ends; it says what is pending; `ingest resume` then sends only
    /// what the server had not acknowledged (counted at the proxy), and every object lands whole.
    @Test(.timeLimit(.minutes(3)))
    func aSignalUnderACapStopsWithinTwoSecondsAndResumeSendsOnlyWhatWasNotAcknowledged() throws {
        let card = TemporaryDirectory()
        var sources: [String: String] = [:]
        for index in 1...4 {
            let name = "DCIM/CLIP\(index).MP4"
            sources[name] = try card.write(name, randomBytes(20 << 20))
        }
        let downloads = TemporaryDirectory()
        let state = TemporaryDirectory()
        let bucket = "signal-under-cap"
        try server.createBucket(bucket)
        let proxy = try FaultProxy(upstreamPort: server.s3Port)
        defer { proxy.stop() }
        let config = try state.write("ingest.toml", Array("[upload]\npart_size = \"5MiB\"\n".utf8))
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        let arguments = ["--endpoint", proxy.endpoint, "--bucket", bucket, "--state-dir", state.path + "/state"]

        let process = try IngestRun.start([card.path, "--max-rate", "2MiB/s", "--json"] + arguments, environment: environment)
        defer { if process.isRunning { kill(process.pid, SIGKILL) } }
        func acknowledgedParts() -> Int { process.standardOutputSoFar.components(separatedBy: "\"event\":\"part_uploaded\"").count - 1 }
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, acknowledgedParts() < 3, Date() < deadline { usleep(50_000) }
        #expect(process.isRunning && acknowledgedParts() >= 3, "three parts of 5 MiB at 2 MiB/s: \(process.standardErrorSoFar)")
        usleep(1_200_000)  // parts on the wire, well into their 2.5 s
        let asked = Date()
        kill(process.pid, SIGINT)
        let stopped = IngestRun(result: try process.wait(timeout: 60))
        let took = Date().timeIntervalSince(asked)
        #expect(took <= 2, "stopped \(took) s after SIGINT")
        #expect(stopped.status == SIGINT, "dies by the signal it was sent: \(stopped.stderr)")
        #expect(stopped.stderr.contains("pending") && stopped.stderr.contains("ingest resume"), "\(stopped.stderr)")
        #expect(!stopped.stderr.contains("not copied"), "the card was copied: \(stopped.stderr)")
        // The summary is the exit: 128 + SIGINT, and what stopped it.
        let summary = try #require(stopped.summary, "a stopped run still ends with its summary")
        #expect(summary["exit_status"] as? Int == 128 + Int(SIGINT), "\(summary)")
        #expect(summary["stopped_by"] as? String == "SIGINT", "\(summary)")
        // A clean stop leaves no run mark, so nothing after it reports an unclean one.
        let marks = (try? FileManager.default.contentsOfDirectory(atPath: state.path + "/state/runs")) ?? []
        #expect(marks.isEmpty, "a run stopped by SIGINT leaves no mark: \(marks)")
        let parts = stopped.events("part_uploaded").compactMap { $0["part_size"] as? Int }
        let acknowledged = parts.reduce(0, +)
        #expect(acknowledged < 80 << 20, "the stop came before the last part")

        let before = try proxy.stats().bytesToUpstream
        let resumed = try IngestRun.ingest(["resume", "--json", "--state-dir", state.path + "/state"], environment: environment, timeout: 120)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.events("recovered").allSatisfy { $0["unclean_stops"] as? Int == 0 }, "\(resumed.events("recovered"))")
        #expect(!resumed.stderr.contains("unclean stop"), "\(resumed.stderr)")
        let sent = try proxy.stats().bytesToUpstream - before
        let left = Int64(80 << 20 - acknowledged)
        // A part cut after the server had all of it is adopted by its ETag, not sent again:
        // at most what was not acknowledged, and the requests around it.
        #expect(sent > 0 && sent <= left + (1 << 20), "resume sent \(ByteCount(sent)) for \(ByteCount(left)) not acknowledged")

        let listing = try server.aws(["s3", "cp", "--recursive", "--only-show-errors", "s3://\(bucket)/", downloads.path + "/"])
        #expect(listing.status == 0, "\(listing.stderr)")
        for (name, source) in sources {
            let found = try sh("find \(shellQuoted(downloads.path)) -path '*/\(name)'").split(separator: "\n").map(String.init)
            #expect(found.count == 1 && FileManager.default.contentsEqual(atPath: found[0], andPath: source), "\(name): \(found)")
        }
    }
}
