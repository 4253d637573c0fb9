import Foundation
import IngestKit
import IngestTestSupport
import Testing

/// The man pages stay in step with `--help`, and render cleanly.
@Suite struct ManPageTests {
    static let manDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("man").path

    static func page(_ name: String) throws -> String {
        try String(contentsOfFile: manDirectory + "/" + name, encoding: .utf8)
    }

    /// The long options `ingest [sub] --help` lists.
    static func longOptions(_ subcommand: [String]) throws -> Set<String> {
        let help = try IngestRun.ingest(subcommand + ["--help"]).result.stdoutText
        let options = help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," || $0 == "[" || $0 == "]" })
            .filter { $0.hasPrefix("--") && $0.count > 2 }
            .map { String($0.prefix { $0 == "-" || $0.isLetter || $0.isNumber }) }
        return Set(options)
    }

    @Test(arguments: [[], ["run"], ["scan"], ["status"], ["resume"], ["abort"], ["forget"], ["ls"]])
    func everyOptionInHelpIsInTheManPage(subcommand: [String]) throws {
        let page = try Self.page("ingest.1").replacingOccurrences(of: "\\-", with: "-")
        let options = try Self.longOptions(subcommand)
        #expect(!options.isEmpty)
        for option in options {
            #expect(page.contains(option), "ingest.1 documents \(option) of `ingest \(subcommand.joined(separator: " ")) --help`")
        }
    }

    @Test func everyExitStatusIsInTheManPage() throws {
        let page = try Self.page("ingest.1")
        for status in ExitStatus.allCases {
            #expect(page.contains(".B \(status.rawValue)\n"), "ingest.1 documents exit status \(status.rawValue)")
        }
    }

    @Test func everyEnvironmentOverrideIsInBothPages() throws {
        let pages = [try Self.page("ingest.1"), try Self.page("ingest.toml.5")]
        for (variable, key) in Config.environmentOverrides {
            #expect(pages[0].contains(variable), "ingest.1 names \(variable)")
            #expect(pages[1].contains(variable), "ingest.toml.5 names \(variable)")
            #expect(pages[1].contains(".B \(key.split(separator: ".").last!)"), "ingest.toml.5 documents \(key)")
        }
    }

    @Test(arguments: ["ingest.1", "ingest.toml.5"])
    func pageRendersWithoutWarnings(name: String) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["MANWIDTH"] = "80"
        let result = try run("/usr/bin/man", ["--warnings", "-l", Self.manDirectory + "/" + name], environment: environment)
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        #expect(result.stdoutText.contains("NAME"))
    }
}
