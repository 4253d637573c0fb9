import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// Two files of one content on a card (a clip and its copy in another folder), a kill -9
/// soon after the card is staged, and the next run: issue 50. The clip's parts were
/// streamed as it was read, so its labels lacked the fingerprint; the journal adopted the
/// copy's stream as a server-side copy of the clip, made with those labels, and every later
/// run found "other bytes (fingerprint none)" at the copy's key and left the card unsafe.
extension UploadTests {
    /// Kills at three moments after `staging_ended` (at once, while the clip's parts are
    /// still going out under the 8 MiB/s cap, and about when the copy is made), each on a
    /// card of its own; each time the next run ends the card: exit 0, two objects at the two
    /// keys, each byte for byte the card's file and carrying its fingerprint, nothing at an
    /// alternative key, and `ingest status` says the card is safe to erase.
    @Test(.timeLimit(.minutes(6)), arguments: [0.0, 1.0, 2.5])
    func aKillAfterStagingACardWithTwoIdenticalClipsLeavesTwoObjectsWithTheirFingerprintAndTheCardSafe(
        delay: Double
    ) throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let clip = randomBytes(24 << 20)
        let files = [
            "DCIM/CLIP_0001.MP4": try card.write("DCIM/CLIP_0001.MP4", clip),
            "DCIM/SUB/CLIP_copy.MP4": try card.write("DCIM/SUB/CLIP_copy.MP4", clip),
        ]
        let fingerprint = try #require(try xxh128sums(under: card.path).values.first)
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let before = Set(try cardObjects(in: bucket).compactMap { $0["Key"] as? String })

        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        let killed = try IngestRun.start(
            [card.path] + destination() + ["--state-dir", state.path, "--json", "--max-rate", "8MiB/s"], environment: environment)
        defer { if killed.isRunning { kill(killed.pid, SIGKILL) } }
        let deadline = Date().addingTimeInterval(60)
        while killed.isRunning, !killed.standardOutputSoFar.contains("\"event\":\"staging_ended\""), Date() < deadline {
            usleep(5_000)
        }
        #expect(killed.isRunning, "the run ended before it was killed: \(killed.standardErrorSoFar)")
        if delay > 0 { usleep(UInt32(delay * 1_000_000)) }
        kill(killed.pid, SIGKILL)
        _ = try killed.wait(timeout: 10)

        let again = try ingest([card.path] + destination(), state: state, config: config)
        #expect(again.status == 0, "after a kill \(delay) s after staging_ended: \(again.stderr)")

        let made = try cardObjects(in: bucket).compactMap { $0["Key"] as? String }.filter { !before.contains($0) }
        #expect(made.count == 2, "one object per file, after a kill \(delay) s after staging_ended: \(made)")
        #expect(!made.contains { $0.contains("~") }, "nothing at an alternative key: \(made)")
        for (path, source) in files {
            let key = try #require(made.first { $0.hasSuffix("/" + path) }, "no object for \(path) in \(made)")
            let downloaded = try object(key, into: dir)
            #expect(FileManager.default.contentsEqual(atPath: downloaded, andPath: source), "\(key) differs from \(path)")
            let head = try json(["s3api", "head-object", "--bucket", bucket, "--key", key])
            var labelled = (head["Metadata"] as? [String: String])?[ObjectLabelKeys.fingerprint]
            if labelled == nil { labelled = try tags(key)[ObjectLabelKeys.fingerprint] }
            #expect(labelled == fingerprint, "\(key) carries fingerprint \(labelled ?? "none"), the card's file has \(fingerprint)")
        }

        let status = try ingest(["status"], state: state, config: config)
        #expect(status.status == 0, "\(status.stderr)")
        let cards = status.events("card")
        #expect(cards.count == 1 && cards.allSatisfy { $0["safe_to_erase"] as? Bool == true }, "\(cards)")
    }
}
