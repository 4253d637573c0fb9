import Foundation
import IngestTestSupport
import Testing

/// Every failure is counted: a file that can never become an object fails every run of its
/// card, is listed as quarantined with the staging it holds, and `ingest forget` releases it.
@Suite(.serialized)
final class QuarantineTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    func run(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        try run(arguments, stateDir: state.path, config: config)
    }

    func run(_ arguments: [String], stateDir: String, config: String) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(arguments + ["--state-dir", stateDir, "--json"], environment: environment)
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

    /// A sparse file bigger than the whole staging disk (a few blocks on the card, a TiB by
    /// its size) between two photos used to stop every run of its card with "staging area
    /// full" (exit 73), so the photo after it never landed. It fails alone now, naming its
    /// size and the staging disk's, and is quarantined like any file that keeps failing; the
    /// photos on either side land, byte for byte.
    @Test(.timeLimit(.minutes(5)))
    func aFileLargerThanTheWholeStagingDiskFailsAloneUntilQuarantinedAndThePhotosAroundItLand() throws {
        let stagingDisk = try LoopCard(sizeMiB: 64, label: "STATE")
        let stateDir = stagingDisk.mountPoint + "/state"
        let dir = TemporaryDirectory(), card = TemporaryDirectory()
        let photos = [try card.write("DCIM/A.JPG", randomBytes(300_000)), try card.write("DCIM/C.JPG", randomBytes(400_000))]
        let giant = try card.write("DCIM/B.MP4", [])
        try sh("truncate -s 1T \(shellQuoted(giant))")
        let config = try dir.write("ingest.toml", Array("[s3]\nkey_template = \"{path}\"\n[upload]\nquarantine_after = 2\n".utf8))
        let ingest = {
            try self.run([card.path, "--endpoint", self.server.endpoint, "--bucket", self.bucket, "--reserve", "1MiB"], stateDir: stateDir, config: config)
        }

        let first = try ingest()

        #expect(first.status == 1, "one file failed, not the staging disk: \(first.stderr)")
        let failed = try #require(first.events("failed").first)
        #expect(failed.string("path") == "DCIM/B.MP4")
        #expect(failed.string("reason") == "larger-than-staging")
        let message = failed.string("message") ?? ""
        #expect(message.contains("is 1.0 TiB, more than the staging file system can ever hold (\(stateDir)/staging: "), "\(message)")
        #expect(message.contains("less the 1.0 MiB reserve") && message.contains("larger disk"), "\(message)")
        #expect(first.summary?.int("failed") == 1)
        let keys = first.events("uploaded").compactMap { $0.string("key") }
        #expect(Set(keys) == ["DCIM/A.JPG", "DCIM/C.JPG"])
        for photo in photos {
            let key = String(photo.dropFirst(card.path.count + 1))
            let download = dir.path + "/download-\(key.replacingOccurrences(of: "/", with: "_"))"
            let got = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, download])
            #expect(got.status == 0, "\(got.stderr)")
            #expect(try xxh128sum(download) == (try xxh128sum(photo)), "\(key) lands byte for byte")
        }

        let second = try ingest()
        #expect(second.status == 1, "the giant still fails: \(second.stderr)")
        #expect(second.events("failed").first?.string("reason") == "larger-than-staging")
        #expect(second.summary?.int("quarantined") == 1, "two failures in a row quarantine it")
        let listed = try #require(try run(["status"], stateDir: stateDir, config: config).events("quarantined").first)
        #expect(listed.string("path") == "DCIM/B.MP4")
    }
}
