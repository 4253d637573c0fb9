import Foundation
import IngestTestSupport
import Testing

/// The bucket is checked, not trusted: against a real SeaweedFS, an object deleted or
/// replaced behind ingest's back after its card was ingested is found by the next check
/// (`status --check-bucket`, every `rescan`), the card is no longer safe to erase, and the
/// card's next ingest sends the file again, never over the other bytes.
@Suite(.serialized)
final class BucketCheckTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    func config(roots: [String], in dir: TemporaryDirectory) throws -> String {
        try server.stationConfig(device: "station-7", rescan: ["roots = \(tomlStrings(roots))"], in: dir)
    }

    func ingest(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        try server.ingest(arguments, state: state.path, config: config)
    }

    func objects(in dir: TemporaryDirectory) throws -> [String: String] { try server.landedObjects(downloadingInto: dir) }

    func card(_ run: IngestRun) -> [String: Any]? { run.events("card").first }


    @Test(.timeLimit(.minutes(5)))
    func anObjectDeletedOrReplacedInTheBucketIsFoundTheCardIsNotSafeAndItsFileIsSentAgain() throws {
        let dir = TemporaryDirectory()
        let cardDir = TemporaryDirectory()
        let sources = try (1...3).map { try cardDir.write("DCIM/F\($0).JPG", randomBytes(40_000)) }
        let root = try realPath(cardDir.path)
        let config = try config(roots: [root], in: dir)
        let state = TemporaryDirectory()

        let first = try ingest([root], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.summary?["safe_to_erase"] as? Bool == true)
        let clean = try ingest(["status", "--check-bucket"], state: state, config: config)
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(clean.events("bucket_checked").first?.int("objects") == 3)
        #expect((clean.events("bucket_checked").first?["problems"] as? [Any])?.isEmpty == true)

        let landed = try objects(in: dir)
        let deleted = try #require(landed.keys.first { $0.hasSuffix("/DCIM/F1.JPG") })
        let replaced = try #require(landed.keys.first { $0.hasSuffix("/DCIM/F2.JPG") })
        _ = try server.aws(["s3api", "delete-object", "--bucket", bucket, "--key", deleted])
        let other = try dir.write("other.bin", randomBytes(40_000))
        _ = try server.aws(["s3api", "put-object", "--bucket", bucket, "--key", replaced, "--body", other])

        let found = try ingest(["status", "--check-bucket"], state: state, config: config)
        let problems = found.events("bucket_checked").first?["problems"] as? [String] ?? []
        #expect(problems.count == 2, "\(problems)")
        #expect(problems.contains { $0.hasPrefix(deleted + ": missing") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix(replaced + ": changed") }, "\(problems)")
        #expect(card(found)?["safe_to_erase"] as? Bool == false)

        // Found by status already: the rescan's ingest of the card sends them again.
        let rescan = try ingest(["rescan"], state: state, config: config)
        #expect(rescan.status == 0, "\(rescan.stderr)")
        let after = try objects(in: dir)
        #expect(after[deleted] == (try xxh128sum(sources[0])), "sent back to its key")
        #expect(after[replaced] == (try xxh128sum(other)), "the other bytes are never replaced")
        let moved = after.filter { $0.key.contains("/DCIM/F2~") }
        let sum = try xxh128sum(sources[1])
        #expect(moved.count == 1 && moved.values.first == sum, "\(after.keys.sorted())")
        let status = try ingest(["status"], state: state, config: config)
        #expect(card(status)?["safe_to_erase"] as? Bool == true, "\(String(describing: card(status)))")

        let quiet = try ingest(["rescan"], state: state, config: config)
        #expect(quiet.status == 0, "the next night finds nothing: \(quiet.stderr)")
        #expect((quiet.events("bucket_checked").first?["problems"] as? [Any])?.isEmpty == true)

        // Found by the rescan itself: reported, its exit status says so, and its ingest of
        // the card sends the file back the same night.
        let third = try #require(after.keys.first { $0.hasSuffix("/DCIM/F3.JPG") })
        _ = try server.aws(["s3api", "delete-object", "--bucket", bucket, "--key", third])
        let night = try ingest(["rescan"], state: state, config: config)
        #expect(night.status == 76, "\(night.stderr)")
        let found3 = night.events("bucket_checked").first?["problems"] as? [String] ?? []
        #expect(found3.count == 1 && found3.first?.hasPrefix(third + ": missing") == true, "\(found3)")
        #expect(try objects(in: dir)[third] == (try xxh128sum(sources[2])))
    }
}
