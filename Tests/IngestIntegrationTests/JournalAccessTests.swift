import Foundation
import Glibc
import IngestTestSupport
import Testing

/// No silent zeros: every command that reads the journal fails with 73, naming the journal and
/// the fix, when it cannot open or read it; no journal at all is "nothing ingested yet", said
/// as such, never a report of zeros.
@Suite struct JournalAccessTests {
    /// A state directory that holds the journal of one ingested card (a file of 3 bytes), and
    /// that card, readable by everyone.
    private func ingestedState() throws -> (work: TemporaryDirectory, card: TemporaryDirectory, state: String) {
        let work = TemporaryDirectory(), card = TemporaryDirectory()
        try card.write("DCIM/a.jpg", [1, 2, 3])
        #expect(chmod(card.path, 0o755) == 0 && chmod(card.path + "/DCIM", 0o755) == 0 && chmod(card.path + "/DCIM/a.jpg", 0o644) == 0)
        let state = work.path + "/state"
        let staged = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state])
        #expect(staged.status == 0, "\(staged.stderr)")
        return (work, card, state)
    }

    /// Nothing of a report: no tally of files, no counts of uploads.
    private func expectNoReport(_ run: IngestRun, sourceLocation: SourceLocation = #_sourceLocation) {
        let output = run.result.stdoutText + run.stderr
        for line in ["Files:", "Staged copies:", "Uploads pending", "Uploads completed", "Resumed", "\"event\":\"status\""] {
            #expect(!output.contains(line), "a report where there is none: \(output)", sourceLocation: sourceLocation)
        }
    }

    /// `nobody` cannot enter the test's directory (mode 0700, root's), so the journal in it
    /// cannot be read: as a station's operator without sudo meets `/var/lib/ingest`.
    @Test func statusOnAStateDirectoryItCannotReadExits73NamingTheJournalAndTheFix() throws {
        let (work, _, state) = try ingestedState()
        _ = work
        let status = try IngestRun.ingest(["status", "--state-dir", state], asUser: "nobody")
        #expect(status.status == 73, "\(status.result.stdoutText)\(status.stderr)")
        #expect(status.stderr.contains("cannot read the journal \(state)/journal.sqlite: Permission denied"), "\(status.stderr)")
        #expect(status.stderr.contains("sudo ingest"), "the fix: \(status.stderr)")
        expectNoReport(status)

        let json = try IngestRun.ingest(["status", "--state-dir", state, "--json"], asUser: "nobody")
        #expect(json.status == 73)
        let error = try #require(json.events("error").first)
        #expect(error.int("exit_status") == 73)
        #expect(json.events("status").isEmpty)

        // As root, the same directory reports its card.
        let root = try IngestRun.ingest(["status", "--state-dir", state, "--json"])
        #expect(root.status == 0)
        #expect(root.events("status").first?.int("files_staged") == 1)
    }

    /// Every other command that reads the journal, as nobody on the same directory.
    @Test(arguments: ["resume", "abort", "forget", "scan", "verify-card", "status --check-bucket"])
    func everyCommandThatReadsTheJournalExits73WhenItCannot(command: String) throws {
        let (work, card, state) = try ingestedState()
        _ = work
        let arguments: [String] =
            switch command {
            case "abort", "forget": [command, "0123abcd"]
            case "scan", "verify-card": [command, card.path]
            default: command.split(separator: " ").map(String.init)
            }
        let run = try IngestRun.ingest(arguments + ["--state-dir", state], asUser: "nobody", timeout: 60)
        #expect(run.status == 73, "ingest \(command): \(run.result.stdoutText)\(run.stderr)")
        #expect(run.stderr.contains("cannot read the journal \(state)/journal.sqlite"), "\(run.stderr)")
        expectNoReport(run)
    }

    /// Not a permission: a directory where the journal should be, a file that is no database.
    @Test(arguments: ["a directory", "not a database"])
    func aJournalThatIsNoDatabaseExits73ForEveryCommandThatReadsIt(kind: String) throws {
        let work = TemporaryDirectory(), card = TemporaryDirectory()
        try card.write("DCIM/a.jpg", [1, 2, 3])
        let state = work.path + "/state"
        if kind == "a directory" {
            try FileManager.default.createDirectory(atPath: state + "/journal.sqlite", withIntermediateDirectories: true)
        } else {
            try work.write("state/journal.sqlite", Array(String(repeating: "no SQLite here\n", count: 200).utf8))
        }
        for arguments in [["status"], ["status", "--json"], ["resume"], ["scan", card.path], ["abort", "0123abcd"]] {
            let run = try IngestRun.ingest(arguments + ["--state-dir", state], timeout: 60)
            #expect(run.status == 73, "ingest \(arguments.joined(separator: " ")): \(run.result.stdoutText)\(run.stderr)")
            #expect(run.stderr.contains("cannot read the journal \(state)/journal.sqlite: "), "\(run.stderr)")
            #expect(run.stderr.contains(kind == "a directory" ? "Move it aside" : "file is not a database"), "\(run.stderr)")
            expectNoReport(run)
        }
    }

    @Test func aMissingStateDirectorySaysNothingIngestedYetAndCreatesNothing() throws {
        let work = TemporaryDirectory()
        let state = work.path + "/never-used"
        let status = try IngestRun.ingest(["status", "--state-dir", state])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.result.stdoutText == """
            State directory: \(state)
            Nothing ingested yet: there is no journal at \(state)/journal.sqlite. If cards were ingested on this \
            station, name the state directory they were ingested with (--state-dir, INGEST_STATE_DIR or state_dir).

            """)

        let json = try IngestRun.ingest(["status", "--state-dir", state, "--json"])
        #expect(json.status == 0)
        #expect(json.events.count == 1, "one event, and no status of zeros: \(json.result.stdoutText)")
        let nothing = try #require(json.events("nothing_ingested").first)
        #expect(nothing.string("state_dir") == state)
        #expect(nothing.string("journal") == state + "/journal.sqlite")

        let resume = try IngestRun.ingest(["resume", "--state-dir", state])
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(resume.stderr.contains("Nothing ingested yet: there is no journal at \(state)/journal.sqlite"))
        expectNoReport(resume)
        let resumeJSON = try IngestRun.ingest(["resume", "--state-dir", state, "--json"])
        #expect(resumeJSON.events.map { $0["event"] as? String } == ["nothing_ingested"])

        for command in ["abort", "forget", "resume"] {
            let run = try IngestRun.ingest([command, "0123abcd", "--state-dir", state])
            #expect(run.status == 64, "\(command): \(run.stderr)")
            #expect(run.stderr.contains("no upload or file with id '0123abcd': nothing ingested yet"), "\(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: state), "reading what was ingested creates no state directory")
    }

    /// A system user's home is /nonexistent: its default state directory cannot exist. It is
    /// told so, and where the station's journal is.
    @Test func aUserWithoutAHomeIsToldNothingWasIngestedThereAndWhereToLook() throws {
        let environment = ["HOME": "/nonexistent", "XDG_STATE_HOME": ""]
        let status = try IngestRun.ingest(["status"], asUser: "nobody", environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        let output = status.result.stdoutText
        #expect(output.contains("State directory: /nonexistent/.local/state/ingest"), "\(output)")
        #expect(output.contains("Nothing ingested yet: there is no journal at /nonexistent/.local/state/ingest/journal.sqlite"))
        #expect(output.contains("the station's own, /var/lib/ingest, is root's: sudo ingest status"), "\(output)")
        expectNoReport(status)

        let json = try IngestRun.ingest(["status", "--json"], asUser: "nobody", environment: environment)
        #expect(json.events("nothing_ingested").first?.string("state_dir") == "/nonexistent/.local/state/ingest")
        #expect(json.events("status").isEmpty)
    }
}
