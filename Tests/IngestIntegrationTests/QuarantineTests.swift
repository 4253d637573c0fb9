import Foundation
import IngestTestSupport
import Testing

/// Every failure is counted: a file that can never become an object fails every run of its
/// card, is listed as quarantined with the staging it holds, and `ingest forget` releases it.
@Suite(.serialized)
final class QuarantineTests {
    let server: SeaweedFS
    let bucket = "cards"

    init() throws {
        server = try SeaweedFS()
        try server.createBucket(bucket)
    }

    deinit { server.stop() }

    func run(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(arguments + ["--state-dir", state.path, "--json"], environment: environment)
    }

    @Test(.timeLimit(.minutes(5)))
    func aFileThatCannotBeUploadedFailsEveryRunUntilItIsForgotten() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        // A key of {path} longer than S3's 1024 bytes: five folders of 220 characters.
        let deep = (0..<5).map { String(repeating: "d", count: 219) + String($0) }.joined(separator: "/") + "/x.jpg"
        let long = try card.write(deep, randomBytes(5000))
        _ = try card.write("DCIM/ok.jpg", randomBytes(5000))
        let config = try dir.write("ingest.toml", Array("[s3]\nkey_template = \"{path}\"\n".utf8))
        let state = TemporaryDirectory()
        let ingest = { try self.run([card.path, "--endpoint", self.server.endpoint, "--bucket", self.bucket], state: state, config: config) }

        let first = try ingest()
        #expect(first.status == 1, "\(first.stderr)")
        #expect(first.summary?.int("quarantined") == 1)
        #expect(first.events("failed").first?.string("reason") == "not-uploadable")
        #expect(first.events("uploaded").compactMap { $0.string("key") } == ["DCIM/ok.jpg"])

        let second = try ingest()
        #expect(second.status == 1, "a later run of the card still says so: \(second.stderr)")
        #expect(second.summary?.int("failed") == 1)

        let status = try run(["status"], state: state, config: config)
        let listed = try #require(status.events("quarantined").first)
        #expect(listed.string("kind") == "file")
        #expect(listed.string("path") == deep)
        #expect((listed.int("failures") ?? 0) >= 2)
        #expect(status.events("status").first?.int("quarantined_staged_bytes") == 5000)
        let id = try #require(listed.string("id"))
        let stagedCopy = try xxh128sum(long)
        #expect(FileManager.default.fileExists(atPath: "\(state.path)/staging/\(stagedCopy.prefix(2))/\(stagedCopy)"))

        let forgot = try run(["forget", id], state: state, config: config)
        #expect(forgot.status == 0, "\(forgot.stderr)")
        #expect(forgot.events("file_forgotten").first?.int("staged_bytes_freed") == 5000)
        #expect(!FileManager.default.fileExists(atPath: "\(state.path)/staging/\(stagedCopy.prefix(2))/\(stagedCopy)"))

        let third = try ingest()
        #expect(third.status == 0, "\(third.stderr)")
        #expect(third.summary?.int("quarantined") == 0)
        #expect(try run(["status"], state: state, config: config).events("quarantined").isEmpty)
    }
}
