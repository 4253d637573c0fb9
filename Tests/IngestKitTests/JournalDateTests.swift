import Foundation
import GRDB
import Testing

@testable import IngestKit

/// The journal formats its dates itself (no DateFormatter, no ICU) in GRDB's own text, which
/// is the oracle: old journals read the same, and the text still sorts in time order.
@Suite struct JournalDateTests {
    @Test func datesAreStoredInTheTextGRDBWouldStore() {
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.9999),
            Date(timeIntervalSince1970: 951_782_400.5),  // 2000-02-29
            Date(timeIntervalSinceReferenceDate: 0.001), Date(),
        ]
        // Clocks since 1970 (before it, DateFormatter's own float arithmetic rounds some
        // milliseconds the other way; no journal holds such a date).
        for _ in 0..<10_000 { dates.append(Date(timeIntervalSince1970: Double.random(in: 0...4e9))) }
        for date in dates {
            #expect(JournalDate(date).databaseValue == date.databaseValue, "\(date.timeIntervalSince1970)")
        }
        #expect(JournalDate.text(Date(timeIntervalSince1970: 1_700_000_000.123)) == "2023-11-14 22:13:20.123")
    }

    @Test func theTextReadsBackAsGRDBReadsIt() throws {
        for _ in 0..<10_000 {
            let text = JournalDate.text(Date(timeIntervalSince1970: Double.random(in: 0...4e9)))
            let ours = try #require(JournalDate.parse(text), "\(text)")
            let grdb = try #require(Date.fromDatabaseValue(text.databaseValue))
            #expect(abs(ours.timeIntervalSince(grdb)) < 1e-6, "\(text)")
        }
        for malformed in ["2023-13-14 22:13:20.123", "2023-11-14 22:13:20", "2023-11-14 22:13:2x.123", ""] {
            #expect(JournalDate.parse(malformed) == nil, "\(malformed)")
        }
        // Shapes ingest never wrote are read as GRDB reads them.
        let other = try #require(JournalDate.parse("2023-11-14T22:13".databaseValue))
        #expect(other == Date.fromDatabaseValue("2023-11-14T22:13".databaseValue))
    }

    @Test func aRecordsDatesAreStoredInThatTextAndReadBack() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        let journal = try Journal(path: path)
        let seen = Date(timeIntervalSince1970: 1_700_000_000.123)
        let volume = VolumeIdentity(
            key: "uuid:1", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat", device: nil)
        try await journal.noteVolume(volume, at: seen)
        // Read with another SQLite client.
        let stored = try sh("python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT firstSeen, lastSeen FROM volume\").fetchone())' \(path)")
        #expect(stored.trimmingCharacters(in: .whitespacesAndNewlines) == "('2023-11-14 22:13:20.123', '2023-11-14 22:13:20.123')")
        let status = try await journal.summary()
        let read = try #require(status.volumes.first?.lastSeen)
        #expect(abs(read.timeIntervalSince(seen)) < 0.0005, "read back to the millisecond")
    }
}
