import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `[upload] max_rate` end to end, against the suite's SeaweedFS: the rate the server sees,
/// measured through the fault proxy (with no rules, it only relays and counts): every byte
/// sent to SeaweedFS, over the time from the first to the last.
extension UploadTests {
    /// Six files of 10 MiB upload at once (the default concurrency: each is one PutObject),
    /// 12 s at the cap. The bytes relayed include the requests' heads and the few requests
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
        #expect(stats.connections >= sources.count, "the six uploads ran at once")
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
}
