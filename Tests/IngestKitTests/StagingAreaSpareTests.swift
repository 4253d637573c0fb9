import Foundation
import Glibc
import Testing

@testable import IngestKit

/// A copy let go after its upload leaves its name at once, and its inode is written again by
/// a later copy, of this run or the next: a card of small files allocates no inode a file.
/// This process holds the first spares under partial names of its own, and takes them back
/// without a rename; the rest, and those it still holds when its uploads end, wait in `.spare/`.
@Suite struct StagingAreaSpareTests {
    /// Stages `content` in `area` the way the stager does: a partial file, written, cut to its
    /// length, linked to its fingerprint, the partial's name removed. Returns the fingerprint
    /// and the copy's inode.
    func stage(_ content: [UInt8], in area: StagingArea) throws -> (Fingerprint, ino_t) {
        let (fd, partial, stale) = try area.createPartial()
        try content.withUnsafeBytes { try fd.write($0, at: 0, path: partial) }
        try StagingArea.cut(fd, to: Int64(content.count), stale: stale, path: partial)
        try fd.close()
        let fingerprint = Fingerprint.of(content)
        #expect(try area.link(partial: partial, as: fingerprint))
        unlink(partial)
        #expect(try contents(area.path(for: fingerprint)) == content)
        return (fingerprint, try status(area.path(for: fingerprint)).st_ino)
    }

    func status(_ path: String) throws -> stat {
        var info = stat()
        guard stat(path, &info) == 0 else { throw SystemError.last("stat", path: path) }
        return info
    }

    func contents(_ path: String) throws -> [UInt8] { try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) }

    /// `count` copies of 100 bytes staged in `area`, then let go: their inodes, now spares.
    func retiredCopies(_ count: Int, in area: StagingArea) throws -> [ino_t] {
        let copies = try (0..<count).map { _ in try stage(randomBytes(100), in: area) }
        for (copy, _) in copies { #expect(area.retire(copy, size: 100)) }
        return copies.map(\.1)
    }

    func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    /// A small copy keeps its blocks: the next copy is written over them, and one that is
    /// shorter is cut to its own length (`stage` reads it back whole).
    @Test func aRetiredSmallCopyLeavesItsNameAtOnceAndTheNextCopyIsWrittenOverItsBlocks() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let (first, inode) = try stage(randomBytes(20_000), in: area)

        #expect(area.retire(first, size: 20_000))
        #expect(!area.contains(first))
        let (_, reused) = try stage(randomBytes(12_345), in: area)
        #expect(reused == inode)
        #expect(try names(area.spares.directory).isEmpty)
        #expect(try names(area.partialDirectory).isEmpty)
    }

    /// The spare waits under a partial name of this process's, which no other process takes
    /// from, and the next copy is written into it under that name: no rename to take it.
    @Test func aCopyLetGoIsHeldUnderAPartialNameAndTheNextCopyIsWrittenUnderThatName() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let (copy, inode) = try stage(randomBytes(20_000), in: area)

        #expect(area.retire(copy, size: 20_000))
        #expect(try names(area.spares.directory).isEmpty)
        let held = try #require(try names(area.partialDirectory).first)
        #expect(held.hasPrefix("\(getpid())-") && held.hasSuffix(".partial"))
        #expect(try status(area.partialDirectory + "/" + held).st_size == 20_000)

        let (fd, partial, stale) = try area.createPartial()
        #expect(partial == area.partialDirectory + "/" + held)
        #expect(stale == 20_000)
        #expect(try fd.stat().st_ino == inode)
        try fd.close()
        unlink(partial)
    }

    /// Beyond its limit of held spares, a copy let go goes to `.spare/`; when the uploads end,
    /// the held ones follow it there, for the next run or another process.
    @Test func sparesBeyondTheHeldLimitAndThoseHeldWhenUploadsEndWaitInTheSpareDirectory() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", heldSpareLimit: 2)
        let inodes = try retiredCopies(5, in: area)
        #expect(try names(area.partialDirectory).count == 2)
        #expect(try names(area.spares.directory).count == 3)

        area.shelveHeldSpares()
        #expect(try names(area.partialDirectory).isEmpty)
        #expect(try names(area.spares.directory).count == 5)
        let later = try StagingArea(root: state.path + "/staging")
        let restaged = try (0..<5).map { _ in try stage(randomBytes(300), in: later).1 }
        #expect(Set(restaged) == Set(inodes))
    }

    /// Shelving keeps `.spare/` within its limit: what does not fit is deleted.
    @Test func heldSparesThatDoNotFitTheSpareDirectoryAreDeletedWhenShelved() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", spareLimit: 3)
        _ = try retiredCopies(5, in: area)
        #expect(try names(area.partialDirectory).count == 5)

        area.shelveHeldSpares()
        #expect(try names(area.partialDirectory).isEmpty)
        #expect(try names(area.spares.directory).count == 3)
    }

    /// A copy larger than 64 KiB gives its blocks back when it becomes a spare.
    @Test func aRetiredCopyOfMoreThan64KiBIsKeptEmpty() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let size = Int(smallCopyLimit) + 1
        let (copy, inode) = try stage(randomBytes(size), in: area)

        #expect(area.retire(copy, size: Int64(size)))
        let spare = try #require(try names(area.partialDirectory).first)
        #expect(try status(area.partialDirectory + "/" + spare).st_size == 0)
        #expect(try stage(randomBytes(100), in: area).1 == inode)
    }

    /// Before the staging disk is called full, the spares give their blocks back; a spare
    /// that is a link to another file is not emptied through.
    @Test func emptyingTheSparesFreesTheirBlocksAndLeavesLinkedFilesAlone() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", heldSpareLimit: 1)
        let copies = try (0..<3).map { _ in try stage(randomBytes(30_000), in: area).0 }
        for copy in copies { #expect(area.retire(copy, size: 30_000)) }
        let held = try #require(try names(area.partialDirectory).first)
        let outside = randomBytes(3000)
        let target = try state.write("elsewhere/precious", outside)
        #expect(symlink(target, area.spares.directory + "/1") == 0)
        #expect(link(target, area.spares.directory + "/2") == 0)

        #expect(area.emptySpares() == 3)
        let spares = try names(area.spares.directory).filter { !["1", "2"].contains($0) }
        #expect(spares.count == 2)
        for spare in spares { #expect(try status(area.spares.directory + "/" + spare).st_size == 0) }
        #expect(try status(area.partialDirectory + "/" + held).st_size == 0)
        #expect(try contents(target) == outside)
        #expect(area.emptySpares() == 0)
    }

    /// More spares than one read of the directory gives, left by one process and used by the
    /// next (a new `StagingArea` value): every one is written again, then new files are made.
    @Test func aLaterRunWritesItsCopiesIntoEverySpareAnEarlierRunLeft() throws {
        let state = TemporaryDirectory()
        let earlier = try StagingArea(root: state.path + "/staging")
        let count = 2 * SpareFiles.batch + 5
        let spares = try retiredCopies(count, in: earlier)
        earlier.shelveHeldSpares()
        #expect(try names(earlier.spares.directory).count == count)

        let later = try StagingArea(root: state.path + "/staging")
        let restaged = try (0..<count).map { _ in try stage(randomBytes(300), in: later).1 }
        #expect(Set(restaged) == Set(spares))
        #expect(try names(later.spares.directory).isEmpty)
        let (_, new) = try stage(randomBytes(300), in: later)
        #expect(!Set(restaged).contains(new))
    }

    /// A run that found no spare at its first copy stops reading the directory, but still
    /// writes into every copy it lets go afterwards, beyond the names it holds at once.
    @Test func aRunThatStartedWithNoSparesWritesIntoEveryCopyItLetGoSince() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", heldSpareLimit: 0)
        let count = 2 * SpareFiles.batch + 5
        let spares = try retiredCopies(count, in: area)

        let restaged = try (0..<count).map { _ in try stage(randomBytes(300), in: area).1 }
        #expect(Set(restaged) == Set(spares))
        #expect(try names(area.spares.directory).isEmpty)
    }

    @Test func atMostTheLimitOfSparesIsKeptAndTheRestAreDeleted() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", spareLimit: 5, heldSpareLimit: 0)
        let copies = try (0..<8).map { _ in try stage(randomBytes(100), in: area).0 }
        for copy in copies { #expect(area.retire(copy, size: 100)) }
        #expect(copies.allSatisfy { !area.contains($0) })
        #expect(try names(area.spares.directory).count == 5)
        // A later process counts what is there before keeping more.
        let later = try StagingArea(root: state.path + "/staging", spareLimit: 5)
        #expect(later.spares.newName() == nil)
        _ = later.spares.take()
        #expect(later.spares.newName() != nil)
    }

    /// A spare that is a link, symbolic or hard, is never written through: the file it
    /// points at keeps its bytes. A hard link looks like a file and goes; what is no file at
    /// all is passed over and left where it is.
    @Test func aSpareThatIsALinkToAnotherFileIsDroppedAndThatFileKeepsItsBytes() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let outside = randomBytes(3000)
        let target = try state.write("elsewhere/precious", outside)
        #expect(symlink(target, area.spares.directory + "/1") == 0)
        #expect(link(target, area.spares.directory + "/2") == 0)
        #expect(mkfifo(area.spares.directory + "/3", 0o600) == 0)

        let (_, inode) = try stage(randomBytes(700), in: area)
        #expect(try contents(target) == outside)
        #expect(inode != (try status(target)).st_ino)
        #expect(try names(area.spares.directory) == ["1", "3"])
        #expect(try names(area.partialDirectory).isEmpty)
    }

    @Test func aCopyAlreadyGoneCountsAsRetiredAndLeavesNoSpare() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        #expect(area.retire(Fingerprint.of(randomBytes(10)), size: 10))
        #expect(try names(area.spares.directory).isEmpty)
    }

    @Test func aSpareRemovedBehindTheAreasBackIsPassedOverForANewFile() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        #expect(area.retire(try stage(randomBytes(100), in: area).0, size: 100))
        for name in try names(area.spares.directory) { unlink(area.spares.directory + "/" + name) }
        _ = try stage(randomBytes(5000), in: area)
    }

    /// Waits, at most 10 s, for `directory` to hold nothing: what another process deletes.
    func emptied(_ directory: String) throws -> Bool {
        try whenDirectoryChanges(directory) { try names(directory).isEmpty }
    }

    /// A large copy is not kept: it leaves its name at once and is deleted by a process of
    /// its own, so a run never waits while the file system frees its blocks.
    @Test func aLargeCopyLetGoLeavesItsNameAtOnceAndIsDeletedApartNotKept() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging", heldSpareLimit: 0, freedApartFrom: 4096)
        let (large, _) = try stage(randomBytes(10_000), in: area)
        let (small, inode) = try stage(randomBytes(4000), in: area)

        #expect(area.retire(large, size: 10_000))
        #expect(!area.contains(large))
        #expect(try emptied(area.freeingDirectory))
        #expect(try names(area.spares.directory).isEmpty)

        #expect(area.retire(small, size: 4000))
        #expect(try names(area.spares.directory).count == 1)
        #expect(try stage(randomBytes(9000), in: area).1 == inode)
    }

    /// A kill between a large copy's move into `.freeing/` and its deletion leaves it there:
    /// the next run, or `ingest rescan`, deletes it.
    @Test func aCopyAKilledRunLeftInFreeingIsDeletedByTheNext() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        _ = try state.write("staging/.freeing/123", randomBytes(5000))
        _ = try state.write("staging/.freeing/456", randomBytes(7000))

        let later = try StagingArea(root: state.path + "/staging")
        #expect(later.freeLeftovers() == 2)
        #expect(try emptied(area.freeingDirectory))
        #expect(later.freeLeftovers() == 0)
    }
}
