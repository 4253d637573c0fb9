import Foundation
import IngestTestSupport
import Testing

/// "Safe to erase" only on proof, against a real SeaweedFS, tried as someone with write access
/// to the bucket would: an object replaced by other bytes of the same size with its metadata
/// (and tags) copied, a path never ingested, a card run against another bucket, a card whose
/// object went missing while the card is away. What landed is counted by downloading it.
@Suite(.serialized)
final class VerdictTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }
    let dir = TemporaryDirectory()
    let state = TemporaryDirectory()
    let card = TemporaryDirectory()
    var config = ""

    init() throws {
        server = try SeaweedFS()
        // Parts of 5 MiB: the clip is a multipart upload (streamed: its fingerprint in a tag).
        config = try server.stationConfig(device: "station-3", smallParts: true, rescan: ["bucket_check_days = 7"], in: dir)
        _ = try card.write("DCIM/100MEDIA/CLIP_0001.MP4", randomBytes((12 << 20) + 5))
        for i in 1...3 { _ = try card.write("DCIM/100MEDIA/IMG_\(1000 + i).JPG", randomBytes(30_000 * i)) }
    }

    let cardFiles = ["DCIM/100MEDIA/CLIP_0001.MP4"] + (1...3).map { "DCIM/100MEDIA/IMG_\(1000 + $0).JPG" }

    func ingest(_ arguments: [String]) throws -> IngestRun { try server.ingest(arguments, state: state.path, config: config) }

    func verify(_ path: String? = nil, stateDir: String? = nil) throws -> IngestRun {
        try IngestRun.ingest(
            ["verify-card", path ?? card.path, "--state-dir", stateDir ?? state.path, "--json"], environment: server.awsEnvironment)
    }

    func objects(in bucket: String? = nil) throws -> [String: String] {
        try server.landedObjects(in: bucket, downloadingInto: dir)
    }

    func key(of path: String, in objects: [String: String]) throws -> String {
        try #require(objects.keys.first { $0.hasSuffix("/" + path) })
    }

    /// Every card file's bytes are at a key of its own in the bucket.
    func expectEveryFileLanded(in objects: [String: String]) throws {
        let sums = Set(objects.values)
        for path in cardFiles { #expect(sums.contains(try xxh128sum(card.path + "/" + path)), "\(path) landed") }
    }

    func cardStanding(_ run: IngestRun) -> [String: Any]? { run.events("card").first }

    /// Other bytes of the same size at `key`, with the object's own metadata and tags copied:
    /// what only a read of the bytes tells apart.
    func forge(_ key: String, size: Int) throws -> String {
        let head = try server.json(["s3api", "head-object", "--bucket", bucket, "--key", key])
        let metadata = head["Metadata"] as? [String: String] ?? [:]
        let tags = try server.json(["s3api", "get-object-tagging", "--bucket", bucket, "--key", key])["TagSet"] as? [[String: String]] ?? []
        let metadataFile = try dir.write("metadata.json", Array(try JSONSerialization.data(withJSONObject: metadata)))
        let forged = try dir.write("forged-\(UUID().uuidString)", randomBytes(size))
        var arguments = ["s3api", "put-object", "--bucket", bucket, "--key", key, "--body", forged, "--metadata", "file://" + metadataFile]
        if !tags.isEmpty {
            arguments += ["--tagging", tags.map { "\($0["Key"] ?? "")=\($0["Value"] ?? "")" }.joined(separator: "&")]
        }
        let put = try server.aws(arguments)
        guard put.status == 0 else { throw CommandFailed(command: "put-object \(key)", result: put) }
        return forged
    }

    @Test(.timeLimit(.minutes(6)), arguments: ["DCIM/100MEDIA/IMG_1002.JPG", "DCIM/100MEDIA/CLIP_0001.MP4"])
    func anObjectReplacedWithItsMetadataCopiedIsChangedNeverAlreadyThereAndIsRepairedToItsAlternativeKey(path: String) throws {
        let first = try ingest([card.path])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try verify().status == 0)
        let key = try key(of: path, in: try objects())
        let size = Int(try #require(try FileManager.default.attributesOfItem(atPath: card.path + "/" + path)[.size] as? NSNumber).intValue)
        let forged = try forge(key, size: size)

        // The label says ours; the ETag recorded when the object was made says not.
        let checked = try verify()
        #expect(checked.status == 76, "\(checked.stderr)")
        let problem = try #require(checked.events("problem").first)
        #expect(problem.string("path") == path && problem.string("code") == "object-differs", "\(checked.events("problem"))")
        #expect(checked.events("verify_summary").last?["safe_to_erase"] as? Bool == false)

        let found = try ingest(["status", "--check-bucket"])
        let problems = found.events("bucket_checked").first?["problems"] as? [String] ?? []
        #expect(problems.count == 1 && problems.first?.hasPrefix(key + ": changed") == true, "\(problems)")
        #expect(cardStanding(found)?["safe_to_erase"] as? Bool == false)
        let again = try ingest(["status", "--check-bucket"])
        #expect(cardStanding(again)?["safe_to_erase"] as? Bool == false, "the next check does not adopt the forgery")

        // The rerun sends the card's bytes to the alternative key, never counting the forgery as there.
        let rerun = try ingest([card.path])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.summary?.int("already_in_bucket") == 0, "\(String(describing: rerun.summary))")
        #expect(rerun.summary?["safe_to_erase"] as? Bool == true)
        let landed = try objects()
        #expect(landed[key] == (try xxh128sum(forged)), "the other bytes stay at their key, never replaced")
        let moved = landed.filter { $0.key.contains("~") }
        let sum = try xxh128sum(card.path + "/" + path)
        #expect(moved.count == 1 && moved.values.first == sum, "\(landed.keys.sorted())")
        try expectEveryFileLanded(in: landed)
        #expect(try verify().status == 0, "proven again, at the alternative key")
    }

    @Test(.timeLimit(.minutes(5)))
    func aRerunOfAKnownCardFindsAReplacedObjectItselfAndSendsTheFileToItsAlternativeKey() throws {
        #expect(try ingest([card.path]).status == 0)
        let path = "DCIM/100MEDIA/IMG_1003.JPG"
        let key = try key(of: path, in: try objects())
        _ = try forge(key, size: 90_000)

        let rerun = try ingest([card.path])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let named = rerun.summary?["bucket_problems"] as? [String] ?? []
        #expect(named.count == 1 && named.first?.hasPrefix(key + ": changed") == true, "\(named)")
        #expect(rerun.summary?.int("already_in_bucket") == 0)
        let landed = try objects()
        #expect(landed.keys.contains { $0.contains("IMG_1003~") }, "\(landed.keys.sorted())")
        try expectEveryFileLanded(in: landed)
    }

    @Test(.timeLimit(.minutes(5)))
    func verifyCardOnAPathNeverIngestedHereOrAMountPointWithNothingMountedIsNeverSafe() throws {
        // No journal at all.
        let empty = TemporaryDirectory()
        let unknown = try verify(empty.path, stateDir: TemporaryDirectory().path)
        #expect(unknown.status == 66, "\(unknown.stderr)")
        #expect(unknown.stderr.contains("never ingested here") && unknown.stderr.contains("NOT safe to erase"), "\(unknown.stderr)")
        #expect(!unknown.stderr.contains("safe to erase\n") || unknown.stderr.contains("NOT safe"))

        // A journal that knows another card; an empty folder of the known card.
        #expect(try ingest([card.path]).status == 0)
        #expect(try verify(empty.path).status == 66)
        #expect(try verify(card.path + "/DCIM").status == 66, "a folder of a card is not the card")

        // A mount point with nothing mounted.
        let media = "/media/ingest-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: media, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: media) }
        let unmounted = try verify(media)
        #expect(unmounted.status == 66, "\(unmounted.stderr)")
        #expect(unmounted.stderr.contains("not mounted"), "\(unmounted.stderr)")
        #expect(unmounted.events("verify_summary").isEmpty, "no verdict at all")

        // A card ingested with no file is known, and may be safe.
        let bare = TemporaryDirectory()
        #expect(try ingest([bare.path]).status == 0)
        #expect(try verify(bare.path).status == 0)
    }

    @Test(.timeLimit(.minutes(5)))
    func aKnownCardRunAgainstAnotherBucketLandsThereBeforeItIsSafeThere() throws {
        #expect(try ingest([card.path]).status == 0)
        let other = bucket + "-2"
        try server.createBucket(other)

        let run = try ingest([card.path, "--bucket", other])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.summary?["safe_to_erase"] as? Bool == true)
        let landed = try objects(in: other)
        #expect(landed.count == cardFiles.count, "\(landed.keys.sorted())")
        try expectEveryFileLanded(in: landed)
        #expect(try verify().status == 0, "verified where the card last went")

        // Back to the first bucket: its objects are known there, looked at, not sent again.
        let back = try ingest([card.path])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(back.summary?.int("already_in_bucket") == cardFiles.count, "\(String(describing: back.summary))")
        #expect(back.summary?["safe_to_erase"] as? Bool == true)
    }

    @Test(.timeLimit(.minutes(5)))
    func statusJudgesACardInEachBucketFromItsObjectsThereAndALossInOneLeavesTheOtherSafe() throws {
        #expect(try ingest([card.path]).status == 0)
        let other = bucket + "-b"
        try server.createBucket(other)
        #expect(try ingest([card.path, "--bucket", other]).status == 0)

        func verdicts(_ run: IngestRun) -> [String: Bool] {
            Dictionary(uniqueKeysWithValues: run.events("card").map { ($0.string("bucket") ?? "-", $0["safe_to_erase"] as? Bool == true) })
        }
        let both = try ingest(["status"])
        #expect(verdicts(both) == [bucket: true, other: true], "\(both.events("card"))")
        #expect(both.events("status").first?.int("card_verdicts") == 2)
        let text = try server.ingest(["status"], state: state.path, config: config, json: false)
        let lines = text.result.stdoutText.split(separator: "\n").filter { $0.contains("last seen") }
        #expect(lines.count == 2, "\(text.result.stdoutText)")
        #expect(lines.contains { $0.contains("s3://\(bucket) at ") && $0.hasSuffix("safe to erase") }, "\(text.result.stdoutText)")
        #expect(lines.contains { $0.contains("s3://\(other) at ") && $0.hasSuffix("safe to erase") }, "\(text.result.stdoutText)")

        // One object deleted from the second bucket: the check finds it, and only that bucket's verdict turns.
        let lost = try key(of: "DCIM/100MEDIA/IMG_1002.JPG", in: try objects(in: other))
        let deleted = try server.aws(["s3api", "delete-object", "--bucket", other, "--key", lost])
        #expect(deleted.status == 0)
        let checked = try ingest(["status", "--check-bucket"])
        let problems = checked.events("bucket_checked").first?["problems"] as? [String] ?? []
        #expect(problems.count == 1 && problems.first?.hasPrefix(lost + ": missing") == true, "\(problems)")
        #expect(verdicts(checked) == [bucket: true, other: false], "\(checked.events("card"))")
        let text2 = try server.ingest(["status"], state: state.path, config: config, json: false)
        #expect(text2.result.stdoutText.split(separator: "\n").contains { $0.contains("s3://\(other) at ") && $0.contains("NOT safe to erase") })
        let first = try objects()
        #expect(first.count == cardFiles.count, "the first bucket untouched: \(first.keys.sorted())")
    }

    @Test(.timeLimit(.minutes(5)))
    func everyRescanFailsAndNamesTheCardWhileAnObjectOfACardNotHereIsMissing() throws {
        #expect(try ingest([card.path]).status == 0)
        let key = try key(of: "DCIM/100MEDIA/IMG_1001.JPG", in: try objects())
        _ = try server.aws(["s3api", "delete-object", "--bucket", bucket, "--key", key])
        // The card is away: the rescan has no root, and the card is no mount.
        let first = try ingest(["rescan"])
        #expect(first.status == 76, "found missing: \(first.stderr)")
        // verify-card agrees: an object the journal says was there is missing (76), not a file never staged.
        let checked = try verify()
        #expect(checked.status == 76, "\(checked.stderr)")
        #expect(checked.events("problem").map { $0.string("code") } == ["object-missing"], "\(checked.events("problem"))")
        for night in 1...2 {
            let rescan = try ingest(["rescan"])
            #expect(rescan.status != 0, "night \(night): \(rescan.stderr)")
            let awaited = try #require(rescan.events("card_awaited").first, "night \(night)")
            #expect(awaited.string("path") == (try realPath(card.path)))
            #expect(awaited.string("command") == "ingest \(try realPath(card.path))")
            #expect(awaited.int("files") == 1)
        }
        // The card back: repaired, and the nights are quiet again.
        #expect(try ingest([card.path]).status == 0)
        #expect(try objects()[key] == (try xxh128sum(card.path + "/DCIM/100MEDIA/IMG_1001.JPG")))
        let quiet = try ingest(["rescan"])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.events("card_awaited").isEmpty)
    }
}
