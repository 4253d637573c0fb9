import Foundation
import Glibc
import IngestTestSupport
import Testing

/// What the real binary does with settings that would make it say something untrue: a
/// `device` label from `--tag`, a relative path in the configuration, labels S3's metadata
/// cannot hold, a bucket name S3 reserves. Each is refused with the status that says so
/// and a message naming what to change, before anything is staged where the settings are
/// the run's own.
@Suite(.serialized)
final class RunSettingsTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS(bucket: "run-settings") }

    /// A config file of its own with `extra` after short timeouts.
    func config(in dir: TemporaryDirectory, _ extra: String = "") throws -> String {
        try dir.write(
            "ingest-\(UUID().uuidString).toml", Array(("[s3]\nstall_timeout = \"5s\"\nconnect_timeout = \"2s\"\n" + extra).utf8))
    }

    /// A card with one photo and, if given, a scene file.
    func card(sceneFile: String? = nil) throws -> TemporaryDirectory {
        let card = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/DJI_0001.JPG", randomBytes(64 << 10))
        if let sceneFile { try card.write("ingest-scene.toml", Array(sceneFile.utf8)) }
        return card
    }

    func ingest(_ card: TemporaryDirectory, _ arguments: [String], config: String, state: TemporaryDirectory) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            [card.path, "--endpoint", server.endpoint, "--bucket", bucket, "--state-dir", state.path, "--json"] + arguments,
            environment: environment, timeout: 120)
    }

    func objectKeys() throws -> [String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        return listed.compactMap { $0["Key"] as? String }.filter { !$0.hasPrefix(".ingest/") }  // the bucket's marker aside
    }

    /// Every file under the state directory's staging area, hidden folders included (the
    /// empty folders a state directory is made with aside).
    func staging(_ state: TemporaryDirectory) -> [String] {
        let root = state.path + "/staging"
        return ((try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    // MARK: the station's name

    @Test(.timeLimit(.minutes(5)))
    func theDeviceLabelComesOnlyFromDeviceIDNeverFromTagOrATagsTable() throws {
        let dir = TemporaryDirectory()
        let card = try card()
        let evil = "evil-\(UInt32.random(in: 0...UInt32.max))"
        let attempts: [(arguments: [String], config: String, source: String)] = [
            (["--tag", "device=\(evil)"], try config(in: dir), "the command line"),
            (["--tag", "DEVICE=\(evil)"], try config(in: dir, "[device]\nid = \"station-7\"\n"), "the command line"),
            ([], try config(in: dir, "[device]\ntags = { device = \"\(evil)\" }\n"), "the config's [device] section"),
            ([], try config(in: dir, "[scene]\ntags = { device = \"\(evil)\" }\n"), "the config's default scene"),
        ]
        for attempt in attempts {
            let state = TemporaryDirectory()
            let run = try ingest(card, attempt.arguments, config: attempt.config, state: state)
            #expect(run.status == 65, "\(run.stderr)")
            #expect(run.stderr.contains("label 'device' may not be set by \(attempt.source)"), "\(run.stderr)")
            #expect(run.stderr.contains("[device] id") && run.stderr.contains("Nothing was staged"), "\(run.stderr)")
            #expect(!run.stderr.contains(evil), "the value is not repeated")
            #expect(staging(state).isEmpty, "nothing staged: \(staging(state))")
        }
        #expect(try objectKeys().isEmpty)

        // The station named where it is named: the label and the key agree.
        let named = try ingest(
            card, ["--tag", "site=km-12"], config: try config(in: dir, "[device]\nid = \"station-7\"\n"),
            state: TemporaryDirectory())
        #expect(named.status == 0, "\(named.stderr)")
        let key = try #require(try objectKeys().first { $0.hasSuffix("DJI_0001.JPG") })
        #expect(key.hasPrefix("station-7/"), "\(key)")
        let head = try server.json(["s3api", "head-object", "--bucket", bucket, "--key", key])
        let metadata = head["Metadata"] as? [String: String] ?? [:]
        #expect(metadata["device"] == "station-7" && metadata["site"] == "km-12", "\(metadata)")
    }

    // MARK: paths in the configuration

    @Test(.timeLimit(.minutes(2)))
    func aRelativeStateDirInTheConfigurationIsRefusedNotTakenFromTheWorkingDirectory() throws {
        let dir = TemporaryDirectory()
        let working = TemporaryDirectory()
        let card = try card()
        let config = try config(in: dir, "")
        let relative = try dir.write("relative.toml", Array("state_dir = \"spool/ingest\"\n".utf8))
        // From a working directory of its own, as a timer or cron would start it somewhere else.
        let command = "cd \(shellQuoted(working.path)) && exec \(shellQuoted(IngestBinary.path)) "
            + "\(shellQuoted(card.path)) --no-upload"
        for (file, extra, key, value) in [
            (relative, [String: String](), "state_dir", "spool/ingest"), (config, ["INGEST_STATE_DIR": "spool"], "INGEST_STATE_DIR", "spool"),
        ] {
            var environment = IngestRun.environment.merging(extra) { $1 }
            environment["INGEST_CONFIG"] = file
            let result = try run("/bin/sh", ["-c", command], environment: environment, timeout: 60)
            #expect(result.status == 78, "\(result.stderr)")
            #expect(result.stderr.contains("key '\(key)'"), "\(result.stderr)")
            #expect(result.stderr.contains("'\(value)' is a relative path"), "\(result.stderr)")
            #expect(result.stderr.contains("absolute path") && result.stderr.contains("/var/lib/ingest"), "\(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: working.path).isEmpty, "nothing made in the working directory")
        }
    }

    // MARK: label limits

    @Test(.timeLimit(.minutes(5)))
    func labelsTooLargeForS3sMetadataAreRefusedBeforeAnythingIsStaged() throws {
        let dir = TemporaryDirectory()
        let card = try card()
        let marker = "note-\(UInt32.random(in: 0...UInt32.max))-"
        let note = marker + String(repeating: "x", count: 10 * 1024)
        let state = TemporaryDirectory()
        let run = try ingest(card, ["--tag", "note=\(note)", "--tag", "site=km-12"], config: try config(in: dir), state: state)
        #expect(run.status == 65, "\(run.stderr)")
        #expect(run.stderr.contains("the largest is 'note' from the command line"), "\(run.stderr)")
        #expect(run.stderr.contains("1536") && run.stderr.contains("Nothing was staged or uploaded"), "\(run.stderr)")
        #expect(!run.stderr.contains("xxh128") && !run.stderr.contains(marker), "\(run.stderr)")
        #expect(run.events("staged").isEmpty && run.events("failed").isEmpty)
        #expect(staging(state).isEmpty, "nothing staged: \(staging(state))")
        #expect(try objectKeys().isEmpty)

        // Labels that pass the check upload, every file of them.
        let fits = String(repeating: "x", count: 1024)
        let passing = try ingest(card, ["--tag", "note=\(fits)"], config: try config(in: dir), state: TemporaryDirectory())
        #expect(passing.status == 0, "\(passing.stderr)")
        #expect(passing.events("uploaded").count == 1)
    }

    @Test(.timeLimit(.minutes(5)))
    func aSceneFileWithThousandsOfKeysIsRefusedBeforeAnyUploadNotFileByFile() throws {
        let dir = TemporaryDirectory()
        // Keys of three characters (base 36), so that 7,000 of them fit in the scene file's 64 KiB.
        var text = "scene = \"survey\"\n[tags]\n"
        for index in 0..<7000 {
            let key = String(index, radix: 36)
            text += String(repeating: "0", count: 3 - key.count) + key + "=\"v\"\n"
        }
        #expect(text.utf8.count < 64 * 1024, "within the scene file's own limit")
        let card = try card(sceneFile: text)
        try card.write("DCIM/100MEDIA/DJI_0002.JPG", randomBytes(32 << 10))
        let state = TemporaryDirectory()
        let run = try ingest(card, [], config: try config(in: dir), state: state)
        #expect(run.status == 65, "exit 65, not 1 with each file failing: \(run.stderr)")
        #expect(run.stderr.contains("the scene file \(card.path)/ingest-scene.toml (7001 labels"), "\(run.stderr)")
        #expect(!run.stderr.contains("xxh128"), "\(run.stderr)")
        #expect(run.events("failed").isEmpty, "no file fails, none heads for quarantine")
        #expect(run.summary?.int("quarantined") == 0 && run.summary?.int("failed") == 0)
        #expect(try objectKeys().isEmpty)
    }

    // MARK: bucket names

    @Test(.timeLimit(.minutes(2)), arguments: ["xn--cards", "cards-s3alias", "cards--x-s3"])
    func aBucketNameS3ReservesIsRefusedAsReserved(name: String) throws {
        let card = try card()
        let state = TemporaryDirectory()
        let run = try IngestRun.ingest(
            [card.path, "--endpoint", server.endpoint, "--bucket", name, "--state-dir", state.path], environment: server.awsEnvironment,
            timeout: 60)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains("'\(name)' is not a valid S3 bucket name") && run.stderr.contains("S3 reserves"), "\(run.stderr)")
        #expect(staging(state).isEmpty)
    }
}
