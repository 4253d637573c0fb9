import Foundation
import IngestKit
import IngestTestSupport
import Testing

/// `etc/ingest.toml.example`, installed as /etc/ingest/ingest.toml: every key of
/// ingest.toml(5), commented out, with its default; and `ingest` reads it.
@Suite struct ExampleConfigTests {
    static func example() throws -> String { try Repository.text("etc/ingest.toml.example") }

    /// The keys ingest.toml(5) describes under KEYS, as `section.key` (`state_dir` at the top).
    static func manPageKeys() throws -> Set<String> {
        let page = try Repository.text("man/ingest.toml.5")
        let body = try #require(page.range(of: "\n.SH KEYS\n"), "ingest.toml.5 has a KEYS section")
        var keys: Set<String> = []
        var section = ""
        var afterTP = false
        for line in page[body.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(".SH ") { break }
            if let match = line.wholeMatch(of: /\.SS \[([a-z0-9_]+)\]/) { section = String(match.1) }
            if afterTP, let match = line.wholeMatch(of: /\.B ([a-z_]+)/) {
                keys.insert(section.isEmpty ? String(match.1) : "\(section).\(match.1)")
            }
            afterTP = line == ".TP"
        }
        return keys
    }

    /// The settings of the example, each `# key = value` under its `# [section]`.
    static func exampleKeys() throws -> [String] {
        var keys: [String] = []
        var section = ""
        for line in try example().split(separator: "\n") {
            if let match = line.wholeMatch(of: #/# \[([a-z0-9_]+)\]/#) { section = String(match.1) }
            if let match = line.firstMatch(of: #/^# ([a-z_]+) = /#) {
                keys.append(section.isEmpty ? String(match.1) : "\(section).\(match.1)")
            }
        }
        return keys
    }

    /// The example with every setting and section switched on, but for one destination: a
    /// station sends to S3 (`[s3] endpoint` and `bucket`, `[upload] part_size`) or to a tus
    /// server (`[tus] url`), and both at once are an error.
    static func uncommented(tus: Bool = false) throws -> String {
        let otherDestination: Set<String> = tus ? ["s3.endpoint", "s3.bucket", "upload.part_size"] : ["tus.url"]
        var section = ""
        return try example().split(separator: "\n", omittingEmptySubsequences: false).map { line in
            if let match = line.wholeMatch(of: #/# \[([a-z0-9_]+)\]/#) { section = String(match.1) }
            if let match = line.firstMatch(of: #/^# ([a-z_]+) = /#), otherDestination.contains("\(section).\(match.1)") {
                return String(line)
            }
            return line.firstMatch(of: #/^# (\[[a-z0-9_]+\]$|[a-z_]+ = )/#) != nil ? String(line.dropFirst(2)) : String(line)
        }.joined(separator: "\n")
    }

    @Test func everyKeyOfTheManPageIsInTheExampleOnce() throws {
        let documented = try Self.manPageKeys()
        #expect(documented.count >= 25, "keys read from ingest.toml.5: \(documented.sorted())")
        let shown = try Self.exampleKeys()
        #expect(documented.subtracting(shown).isEmpty, "missing from the example: \(documented.subtracting(shown).sorted())")
        #expect(Set(shown).subtracting(documented).isEmpty, "not in ingest.toml.5: \(Set(shown).subtracting(documented).sorted())")
        #expect(shown.count == Set(shown).count, "each key once: \(shown)")
    }

    /// Switched on, the example changes nothing but the keys that have no default.
    @Test func theExampleShowsTheDefaults() throws {
        var parsed = try Config.parse(try Self.uncommented(), file: "ingest.toml.example")
        #expect(parsed.s3.endpoint != nil && parsed.s3.bucket != nil && parsed.device.id != nil && parsed.scene.name != nil)
        #expect(parsed.hooks.onCardDone != nil)
        parsed.source = nil
        parsed.stateDirectory = nil  // by default, /var/lib/ingest for root only
        parsed.s3.endpoint = nil
        parsed.s3.bucket = nil
        parsed.device = DeviceSettings()
        parsed.scene = SceneSettings()
        #expect(parsed.rescan.orphanUploadAge == RescanSettings().orphanUploadAge, "orphan_upload_age shows its default")
        parsed.rescan = RescanSettings()
        parsed.hooks.onCardDone = nil
        #expect(parsed.tus.headersFile != nil)
        parsed.tus.headersFile = nil
        #expect(parsed == Config())
    }

    /// Switched on for a tus server instead of S3, the example is a tus destination.
    @Test func theExampleSwitchedOnForATusServerIsATusDestination() throws {
        let parsed = try Config.parse(try Self.uncommented(tus: true), file: "ingest.toml.example")
        #expect(parsed.s3.bucket == nil)
        let target = try parsed.s3.target()
        #expect(target.tusCreationURL == parsed.tus.url)
        #expect(parsed.upload.partSize == parsed.tus.chunkSize)
    }

    @Test(arguments: [false, true])
    func ingestReadsTheExample(uncommented: Bool) throws {
        let directory = TemporaryDirectory()
        let config = try directory.write("ingest.toml", Array((uncommented ? try Self.uncommented() : try Self.example()).utf8))
        let status = try IngestRun.ingest(
            ["status", "--state-dir", directory.path + "/state"], environment: ["INGEST_CONFIG": config])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.result.stdoutText.contains("State directory: \(directory.path)/state"))
    }
}
