import Foundation
import IngestTestSupport
import Testing

/// A destination is its bucket's marker (`.ingest/bucket-id`), not its URLs: two real,
/// independent SeaweedFS servers, X and Y, each with a bucket of the same name and the same
/// credentials. X is also reached as `http://localhost:PORT`, a second URL of its one gateway
/// the journal has never seen.
@Suite(.serialized)
final class DestinationIdentityTests {
    let x: SeaweedFS
    let y: SeaweedFS
    var bucket: String { x.bucket }
    /// X's gateway by a URL the journal does not record.
    var xByName: String { "http://localhost:\(x.s3Port)" }

    init() throws {
        x = try SeaweedFS()
        y = try SeaweedFS(secretKey: x.secretKey)
    }

    func config(endpoints: [String], bucket: String? = nil, in dir: TemporaryDirectory) throws -> String {
        let listed = endpoints.map { "\"\($0)\"" }.joined(separator: ", ")
        let text = """
            [s3]
            endpoint = [\(listed)]
            bucket = "\(bucket ?? self.bucket)"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            """
        return try dir.write("ingest-\(UUID().uuidString).toml", Array(text.utf8))
    }

    func ingest(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        var environment = x.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(arguments + ["--state-dir", state.path, "--json"], environment: environment)
    }

    /// Every key in `server`'s bucket, the marker included.
    func keys(in server: SeaweedFS) throws -> [String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        return listed.compactMap { $0["Key"] as? String }.sorted()
    }

    func marker(of server: SeaweedFS, in dir: TemporaryDirectory) throws -> String? {
        let path = dir.path + "/marker-\(UUID().uuidString)"
        let result = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", ".ingest/bucket-id", path])
        guard result.status == 0 else { return nil }
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    @Test(.timeLimit(.minutes(6)))
    func theJournalsClusterDecidesWhichGatewaysAreWrittenThroughNotTheirOrder() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()

        // A first card through X: a new destination, whose marker the journal records.
        let first = TemporaryDirectory()
        _ = try first.write("DCIM/A0001.JPG", randomBytes(70_000))
        let onX = try ingest([first.path], state: state, config: try config(endpoints: [x.endpoint], in: dir))
        #expect(onX.status == 0, "\(onX.stderr)")
        let xID = try #require(try marker(of: x, in: dir), "the new destination got its marker")
        let said = try #require(onX.events("new_destination").first, "\(onX.events)")
        #expect(said.string("bucket_id") == xID && said.string("endpoint") == x.endpoint)

        // Y listed first, X by a URL the journal never saw: X's marker decides, Y is foreign.
        let both = try config(endpoints: [y.endpoint, xByName], in: dir)
        let second = TemporaryDirectory()
        _ = try second.write("DCIM/B0001.JPG", randomBytes(90_000))
        let run = try ingest([second.path], state: state, config: both)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.events("new_destination").isEmpty, "X is known by its marker: \(run.events)")
        let foreign = run.events("foreign_gateway")
        #expect(foreign.count == 1, "\(foreign)")
        #expect(foreign.first?.string("gateway") == y.endpoint && foreign.first?.string("bucket_id") == xID, "\(foreign)")
        #expect(foreign.first?.string("shows")?.contains(".ingest/bucket-id") == true, "Y shows no marker: \(foreign)")
        let uploaded = run.events("uploaded").compactMap { $0.string("key") }
        #expect(uploaded.count == 1, "\(run.events)")
        #expect(try keys(in: x).contains(uploaded), "the card went to X")
        #expect(try keys(in: y).isEmpty, "nothing written through Y, not even a marker")

        // ingest check says the same, and fails naming Y.
        let check = try ingest(["check", "--no-station"], state: state, config: both)
        #expect(check.status == 78, "\(check.result.stdoutText)\(check.stderr)")
        let gateways = check.events("check").filter { $0.string("check") == "gateway" }
        let failed = gateways.filter { $0.string("status") == "fail" }.compactMap { $0.string("detail") }
        #expect(failed.count == 1 && failed.first?.contains(y.endpoint) == true && failed.first?.contains(xID) == true, "\(gateways)")
        let passed = gateways.filter { $0.string("status") == "pass" }.compactMap { $0.string("detail") }
        #expect(passed.count == 1 && passed.first?.contains(xByName) == true, "\(gateways)")
        #expect(try keys(in: y).isEmpty, "the check's conditional write went through X")

        // Y alone: a new destination, with a marker of its own.
        let third = TemporaryDirectory()
        _ = try third.write("DCIM/C0001.JPG", randomBytes(50_000))
        let onY = try ingest([third.path], state: state, config: try config(endpoints: [y.endpoint], in: dir))
        #expect(onY.status == 0, "\(onY.stderr)")
        let yID = try #require(try marker(of: y, in: dir))
        #expect(yID != xID)
        let new = try #require(onY.events("new_destination").first, "\(onY.events)")
        #expect(new.string("endpoint") == y.endpoint && new.string("bucket_id") == yID)
    }

    @Test(.timeLimit(.minutes(4)))
    func aRunWhoseGatewaysNoneShowTheRecordedBucketIsRefused() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/A0001.JPG", randomBytes(40_000))
        let onX = try ingest([card.path], state: state, config: try config(endpoints: [x.endpoint], in: dir))
        #expect(onX.status == 0, "\(onX.stderr)")
        let xID = try #require(try marker(of: x, in: dir))

        // X's URL now leads to another bucket (its marker replaced): the journal's id is not
        // shown by any configured gateway.
        let other = try dir.write("other-id", Array("another-cluster".utf8))
        #expect(try x.aws(["s3api", "put-object", "--bucket", bucket, "--key", ".ingest/bucket-id", "--body", other]).status == 0)
        let again = TemporaryDirectory()
        _ = try again.write("DCIM/B0001.JPG", randomBytes(40_000))
        let refused = try ingest([again.path], state: state, config: try config(endpoints: [x.endpoint, y.endpoint], in: dir))
        #expect(refused.status == 78, "\(refused.stderr)")
        let message = refused.stderr + refused.result.stdoutText
        #expect(message.contains(xID) && message.contains("none of the configured gateways"), "\(message)")
        #expect(try keys(in: y).isEmpty && (try keys(in: x)).filter { $0.contains("B0001") }.isEmpty, "nothing sent")
    }

    @Test(.timeLimit(.minutes(4)))
    func aKnownCardRunAgainWithABucketThatDoesNotExistExits78() throws {
        let dir = TemporaryDirectory()
        let state = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/A0001.JPG", randomBytes(40_000))
        let first = try ingest([card.path], state: state, config: try config(endpoints: [x.endpoint], in: dir))
        #expect(first.status == 0, "\(first.stderr)")

        let missing = try config(endpoints: [x.endpoint], bucket: "nosuchbucket", in: dir)
        let again = try ingest([card.path], state: state, config: missing)
        #expect(again.status == 78, "\(again.stderr)")
        let message = again.stderr + again.result.stdoutText
        #expect(message.contains("nosuchbucket") && message.contains("does not exist"), "\(message)")
        #expect(message.contains("--bucket"), "it says the fix: \(message)")
    }
}
