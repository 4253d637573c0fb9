import Foundation
import Glibc
import IngestTestSupport
import Testing

/// A card's `ingest-scene.toml` is card data: the real binary refuses one it must not read or
/// trust, exits 65 without uploading anything of the card, never hangs on it, and never
/// repeats what it holds.
@Suite(.serialized)
final class SceneFileIngestTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS(bucket: "scene-cards") }

    /// A config without `[device] id`: the case where a card's `device` tag used to win.
    func config(in dir: TemporaryDirectory) throws -> String {
        try dir.write("ingest.toml", Array("[s3]\nstall_timeout = \"5s\"\nconnect_timeout = \"2s\"\n".utf8))
    }

    /// A card with one photo, whose scene file `makeSceneFile` creates at the given path.
    func card(_ makeSceneFile: (String) throws -> Void) throws -> TemporaryDirectory {
        let card = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/DJI_0001.JPG", randomBytes(64 << 10))
        try makeSceneFile(card.path + "/ingest-scene.toml")
        return card
    }

    func ingest(
        _ card: TemporaryDirectory, config: String, bucket: String? = nil
    ) throws -> (run: IngestRun, seconds: TimeInterval) {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        let state = TemporaryDirectory()
        let started = Date()
        let run = try IngestRun.ingest(
            [card.path, "--endpoint", server.endpoint, "--bucket", bucket ?? self.bucket, "--state-dir", state.path, "--json"],
            environment: environment, timeout: 60)
        return (run, Date().timeIntervalSince(started))
    }

    func objectKeys(in bucket: String? = nil) throws -> [String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket ?? self.bucket])["Contents"] as? [[String: Any]] ?? []
        return listed.compactMap { $0["Key"] as? String }.filter { !$0.hasPrefix(".ingest/") }  // the bucket's marker aside
    }

    /// Runs a card whose scene file must be refused: exit 65 within seconds, a message on
    /// stderr naming the file and `problem`, none of `content` anywhere in the output, and no
    /// object in the bucket.
    func expectRefused(
        _ makeSceneFile: (String) throws -> Void, problem: String, content: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let dir = TemporaryDirectory()
        let card = try card(makeSceneFile)
        let (run, seconds) = try ingest(card, config: try config(in: dir))
        #expect(run.status == 65, "\(run.stderr)", sourceLocation: sourceLocation)
        #expect(seconds < 20, "the run ended after \(seconds) s", sourceLocation: sourceLocation)
        #expect(run.stderr.contains(card.path + "/ingest-scene.toml"), "\(run.stderr)", sourceLocation: sourceLocation)
        #expect(run.stderr.contains(problem), "\(run.stderr)", sourceLocation: sourceLocation)
        for text in content {
            #expect(!run.stderr.contains(text), "stderr repeats '\(text)'", sourceLocation: sourceLocation)
            #expect(!run.result.stdoutText.contains(text), "stdout repeats '\(text)'", sourceLocation: sourceLocation)
        }
        // Still staged, safe while the file is fixed (a regular scene file is a card file too, and staged with it).
        #expect(run.events("staged").contains { $0.string("path") == "DCIM/100MEDIA/DJI_0001.JPG" },
                "the card is still staged", sourceLocation: sourceLocation)
        #expect(run.events("uploaded").isEmpty, sourceLocation: sourceLocation)
        #expect(try objectKeys().isEmpty, "nothing of the card was uploaded", sourceLocation: sourceLocation)
    }

    @Test(.timeLimit(.minutes(5)))
    func aSymlinkToDevZeroIsRefusedNotRead() throws {
        try expectRefused({ try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: "/dev/zero") },
                          problem: "symbolic link", content: [])
    }

    @Test(.timeLimit(.minutes(5)))
    func aFIFOIsRefusedAtOnceInsteadOfHangingTheRun() throws {
        try expectRefused({ #expect(mkfifo($0, 0o644) == 0) }, problem: "FIFO", content: [])
    }

    @Test(.timeLimit(.minutes(5)))
    func aSymlinkToAHostFileIsRefusedAndNothingOfItIsShown() throws {
        let host = TemporaryDirectory()
        let secret = "host-only-\(UInt32.random(in: 0...UInt32.max))"
        // A file that would parse, and one like /etc/shadow that would not: neither is followed.
        let parsing = try host.write("parsing.toml", Array("scene = \"\(secret)\"\n".utf8))
        try expectRefused({ try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: parsing) },
                          problem: "symbolic link", content: [secret])
        let shadow = try host.write("shadow", Array("root:$6$\(secret):19000:0:99999:7:::\n".utf8))
        try expectRefused({ try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: shadow) },
                          problem: "symbolic link", content: [secret, "root:"])
    }

    @Test(.timeLimit(.minutes(5)))
    func aSceneFileOver64KiBIsRefused() throws {
        let marker = "oversize-\(UInt32.random(in: 0...UInt32.max))"
        let text = "scene = \"\(marker)\"\n" + String(repeating: "# padding line\n", count: 65 * 1024 / 15 + 1)
        #expect(text.utf8.count > 65 * 1024)
        try expectRefused({ try Data(text.utf8).write(to: URL(fileURLWithPath: $0)) },
                          problem: "larger than 64 KiB", content: [marker])
    }

    @Test(.timeLimit(.minutes(5)))
    func aSceneFileCannotNameTheDevice() throws {
        let rogue = "rogue-station-\(UInt32.random(in: 0...UInt32.max))"
        try expectRefused({ try Data("[tags]\ndevice = \"\(rogue)\"\n".utf8).write(to: URL(fileURLWithPath: $0)) },
                          problem: "label 'device'", content: [rogue])
    }

    @Test(.timeLimit(.minutes(5)))
    func aNULInAValueIsRefusedNamingTheKeyNotCutShort() throws {
        // Escaped, as TOML writes it, and raw: each was cut at the NUL before.
        try expectRefused({ try Data("[tags]\nsite = \"north\\u0000evil\"\n".utf8).write(to: URL(fileURLWithPath: $0)) },
                          problem: "'tags.site' holds the control character U+0000", content: ["north", "evil"])
        try expectRefused({ try Data(Array("[tags]\nsite = \"north".utf8) + [0] + Array("evil\"\n".utf8)).write(to: URL(fileURLWithPath: $0)) },
                          problem: "U+0000 in the value of 'site'", content: ["north", "evil"])
    }

    @Test(.timeLimit(.minutes(5)))
    func aPlainSceneFileStillLabelsTheCard() throws {
        let dir = TemporaryDirectory()
        let card = try card { try Data("scene = \"dam-survey\"\n[tags]\nsite = \"km-12\"\n".utf8).write(to: URL(fileURLWithPath: $0)) }
        let plain = "scene-plain"  // a bucket of its own: the others must stay empty
        try server.createBucket(plain)
        let (run, _) = try ingest(card, config: try config(in: dir), bucket: plain)
        #expect(run.status == 0, "\(run.stderr)")
        let key = try #require(try objectKeys(in: plain).first { $0.hasSuffix("DJI_0001.JPG") })
        let head = try server.json(["s3api", "head-object", "--bucket", plain, "--key", key])
        let metadata = head["Metadata"] as? [String: String] ?? [:]
        #expect(metadata["scene"] == "dam-survey" && metadata["site"] == "km-12", "\(metadata)")
        #expect(metadata["device"] == nil, "no [device] id: no device label, whatever a card says")
    }
}
