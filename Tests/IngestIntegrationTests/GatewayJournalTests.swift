import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The journal names a destination, not a gateway: uploads that sent their parts through a
/// gateway that then died are resumed, aborted or finished by a rerun through another
/// gateway of the same bucket. The first gateway is a loopback forwarder to the SeaweedFS
/// gateway (another gateway of the same bucket); stopping it kills that gateway.
@Suite(.serialized)
final class GatewayJournalTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    /// Small parts, sent from the journal once a file is staged; `endpoints` is `[s3]
    /// endpoint`'s list (none: given by the flags).
    func config(endpoints: [String], in dir: TemporaryDirectory) throws -> String {
        let listed = endpoints.map { "\"\($0)\"" }.joined(separator: ", ")
        let text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            parts_in_flight = 2
            stream_parts = false
            [s3]
            stall_timeout = "5s"
            connect_timeout = "2s"
            \(endpoints.isEmpty ? "" : "endpoint = [\(listed)]\nbucket = \"\(bucket)\"")
            [device]
            id = "station-7"
            """
        return try dir.write("ingest-\(endpoints.count)-\(UUID().uuidString).toml", Array(text.utf8))
    }

    func ingest(
        _ arguments: [String], state: TemporaryDirectory, config: String, environment extra: [String: String] = [:]
    ) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            arguments + ["--state-dir", state.path, "--json"], environment: environment.merging(extra) { $1 })
    }

    func object(_ key: String, into dir: TemporaryDirectory) throws -> String {
        let path = dir.path + "/download-\(UUID().uuidString)"
        let result = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, path])
        guard result.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: result) }
        return path
    }

    func pendingUploads(_ state: TemporaryDirectory, config: String) throws -> [[String: Any]] {
        try ingest(["status"], state: state, config: config).events("pending_upload")
    }

    @Test(.timeLimit(.minutes(6)))
    func uploadsPinnedToADeadGatewayResumeAbortAndRerunThroughAnother() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let gateway1 = try FaultProxy(upstreamPort: server.s3Port)
        defer { gateway1.stop() }
        let gateway2 = server.endpoint
        let both = try config(endpoints: [gateway1.endpoint, gateway2], in: dir)
        let onlySecond = try config(endpoints: [gateway2], in: dir)

        // Three cards, each killed after two of its clip's parts went through gateway 1.
        var cards: [(card: TemporaryDirectory, clip: String)] = []
        for index in 0..<3 {
            let card = TemporaryDirectory()
            let clip = try card.write("DCIM/C000\(index).MP4", randomBytes(22 << 20))
            let killed = try ingest([card.path], state: state, config: both, environment: ["INGEST_TEST_STOP_AT": "after-parts:2"])
            #expect(killed.status == SIGKILL, "\(killed.stderr)")
            cards.append((card, clip))
        }
        #expect(try gateway1.stats().forwarded >= 6, "the parts went through gateway 1")
        let pending = try pendingUploads(state, config: both)
        #expect(pending.count == 3, "\(pending)")
        func pendingID(of clip: String) -> String? {
            let name = "DCIM/" + URL(fileURLWithPath: clip).lastPathComponent
            return pending.first { $0.string("path") == name }?.string("upload_id")
        }
        gateway1.stop()

        // Resume, with a configuration naming gateway 2 only.
        let resumeID = try #require(pendingID(of: cards[0].clip))
        let resumed = try ingest(["resume", resumeID], state: state, config: onlySecond)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let resumedKey = try #require(resumed.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(resumedKey, into: dir)) == (try xxh128sum(cards[0].clip)))

        // Abort, the same.
        let abortID = try #require(pendingID(of: cards[1].clip))
        let aborted = try ingest(["abort", abortID], state: state, config: onlySecond)
        #expect(aborted.status == 0, "\(aborted.stderr)")

        // A rerun of the third card given gateway 2 only: it finishes the pending upload.
        let rerun = try ingest([cards[2].card.path], state: state, config: onlySecond)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let rerunKey = try #require(
            rerun.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("C0002.MP4") })
        #expect(try xxh128sum(try object(rerunKey, into: dir)) == (try xxh128sum(cards[2].clip)))

        #expect(try server.openMultipartUploads(bucket: bucket).isEmpty)
        #expect(try pendingUploads(state, config: onlySecond).isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func checkSaysOfEachGatewayWhetherItAnswersAndShowsTheSameBucket() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let forwarder = try FaultProxy(upstreamPort: server.s3Port)
        defer { forwarder.stop() }
        let closedPort = try #require(try SeaweedFS.freePorts(1).first)
        let dead = "http://127.0.0.1:\(closedPort)"
        let config = try config(endpoints: [], in: dir)
        let run = try ingest(
            ["check", "--no-station", "--endpoint", forwarder.endpoint, "--endpoint", dead, "--endpoint", server.endpoint,
             "--bucket", bucket], state: state, config: config)
        #expect(run.status == 0, "\(run.result.stdoutText)\(run.stderr)")
        let lines = run.events("check").filter { $0.string("check") == "gateway" }
        #expect(lines.count == 3, "\(lines)")
        let marker = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", ".ingest/bucket-id", dir.path + "/id"])
        #expect(marker.status != 0, "the check writes no marker: the first run does")
        let passed = lines.filter { $0.string("status") == "pass" }.compactMap { $0.string("detail") }
        #expect(passed.count == 2 && passed.allSatisfy { $0.contains("none yet") }, "\(lines)")

        // Once a run wrote it, each gateway that answers shows it.
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/A0001.JPG", randomBytes(30_000))
        let ingested = try ingest(
            [card.path, "--endpoint", forwarder.endpoint, "--endpoint", server.endpoint, "--bucket", bucket], state: state,
            config: config)
        #expect(ingested.status == 0, "\(ingested.stderr)")
        #expect(try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", ".ingest/bucket-id", dir.path + "/id"]).status == 0)
        let id = try String(contentsOfFile: dir.path + "/id", encoding: .utf8)
        let again = try ingest(
            ["check", "--no-station", "--endpoint", forwarder.endpoint, "--endpoint", dead, "--endpoint", server.endpoint,
             "--bucket", bucket], state: state, config: config)
        #expect(again.status == 0, "\(again.result.stdoutText)\(again.stderr)")
        let shown = again.events("check").filter { $0.string("check") == "gateway" && $0.string("status") == "pass" }
        #expect(shown.count == 2 && shown.allSatisfy { $0.string("detail")?.contains(id) == true }, "\(shown)")
        let warned = lines.filter { $0.string("status") == "warn" }.compactMap { $0.string("detail") }
        #expect(warned.count == 1 && warned.first?.contains(dead) == true, "\(lines)")
    }

    @Test(.timeLimit(.minutes(5)))
    func resumeEndpointPointsPendingUploadsAtANewGatewayOfTheSameBucketOnly() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let card = TemporaryDirectory()
        let clip = try card.write("DCIM/C0001.MP4", randomBytes(22 << 20))
        let gateway1 = try FaultProxy(upstreamPort: server.s3Port)
        let gateway2 = try FaultProxy(upstreamPort: server.s3Port)
        let both = try config(endpoints: [gateway1.endpoint, gateway2.endpoint], in: dir)
        let killed = try ingest([card.path], state: state, config: both, environment: ["INGEST_TEST_STOP_AT": "after-parts:2"])
        #expect(killed.status == SIGKILL, "\(killed.stderr)")
        gateway1.stop()
        gateway2.stop()
        let none = try config(endpoints: [], in: dir)

        // A gateway whose marker says another bucket is refused, and not recorded.
        let idFile = dir.path + "/id"
        #expect(try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", ".ingest/bucket-id", idFile]).status == 0)
        let other = try dir.write("other-id", Array("another-cluster".utf8))
        #expect(try server.aws(["s3api", "put-object", "--bucket", bucket, "--key", ".ingest/bucket-id", "--body", other]).status == 0)
        let refused = try ingest(["resume", "--endpoint", server.endpoint], state: state, config: none)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains(server.endpoint) && refused.stderr.contains("another bucket"), "\(refused.stderr)")
        #expect(try pendingUploads(state, config: none).count == 1)

        // The same gateway showing the journalled identity is recorded, and the upload resumes through it.
        #expect(try server.aws(["s3api", "put-object", "--bucket", bucket, "--key", ".ingest/bucket-id", "--body", idFile]).status == 0)
        let resumed = try ingest(["resume", "--endpoint", server.endpoint], state: state, config: none)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let key = try #require(resumed.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(clip)))
        #expect(try server.openMultipartUploads(bucket: bucket).isEmpty)
        #expect(try pendingUploads(state, config: none).isEmpty)
    }
}
