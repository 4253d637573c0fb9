import Foundation
import IngestKit
import Testing

/// README.md is for the person who installs a station: short, no lab notebook, and what it
/// names exists. What is not for the installer lives in docs/, which it links.
@Suite struct ReadmeTests {
    static func readme() throws -> String { try Repository.text("README.md") }

    static var lines: [Substring] {
        get throws { try readme().split(separator: "\n", omittingEmptySubsequences: false) }
    }

    @Test func isAtMost350Lines() throws {
        let count = try Self.lines.count - (try Self.readme().hasSuffix("\n") ? 1 : 0)
        #expect(count <= 350, "README.md has \(count) lines: what is not for the installer goes to docs/")
    }

    /// Dated figures belong to docs/benchmarks.md's log; an example key may carry a date.
    @Test func carriesAtMostTwoDatedLines() throws {
        let dated = try Self.lines.filter { $0.contains(/20[0-9]{2}-[0-9]{2}(-[0-9]{2})?/) }
        #expect(dated.count <= 2, "README.md lines with a date (move the figures to docs/benchmarks.md): \(dated)")
    }

    @Test(arguments: ["docs/design.md", "docs/benchmarks.md", "docs/faults.md", "docs/security.md"])
    func linksTheDoc(_ path: String) throws {
        #expect(try Self.readme().contains("](\(path))"), "README.md links \(path)")
        let text = try Repository.text(path)
        #expect(text.hasPrefix("# "), "\(path) exists and has a title")
    }

    /// Every long option the README shows is one `ingest` (or one of its subcommands) takes,
    /// but for those of the other commands it quotes.
    @Test func everyOptionItShowsExists() throws {
        let others: Set<String> = ["--action", "--recursive", "--reload", "--now"]  // udevadm, aws, systemctl
        var known = try ManPageTests.longOptions([])
        for subcommand in try ManPageTests.subcommands() { known.formUnion(try ManPageTests.longOptions([subcommand])) }
        let shown = try Self.readme().matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) }
        for option in Set(shown) where !known.contains(option) && !others.contains(option) {
            Issue.record("README.md shows \(option), which no `ingest --help` lists")
        }
    }

    /// Every `ingest SUBCOMMAND` it shows is one `ingest --help` lists.
    @Test func everySubcommandItShowsExists() throws {
        let subcommands = Set(try ManPageTests.subcommands())
        #expect(subcommands.count >= 7)
        for match in try Self.readme().matches(of: /^\s*(?:sudo )?ingest ([a-z][a-z-]+)/.anchorsMatchLineEndings()) {
            let word = String(match.output.1)
            #expect(subcommands.contains(word), "README.md shows `ingest \(word)`, which `ingest --help` does not list")
        }
    }

    @Test func listsEveryExitStatus() throws {
        let readme = try Self.readme()
        for status in ExitStatus.allCases {
            #expect(readme.contains("| \(status.rawValue) |"), "README.md's table lists exit status \(status.rawValue)")
        }
    }
}
