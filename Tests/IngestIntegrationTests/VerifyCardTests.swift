import Foundation
import Glibc
@testable import IngestKit
import IngestTestSupport
import Testing

/// `ingest verify-card`, end to end against a real SeaweedFS: a card is ingested with the
/// built binary, then the card or the bucket is changed behind the journal's back (with
/// `touch -r` and the aws CLI as the outside hands), and the check must say so, naming the
/// file, with the exit status a script erases on (0) or not.
@Suite(.serialized)
final class VerifyCardTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }
    let dir = TemporaryDirectory()
    let state = TemporaryDirectory()
    let card = TemporaryDirectory()
    var config = ""

    init() throws {
        server = try SeaweedFS()
        // Parts of 5 MiB: the clip is a multipart upload whose parts go out as it is read,
        // so its fingerprint is in its xxh128 tag, not its metadata.
        config = try server.stationConfig(device: "station-9", smallParts: true, in: dir)
        _ = try card.write("DCIM/100MEDIA/CLIP_0001.MP4", randomBytes((12 << 20) + 3))
        for i in 1...6 { _ = try card.write("DCIM/100MEDIA/IMG_\(1000 + i).JPG", randomBytes(20_000 * i)) }
        _ = try card.write("DCIM/100MEDIA/COPY_OF_1001.JPG", try Array(Data(contentsOf: URL(fileURLWithPath: card.path + "/DCIM/100MEDIA/IMG_1001.JPG"))))
        _ = try card.write("MISC/empty.marker", [])
        _ = try card.write("MISC/notes.txt", Array("takeoff 12:03\n".utf8))
    }

    /// The files on the card, by path.
    let cardFiles = [
        "DCIM/100MEDIA/CLIP_0001.MP4", "DCIM/100MEDIA/COPY_OF_1001.JPG", "MISC/empty.marker", "MISC/notes.txt",
    ] + (1...6).map { "DCIM/100MEDIA/IMG_\(1000 + $0).JPG" }

    func ingest(_ arguments: [String]) throws -> IngestRun { try server.ingest(arguments, state: state.path, config: config) }

    /// `ingest verify-card CARD` with no configuration at all (no endpoint, no bucket: the
    /// journal has them), only the credentials in the environment.
    func verify(json: Bool = true, _ extra: [String] = []) throws -> IngestRun {
        let environment = IngestRun.environment.merging(server.awsEnvironment) { $1 }
        return IngestRun(
            result: try run(
                IngestBinary.path, ["verify-card", card.path, "--state-dir", state.path] + extra + (json ? ["--json"] : []),
                environment: environment))
    }

    func ingestCard() throws {
        let first = try ingest([card.path])
        #expect(first.status == 0, "\(first.stderr)")
    }

    /// The key of the object of the card file `path` (every file has its own, ending with its path).
    func key(of path: String) throws -> String {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        let keys = listed.compactMap { $0["Key"] as? String }.filter { $0.hasSuffix("/" + path) }
        #expect(keys.count == 1, "one object for \(path): \(keys)")
        return try #require(keys.first)
    }

    /// The problems reported, as (code, path).
    func problems(_ run: IngestRun) -> [String: String] {
        Dictionary(
            run.events("problem").compactMap { event in event.string("path").map { ($0, event.string("code") ?? "") } },
            uniquingKeysWith: { first, _ in first })
    }

    @Test(.timeLimit(.minutes(5)))
    func aCardIngestedWholeIsSafeToEraseAndExitsZero() throws {
        try ingestCard()
        let checked = try verify()
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.events("problem").isEmpty, "\(checked.events("problem"))")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary["safe_to_erase"] as? Bool == true)
        #expect(summary.int("files") == cardFiles.count)
        #expect(summary.int("verified") == cardFiles.count)
        #expect(summary.int("problems") == 0)
        #expect(summary.int("exit_status") == 0)
        #expect(summary.int("bytes") == (12 << 20) + 3 + (1...6).reduce(0) { $0 + 20_000 * $1 } + 20_000 + 14)

        // The streamed clip's fingerprint is in its tag, and the check found it there.
        let clipTags = try server.json(["s3api", "get-object-tagging", "--bucket", bucket, "--key", try key(of: "DCIM/100MEDIA/CLIP_0001.MP4")])
        let tagKeys = (clipTags["TagSet"] as? [[String: Any]] ?? []).compactMap { $0["Key"] as? String }
        #expect(tagKeys.contains("xxh128"), "the clip was streamed: its fingerprint is a tag (\(tagKeys))")

        // For people: one line that says it.
        let human = try verify(json: false, ["--no-progress"])
        #expect(human.status == 0)
        #expect(human.stderr.contains("Verified \(cardFiles.count) files"), "\(human.stderr)")
        #expect(human.stderr.contains("safe to erase"), "\(human.stderr)")
        #expect(!human.stderr.contains("not safe"), "\(human.stderr)")
    }

    @Test(.timeLimit(.minutes(5)))
    func aFileChangedWithTheSameSizeAndTimeIsFoundByItsFingerprint() throws {
        try ingestCard()
        // Other bytes, same size, and the modification time put back: only a read tells.
        let photo = card.path + "/DCIM/100MEDIA/IMG_1003.JPG"
        _ = try sh("touch -r \(shellQuoted(photo)) \(shellQuoted(dir.path + "/reference"))")
        _ = try card.write("DCIM/100MEDIA/IMG_1003.JPG", randomBytes(60_000))
        _ = try sh("touch -r \(shellQuoted(dir.path + "/reference")) \(shellQuoted(photo))")
        // And a file whose size changed, and one added since.
        _ = try card.write("MISC/notes.txt", Array("takeoff 12:03, landing 12:41\n".utf8))
        _ = try card.write("DCIM/100MEDIA/IMG_2000.JPG", randomBytes(5_000))

        let checked = try verify()
        #expect(checked.status == 1, "files changed or not ingested: exit 1 (\(checked.stderr))")
        #expect(problems(checked) == [
            "DCIM/100MEDIA/IMG_1003.JPG": "changed", "MISC/notes.txt": "changed", "DCIM/100MEDIA/IMG_2000.JPG": "not-in-journal",
        ])
        let byFingerprint = try #require(checked.events("problem").first { $0.string("path") == "DCIM/100MEDIA/IMG_1003.JPG" })
        #expect(byFingerprint.string("xxh128") == (try xxh128sum(photo)), "the fingerprint just read is the card's")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary["safe_to_erase"] as? Bool == false)
        #expect(summary.int("changed") == 2)
        #expect(summary.int("not_in_journal") == 1)
        #expect(summary.int("verified") == cardFiles.count - 2)

        let human = try verify(json: false, ["--no-progress"])
        #expect(human.status == 1)
        #expect(human.stderr.contains("changed DCIM/100MEDIA/IMG_1003.JPG"), "\(human.stderr)")
        #expect(human.stderr.contains("not safe to erase"), "\(human.stderr)")
    }

    @Test(.timeLimit(.minutes(5)))
    func anObjectDeletedOrReplacedInTheBucketIsAnIntegrityFailure() throws {
        try ingestCard()
        // Deleted.
        let deletedKey = try key(of: "DCIM/100MEDIA/IMG_1002.JPG")
        _ = try server.json(["s3api", "delete-object", "--bucket", bucket, "--key", deletedKey])
        // Replaced by other bytes of the same size, without ingest's metadata.
        let stranger = try dir.write("stranger.jpg", randomBytes(20_000 * 4))
        _ = try server.json([
            "s3api", "put-object", "--bucket", bucket, "--key", try key(of: "DCIM/100MEDIA/IMG_1004.JPG"), "--body", stranger,
        ])
        // Replaced by other bytes of the same size that carry their own (true) fingerprint.
        let impostor = try dir.write("impostor.jpg", randomBytes(20_000 * 5))
        _ = try server.json([
            "s3api", "put-object", "--bucket", bucket, "--key", try key(of: "DCIM/100MEDIA/IMG_1005.JPG"), "--body", impostor,
            "--metadata", "xxh128=\(try xxh128sum(impostor))",
        ])

        let checked = try verify()
        #expect(checked.status == 76, "objects missing or different: the integrity status (\(checked.stderr))")
        #expect(problems(checked) == [
            "DCIM/100MEDIA/IMG_1002.JPG": "object-missing", "DCIM/100MEDIA/IMG_1004.JPG": "no-fingerprint",
            "DCIM/100MEDIA/IMG_1005.JPG": "object-differs",
        ])
        let missing = try #require(checked.events("problem").first { $0.string("code") == "object-missing" })
        #expect(missing.string("key") == deletedKey, "the problem names the object's key")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary["safe_to_erase"] as? Bool == false)
        #expect(summary.int("exit_status") == 76)
        #expect(summary.int("verified") == cardFiles.count - 3)

        let human = try verify(json: false, ["--no-progress"])
        #expect(human.status == 76)
        #expect(human.stderr.contains("object-missing DCIM/100MEDIA/IMG_1002.JPG"), "\(human.stderr)")
        #expect(human.stderr.contains("3 problems"), "\(human.stderr)")
    }

    @Test(.timeLimit(.minutes(5)))
    func readBackReadsEveryByteOfACardIngestedWholeAndExitsZero() throws {
        try ingestCard()
        let checked = try verify(["--read-back"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.events("problem").isEmpty, "\(checked.events("problem"))")
        let summary = try #require(checked.events("verify_summary").last)
        let bytes = try #require(summary.int("bytes"))
        #expect(summary["read_back"] as? Bool == true)
        #expect(summary.int("read_back_files") == cardFiles.count, "the streamed clip and the empty file too")
        #expect(summary.int("read_back_bytes") == bytes, "every byte of the card was read back")

        let human = try verify(json: false, ["--no-progress", "--read-back"])
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stderr.contains("every byte read back (\(ByteCount(Int64(bytes))))"), "\(human.stderr)")
        #expect(human.stderr.contains("safe to erase"), "\(human.stderr)")

        // Without --read-back nothing is read back, and the summary says so.
        let labels = try verify()
        let plain = try #require(labels.events("verify_summary").last)
        #expect(plain["read_back"] as? Bool == false)
        #expect(plain.int("read_back_bytes") == 0)
    }

    /// A journal from before objects' identities were recorded (v15) has only the label to
    /// compare a HEAD with; the read-back is the proof then. (With the recorded ETag the HEAD
    /// finds the forgery itself: VerdictTests.)
    @Test(.timeLimit(.minutes(5)))
    func otherBytesUnderACopiedLabelPassTheHeadOfAnOldJournalButNotTheReadBack() async throws {
        try ingestCard()
        let journal = try Journal(path: state.path + "/journal.sqlite")
        try await journal.database.write { db in
            try db.execute(sql: "UPDATE upload SET etag = NULL, objectChecksum = NULL, versionID = NULL")
        }
        // Other bytes of the same size, with the file's own fingerprint copied into the
        // label, as anyone who can write the bucket can: the HEAD cannot tell.
        let photo = card.path + "/DCIM/100MEDIA/IMG_1003.JPG"
        let photoKey = try key(of: "DCIM/100MEDIA/IMG_1003.JPG")
        let impostor = try dir.write("impostor.jpg", randomBytes(60_000))
        let put = try server.aws([
            "s3api", "put-object", "--bucket", bucket, "--key", photoKey, "--body", impostor,
            "--metadata", "xxh128=\(try xxh128sum(photo))",
        ])
        #expect(put.status == 0, "\(put.stderr)")
        // And the streamed clip's object, its label in its tag, replaced the same way.
        let clip = card.path + "/DCIM/100MEDIA/CLIP_0001.MP4"
        let clipKey = try key(of: "DCIM/100MEDIA/CLIP_0001.MP4")
        let other = try dir.write("other.mp4", randomBytes((12 << 20) + 3))
        let putClip = try server.aws([
            "s3api", "put-object", "--bucket", bucket, "--key", clipKey, "--body", other,
            "--tagging", "xxh128=\(try xxh128sum(clip))",
        ])
        #expect(putClip.status == 0, "\(putClip.stderr)")

        let byLabels = try verify()
        #expect(byLabels.status == 0, "the labels alone are fooled: \(byLabels.stderr)")

        let checked = try verify(["--read-back"])
        #expect(checked.status == 76, "other bytes in the bucket: the integrity status (\(checked.stderr))")
        #expect(problems(checked) == [
            "DCIM/100MEDIA/IMG_1003.JPG": "read-back-differs", "DCIM/100MEDIA/CLIP_0001.MP4": "read-back-differs",
        ])
        let differs = try #require(checked.events("problem").first { $0.string("path") == "DCIM/100MEDIA/IMG_1003.JPG" })
        #expect(differs.string("key") == photoKey, "the problem names the object's key")
        #expect(differs.string("message")?.contains(try xxh128sum(impostor)) == true, "\(differs)")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary.int("read_back_differs") == 2)
        #expect(summary.int("read_back_files") == cardFiles.count - 2)
        #expect(summary["safe_to_erase"] as? Bool == false)

        let human = try verify(json: false, ["--no-progress", "--read-back"])
        #expect(human.status == 76)
        #expect(human.stderr.contains("read-back-differs DCIM/100MEDIA/IMG_1003.JPG"), "\(human.stderr)")
    }

    @Test(.timeLimit(.minutes(5)))
    func filesStillPendingAreNotSafeToErase() throws {
        // Staged, never uploaded.
        let staged = try ingest([card.path, "--no-upload"])
        #expect(staged.status == 0, "\(staged.stderr)")

        let checked = try verify()
        #expect(checked.status == 1, "files pending: exit 1 (\(checked.stderr))")
        #expect(problems(checked) == Dictionary(uniqueKeysWithValues: cardFiles.map { ($0, "pending") }))
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary.int("pending") == cardFiles.count)
        #expect(summary.int("verified") == 0)

        // Uploaded by the next run: safe, until a file is added to the card.
        let uploaded = try ingest([card.path])
        #expect(uploaded.status == 0, "\(uploaded.stderr)")
        #expect(try verify().status == 0)
        _ = try card.write("DCIM/101MEDIA/IMG_3000.JPG", randomBytes(1_000))
        let added = try verify()
        #expect(added.status == 1)
        #expect(problems(added) == ["DCIM/101MEDIA/IMG_3000.JPG": "not-in-journal"])
    }

    @Test(needsRoot, .timeLimit(.minutes(5)))
    func aCardGivenByItsDeviceIsMountedCheckedAndUnmounted() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let (card, oracle) = try pulledOutCard(sizeMiB: 64, label: "VERIFY_ME", small: 10)
        try card.insert()
        var environment = IngestRun.environment.merging(server.awsEnvironment) { $1 }
        environment["RUNTIME_DIRECTORY"] = ""
        let place = "/run/ingest/cards/\(card.kernelName)"
        var ingestEnvironment = environment
        ingestEnvironment["INGEST_CONFIG"] = config
        let ingested = IngestRun(
            result: try run(
                IngestBinary.path, ["--device", card.device, "--state-dir", state.path, "--json"],
                environment: ingestEnvironment))
        #expect(ingested.status == 0, "\(ingested.stderr)")

        let checked = IngestRun(
            result: try run(
                IngestBinary.path, ["verify-card", "--device", card.device, "--state-dir", state.path, "--json"],
                environment: environment))
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.events("volume").first?.string("key") == "uuid:\(card.uuid)", "the card is known by its UUID")
        #expect(checked.events("volume").first?.string("mount_point") == place, "mounted where --device mounts it")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary.int("verified") == oracle.count)
        #expect(summary["safe_to_erase"] as? Bool == true)
        #expect(try !mountPoints().contains(place), "what the check mounted, it unmounted")
        try card.detach()
    }

    @Test(.timeLimit(.minutes(5)))
    func anUnreachableDestinationEndsTheCheckWithItsOwnStatus() throws {
        try ingestCard()
        server.stop()
        let checked = try verify()
        #expect(checked.status == 69, "the endpoint cannot be reached (\(checked.stderr))")
        let summary = try #require(checked.events("verify_summary").last)
        #expect(summary["safe_to_erase"] as? Bool == false)
        #expect(!checked.events("error").isEmpty)
    }
}
