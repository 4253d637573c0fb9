import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

@Suite struct JournalTests {
    let volume = VolumeIdentity(
        key: "uuid:1234-ABCD", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/", fsType: "vfat",
        device: nil)

    func staged(_ path: String, size: Int64 = 10, mtime: Int64 = 1, digest: UInt64 = 1) -> StagedFile {
        StagedFile(
            file: ScannedFile(path: CardPath(path), size: size, mtime: mtime),
            fingerprint: Fingerprint(high: digest, low: digest), deduplicated: false, verified: false)
    }

    /// A scan sorts a card against the journal a batch of paths at a time
    /// (``KnownFiles``), never holding the journal's record of every file of the card.
    @Test func aScanLearnsFromTheJournalOnlyThePathsOfItsBatchThatItKnows() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        let raw = CardPath(bytes: Array("DCIM/raw-".utf8) + [0xFF, 0xFE])
        var rawFile = staged("x")
        rawFile.file.path = raw
        try await journal.record(
            [.staged(staged("DCIM/a.jpg", size: 5, mtime: 77)), .staged(rawFile),
             .failed(ScannedFile(path: CardPath("DCIM/failed.jpg"), size: 3, mtime: 1), StageFailure(kind: .vanished))],
            volumeKey: volume.key)

        let known = try journal.knownFiles(
            ofVolume: volume.key, paths: [CardPath("DCIM/a.jpg"), CardPath("DCIM/new.jpg"), raw, CardPath("DCIM/failed.jpg")])
        #expect(known == [
            CardPath("DCIM/a.jpg"): KnownFile(size: 5, mtime: 77, inode: nil, state: .staged),
            raw: KnownFile(size: 10, mtime: 1, inode: nil, state: .staged),
            CardPath("DCIM/failed.jpg"): KnownFile(size: 3, mtime: 1, inode: nil, state: .pending),
        ])
        #expect(try journal.knownFiles(ofVolume: "uuid:other", paths: [CardPath("DCIM/a.jpg")]).isEmpty)
        let sorted = try KnownFiles.journal(journal, volumeKey: volume.key).toStage([
            ScannedFile(path: CardPath("DCIM/a.jpg"), size: 5, mtime: 77), ScannedFile(path: CardPath("DCIM/a.jpg"), size: 6, mtime: 77),
            ScannedFile(path: CardPath("DCIM/new.jpg"), size: 1, mtime: 1), ScannedFile(path: CardPath("DCIM/failed.jpg"), size: 3, mtime: 1),
        ], comparingInodes: true)
        #expect(sorted == [false, true, true, true], "known and unchanged; changed; new; pending from a failure")
    }

    /// A file replaced by another of the same size and time (`cp -p` and a rename) is another
    /// file where the file system keeps inode numbers; on FAT, whose numbers change at every
    /// mount, the inode is not compared. A record from the journal (no inode) keeps the scanned one.
    @Test func aFileInAnotherInodeIsToBeStagedWhereTheFileSystemKeepsInodeNumbers() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        var scanned = staged("DCIM/a.jpg", size: 5, mtime: 77)
        scanned.file.inode = UInt64.max - 1
        try await journal.record([.staged(scanned)], volumeKey: volume.key)
        var fromJournal = staged("DCIM/a.jpg", size: 5, mtime: 77)
        fromJournal.file.inode = nil
        try await journal.record([.staged(fromJournal)], volumeKey: volume.key)
        #expect(try await journal.files(ofVolume: volume.key)[CardPath("DCIM/a.jpg")]?.inode == -2, "the bits of UInt64.max - 1")

        let known = KnownFiles.journal(journal, volumeKey: volume.key)
        var moved = scanned.file
        moved.inode = 12
        #expect(try known.toStage([scanned.file, moved], comparingInodes: true) == [false, true])
        #expect(try known.toStage([scanned.file, moved], comparingInodes: false) == [false, false])
    }

    @Test func stagedFilesAreFoundByPathWithTheirSizeTimeAndDigest() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        try await journal.record([.staged(staged("DCIM/a.jpg", size: 5, mtime: 77, digest: 9))], volumeKey: volume.key)

        let files = try await journal.files(ofVolume: volume.key)
        let record = try #require(files[CardPath("DCIM/a.jpg")])
        #expect(record.state == .staged)
        #expect(record.size == 5)
        #expect(record.mtime == 77)
        #expect(record.fingerprint == Fingerprint(high: 9, low: 9).hex)
        #expect(try await journal.files(ofVolume: "uuid:other").isEmpty)
    }

    @Test func aFailedFileStaysPendingWithItsReasonUntilItIsStaged() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        let file = ScannedFile(path: CardPath("bad.jpg"), size: 3, mtime: 1)
        let failure = StageFailure(kind: .ioError(SystemError(call: "read", errno: .ioError)))
        try await journal.record([.failed(file, failure)], volumeKey: volume.key)

        var record = try #require(try await journal.files(ofVolume: volume.key)[file.path])
        #expect(record.state == .pending)
        #expect(record.lastError == "read failed: Input/output error")

        try await journal.record([.staged(staged("bad.jpg", size: 3))], volumeKey: volume.key)
        record = try #require(try await journal.files(ofVolume: volume.key)[file.path])
        #expect(record.state == .staged)
        #expect(record.lastError == nil)
    }

    @Test func namesThatAreNotUTF8RoundTripExactly() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        let raw = CardPath(bytes: [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x6A, 0x70, 0x67])
        let file = StagedFile(
            file: ScannedFile(path: raw, size: 1, mtime: 1), fingerprint: Fingerprint(high: 1, low: 2), deduplicated: false, verified: true)
        try await journal.record([.staged(file)], volumeKey: volume.key)
        #expect(try await journal.files(ofVolume: volume.key)[raw] != nil)
    }

    @Test func summaryCountsFilesByStateAndContentOnce() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        try await journal.record(
            [.staged(staged("a", size: 10, digest: 1)), .staged(staged("b", size: 10, digest: 1)), .staged(staged("c", size: 4, digest: 2)),
             .failed(ScannedFile(path: CardPath("d"), size: 7, mtime: 1), StageFailure(kind: .vanished))],
            volumeKey: volume.key)

        let summary = try await journal.summary()
        #expect(summary.files[.staged] == .init(count: 3, bytes: 24))
        #expect(summary.files[.pending] == .init(count: 1, bytes: 7))
        #expect(summary.stagedObjects == .init(count: 2, bytes: 14))
        #expect(summary.volumes.map(\.key) == [volume.key])
        #expect(summary.needingCard.map(\.cardPath) == [CardPath("d")], "not copied: it needs its card again")
        #expect(summary.recentFailures.isEmpty)
    }

    @Test func summaryCountsOnlyTheStagedCopiesStillHeld() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        try await journal.record(
            [.staged(staged("a", size: 10, digest: 1)), .staged(staged("b", size: 4, digest: 2)),
             .staged(staged("c", size: 3, digest: 3))],
            volumeKey: volume.key)
        #expect(try await journal.summary().stagedObjects == .init(count: 3, bytes: 17))

        try await journal.noteStagedCopiesRemoved([Fingerprint(high: 1, low: 1), Fingerprint(high: 3, low: 3)])
        let summary = try await journal.summary()
        #expect(summary.stagedObjects == .init(count: 1, bytes: 4), "the deleted copies are not counted")
        #expect(try await journal.totals().stagedCopies == summary.stagedObjects, "status and the metrics agree")
    }

    @Test func aVolumeKeepsItsFirstSightingAcrossRuns() async throws {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        #expect(try await journal.noteVolume(volume, at: Date(timeIntervalSince1970: 1000)), "first seen")
        #expect(try await !journal.noteVolume(volume, at: Date(timeIntervalSince1970: 2000)), "seen before")
        let record = try #require(try await journal.summary().volumes.first)
        #expect(record.firstSeen == Date(timeIntervalSince1970: 1000))
        #expect(record.lastSeen == Date(timeIntervalSince1970: 2000))
    }

    @Test func twoJournalsOnOneFileWriteAtOnceWithoutLosingARecord() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        let first = try Journal(path: path), second = try Journal(path: path)
        try await first.noteVolume(volume)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, journal) in [first, second].enumerated() {
                group.addTask {
                    for i in 0..<200 {
                        try await journal.record([.staged(staged("j\(index)/f\(i)", digest: UInt64(index * 1000 + i)))], volumeKey: volume.key)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await first.files(ofVolume: volume.key).count == 400)
        #expect(try await second.summary().stagedObjects.count == 400)
    }

    @Test func manyProcessesCreatingOneNewJournalAtOnceAllSucceed() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do { _ = try Journal(path: path) } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 } == [])
    }

    @Test func anUnusableJournalPathIsAStateErrorNamingThePathAndWhatFailed() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/missing-dir/journal.sqlite"
        let error = try #require(#expect(throws: JournalError.self) { try Journal(path: path) })
        #expect(error == JournalError(path: path, operation: .lock, reason: "open \(path).lock: No such file or directory"))
        #expect(IngestError.journal(error).description.hasPrefix(
            "cannot use the state directory \(path): cannot lock the journal: open \(path).lock: No such file or directory."))
        #expect(IngestError.journal(error).exitStatus == .cantCreate)
    }

    @Test func aFailedWriteNamesTheJournalAndTheOperationWithSQLitesWords() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/journal.sqlite"
        _ = try Journal(path: path)
        let reader = try #require(try Journal.openForReading(path: path))
        let error = try #require(await #expect(throws: JournalError.self) { try await reader.noteVolume(volume) })
        #expect(error.path == path)
        #expect(error.operation == .write)
        #expect(error.description.hasPrefix("cannot write the journal \(path): "))
        #expect(error.reason.contains("readonly database"), "SQLite's own words: \(error.reason)")
    }
}
