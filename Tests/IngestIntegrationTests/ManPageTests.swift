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

    /// The subcommands `ingest --help` lists, so that a new one is checked without being named here.
    static func subcommands() throws -> [String] {
        let help = try IngestRun.ingest(["--help"]).result.stdoutText
        guard let section = help.range(of: "SUBCOMMANDS:\n") else { return [] }
        return help[section.upperBound...].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first,
                name.allSatisfy({ $0.isLowercase || $0 == "-" })
            else { return nil }
            return String(name)
        }
    }

    @Test func everyOptionInHelpIsInTheManPage() throws {
        let page = try Self.page("ingest.1").replacingOccurrences(of: "\\-", with: "-")
        let subcommands = try Self.subcommands()
        #expect(subcommands.count >= 7, "subcommands read from ingest --help: \(subcommands)")
        for subcommand in [[]] + subcommands.map({ [$0] }) {
            let options = try Self.longOptions(subcommand)
            #expect(!options.isEmpty)
            for option in options {
                #expect(page.contains(option), "ingest.1 documents \(option) of `ingest \(subcommand.joined(separator: " ")) --help`")
            }
            if let name = subcommand.first {
                let headings = [".B \(name)\n", ".BI \(name) ", ".BR \(name) ", ".RB [ \(name) ]"]
                #expect(headings.contains { page.contains($0) }, "ingest.1 describes `ingest \(name)` under COMMANDS")
            }
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
