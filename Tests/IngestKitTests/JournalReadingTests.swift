import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// The commands that only read the journal tell "nothing ingested yet" (no journal) from a
/// journal they cannot read, which is an error with its remedy (73), never an empty report.
@Suite struct JournalReadingTests {
    /// The error opening `path` for reading gives, as the commands turn it into theirs.
    private func refusal(_ path: String) throws -> (JournalError, IngestError) {
        let error = try #require(throws: JournalError.self) { try Journal.openForReading(path: path) }
        #expect(error.path == path)
        #expect(error.remedy != nil, "a remedy for the operator: \(error)")
        let ingestError = IngestError.journal(error)
        #expect(ingestError.exitStatus == .cantCreate)
        #expect(ingestError.description.hasPrefix("cannot read the journal \(path): "), "\(ingestError)")
        return (error, ingestError)
    }

    @Test func noStateDirectoryOrNoJournalInItIsNothingIngestedYet() throws {
        let dir = TemporaryDirectory()
        #expect(try Journal.openForReading(path: dir.path + "/never-made/journal.sqlite") == nil)
        #expect(try Journal.openForReading(path: dir.path + "/journal.sqlite") == nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/never-made"), "reading creates nothing")
    }

    @Test func aJournalIsReadAsItIs() async throws {
        let dir = TemporaryDirectory()
        _ = try Journal(path: dir.path + "/journal.sqlite")
        let journal = try #require(try Journal.openForReading(path: dir.path + "/journal.sqlite"))
        #expect(try await journal.summary().volumes.isEmpty)
    }

    @Test func aDirectoryWhereTheJournalShouldBeIsAnErrorNotAnEmptyJournal() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path + "/journal.sqlite", withIntermediateDirectories: false)
        let (error, ingestError) = try refusal(dir.path + "/journal.sqlite")
        #expect(error.reason == "it is a directory, not the journal's database file")
        #expect(ingestError.description.contains("Move it aside"))
    }

    @Test func aFileThatIsNotADatabaseIsAnErrorWhenOpenedNotHalfwayThroughAReport() throws {
        let dir = TemporaryDirectory()
        let path = try dir.write("journal.sqlite", Array(String(repeating: "not a database\n", count: 300).utf8))
        let (error, ingestError) = try refusal(path)
        #expect(error.reason.contains("file is not a database"), "\(error.reason)")
        #expect(ingestError.description.contains("Keep a damaged journal"))
    }

    @Test func aFileWhereTheStateDirectoryShouldBeIsAnError() throws {
        let dir = TemporaryDirectory()
        let file = try dir.write("state", [1])
        let (error, _) = try refusal(file + "/journal.sqlite")
        #expect(error.reason.contains("part of \(file) is a file, not a directory"), "\(error.reason)")
    }

    /// A user other than root looks in a state directory of their own by default: they are
    /// told where the station's journal is, and how to read it.
    @Test func nothingIngestedSaysWhereItLookedAndWhereTheStationsJournalIs() {
        let asUser = NothingIngested(statePath: "/nonexistent/.local/state/ingest", command: "status", isRoot: false)
        #expect(asUser.message.hasPrefix(
            "Nothing ingested yet: there is no journal at /nonexistent/.local/state/ingest/journal.sqlite."))
        #expect(asUser.message.contains("the station's own, /var/lib/ingest, is root's: sudo ingest status"))
        #expect(asUser.json["event"] == "nothing_ingested")
        #expect(asUser.json["state_dir"] == .string("/nonexistent/.local/state/ingest"))
        let asRoot = NothingIngested(statePath: "/var/lib/ingest", command: "status", isRoot: true)
        #expect(!asRoot.message.contains("sudo"))
        #expect(asRoot.message.contains("--state-dir, INGEST_STATE_DIR or state_dir"))
    }
}
