import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

/// Collects a run's outcomes (the stager reports from its writer thread).
final class OutcomeLog: Sendable {
    private let outcomes = Mutex<[StageOutcome]>([])
    func add(_ outcome: StageOutcome) { outcomes.withLock { $0.append(outcome) } }
    var all: [StageOutcome] { outcomes.withLock { $0 } }
    var staged: [StagedFile] { all.compactMap { if case .staged(let s) = $0 { s } else { nil } } }
    var failed: [(ScannedFile, StageFailure)] { all.compactMap { if case let .failed(f, e) = $0 { (f, e) } else { nil } } }
}

@Suite struct StagerTests {
    /// Small chunks so that files cross many chunk boundaries.
    static let chunk = 4096

    func scanFiles(_ root: String) throws -> [ScannedFile] {
        var files: [ScannedFile] = []
        try Scanner().scan(root: root) { if case .file(let file) = $0 { files.append(file) } }
        return files
    }

    func stage(
        _ card: TemporaryDirectory, into state: TemporaryDirectory, settings: StageSettings? = nil, files: [ScannedFile]? = nil
    ) throws -> (StagingArea, OutcomeLog) {
        let area = try StagingArea(root: state.path + "/staging")
        let stager = Stager(area: area, settings: settings ?? StageSettings(reserve: 0, chunkSize: Self.chunk, chunks: 3))
        let log = OutcomeLog()
        try stager.run(root: card.path, files: files ?? scanFiles(card.path), volumeName: "test card") { log.add($0) }
        return (area, log)
    }

    func partials(_ area: StagingArea) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: area.partialDirectory)
    }

    /// The card read through the page cache or direct; chunks of whole blocks, and chunks
    /// that are not (direct reads and writes turned off mid-file). Staging onto a file system
    /// without direct I/O is DirectIOTests' (ramfs, which refuses it, reports no free space).
    @Test(arguments: [false, true], [chunk, chunk + 1000])
    func stagesEveryFileUnderTheDigestXXH128SumPrints(directReads: Bool, chunk: Int) throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        let sizes = [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 5, 4096 - 1, 4096 + 1, 1 << 20]
        for (i, size) in sizes.enumerated() { try card.write("DCIM/file\(i).bin", randomBytes(size)) }

        var settings = StageSettings(reserve: 0, chunkSize: chunk, chunks: 3)
        settings.directReads = directReads
        let (area, log) = try stage(card, into: state, settings: settings)

        #expect(log.failed.isEmpty)
        #expect(log.staged.count == sizes.count)
        for staged in log.staged {
            let source = card.path + "/" + staged.file.path.display
            #expect(staged.fingerprint.hex == (try xxh128sum(source)), "\(staged.file.path)")
            let copy = area.path(for: staged.fingerprint)
            #expect(copy.hasSuffix("/\(staged.fingerprint.hex.prefix(2))/\(staged.fingerprint.hex)"))
            #expect(FileManager.default.contentsEqual(atPath: source, andPath: copy))
            #expect(staged.file.size == Int64(sizes[Int(staged.file.path.display.dropFirst(9).dropLast(4))!]))
        }
        #expect(try partials(area).isEmpty)
    }

    /// ramfs refuses direct I/O: a card there is read through the page cache even when the
    /// run asks for direct reads.
    @Test(needsRoot) func aCardOnAFileSystemWithoutDirectIOIsReadThroughTheCache() throws {
        let card = try RamfsDirectory(), state = TemporaryDirectory()
        let sources = try [100, 3 * Self.chunk, 1 << 20].enumerated().map { try card.directory.write("DCIM/\($0).bin", randomBytes($1)) }
        var settings = StageSettings(reserve: 0, chunkSize: Self.chunk, chunks: 3)
        settings.directReads = true
        let (area, log) = try stage(card.directory, into: state, settings: settings)
        #expect(log.failed.isEmpty)
        #expect(Set(log.staged.map(\.fingerprint.hex)) == Set(try sources.map(xxh128sum)))
        for staged in log.staged { #expect(FileManager.default.fileExists(atPath: area.path(for: staged.fingerprint))) }
    }

    /// A folder another program has just written is in the page cache: a file found there is
    /// read from the cache, not the disk, and its pages are left for their owner, in a run
    /// that reads the card direct (one that uploads) as in one that does not. A file not in
    /// the cache leaves nothing there (read direct, or dropped as read).
    ///
    /// What the cache holds of the warm file is made to differ from its disk blocks (written
    /// beneath the mounted file system, into the loop device's image): the staged copy's
    /// fingerprint says which the reader read.
    @Test(needsRoot, arguments: [true, false])
    func aFileAlreadyInThePageCacheIsReadFromItAndLeftThereAndAColdOneLeavesNothingThere(directReads: Bool) throws {
        let directory = TemporaryDirectory()
        let image = directory.path + "/card.img", card = directory.path + "/mnt"
        let device = try sh("""
            truncate -s 64M \(image) && mkfs.ext4 -q -F -b 4096 \(image) && mkdir -p \(card)
            losetup -f --show \(image)
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        defer { _ = try? sh("umount -l \(card) 2>/dev/null; losetup -d \(device)") }
        try sh("mount \(device) \(card)")
        let warmBytes = randomBytes(16 << 20), coldBytes = randomBytes(16 << 20)  // each 2 drop strides
        let original = try directory.write("warm-as-written", warmBytes)
        let warm = card + "/DCIM/WARM.MP4", cold = card + "/DCIM/COLD.MP4"
        try sh("mkdir \(card)/DCIM && cp \(original) \(warm)")
        try Data(coldBytes).write(to: URL(fileURLWithPath: cold))
        try sh("sync")
        for path in [warm, cold] { try FileDescriptor(path: path, flags: .readOnly).dropFromCache() }
        try sh("""
            cat \(warm) >/dev/null
            block=$(filefrag -v \(warm) | awk '$1 == "0:" {sub(/\\.\\./, "", $4); print $4}')
            head -c 4096 /dev/urandom | dd of=\(image) bs=4096 seek=$block conv=notrunc status=none
            """)
        func residentBytes(_ path: String) throws -> Int? {
            Int(try sh("fincore --bytes --noheadings --output RES \(path)").trimmingCharacters(in: .whitespacesAndNewlines))
        }
        try #require(try residentBytes(warm) == warmBytes.count)
        try #require(try residentBytes(cold) == 0)

        let state = TemporaryDirectory()
        var settings = StageSettings(reserve: 0)
        settings.directReads = directReads
        let stager = Stager(area: try StagingArea(root: state.path + "/staging"), settings: settings)
        let log = OutcomeLog()
        try stager.run(root: card, files: try scanFiles(card), volumeName: "test card") { log.add($0) }

        #expect(log.failed.isEmpty)
        let staged = Dictionary(uniqueKeysWithValues: log.staged.map { ($0.file.path.display, $0.fingerprint.hex) })
        #expect(staged["DCIM/WARM.MP4"] == (try xxh128sum(original)), "read from the page cache, not the disk")
        #expect(try residentBytes(warm) == warmBytes.count, "the warm file's pages are all still cached")
        #expect(try residentBytes(cold) == 0, "the cold file left nothing in the cache")
        #expect(staged["DCIM/COLD.MP4"] == (try xxh128sum(cold)))
    }

    @Test func identicalContentIsStagedOnce() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        let bytes = randomBytes(10_000)
        try card.write("a/one.jpg", bytes)
        try card.write("b/two.jpg", bytes)

        let (area, log) = try stage(card, into: state)

        let staged = log.staged
        #expect(staged.count == 2)
        #expect(Set(staged.map(\.fingerprint)).count == 1)
        #expect(staged.filter(\.deduplicated).count == 1)
        let fanOut = area.root + "/" + staged[0].fingerprint.hex.prefix(2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fanOut) == [staged[0].fingerprint.hex])
    }

    @Test func aFileGoneBeforeItsCopyFailsAloneAndLeavesNoPartial() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("keep.jpg", randomBytes(5000))
        let gone = try card.write("gone.jpg", randomBytes(5000))
        let files = try scanFiles(card.path)
        #expect(unlink(gone) == 0)

        let (area, log) = try stage(card, into: state, files: files)

        #expect(log.staged.map(\.file.path.display) == ["keep.jpg"])
        #expect(log.failed.map(\.0.path.display) == ["gone.jpg"])
        #expect(log.failed.first?.1.kind == .vanished)
        #expect(try partials(area).isEmpty)
    }

    @Test func aFileThatGrewSinceTheScanIsCopiedAsItIsNow() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        let path = try card.write("growing.log", randomBytes(100))
        let files = try scanFiles(card.path)
        try card.write("growing.log", randomBytes(3 * Self.chunk))

        let (_, log) = try stage(card, into: state, files: files)

        let staged = try #require(log.staged.first)
        #expect(staged.file.size == Int64(3 * Self.chunk))
        #expect(staged.fingerprint.hex == (try xxh128sum(path)))
    }

    @Test func runningOutOfStagingSpaceStopsTheRunAndLeavesNothingBehind() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("a.jpg", randomBytes(1000))
        try card.write("b.jpg", randomBytes(1000))
        let settings = StageSettings(reserve: Int64(1) << 60, chunkSize: Self.chunk, chunks: 2)

        var thrown: IngestError?
        do { _ = try stage(card, into: state, settings: settings) } catch let error as IngestError { thrown = error }

        guard case .stagingFull = thrown else {
            Issue.record("expected stagingFull, got \(String(describing: thrown))")
            return
        }
        #expect(thrown?.exitStatus == .cantCreate)
        #expect(thrown?.description.contains("Nothing was lost") == true)
        let area = try StagingArea(root: state.path + "/staging")
        #expect(try partials(area).isEmpty)
        let published = try FileManager.default.contentsOfDirectory(atPath: area.root).filter { !$0.hasPrefix(".") }
        #expect(published.isEmpty)
    }

    /// A staging area on a tmpfs of `sizeMiB`, unmounted when `body` returns.
    func withSmallStagingDisk<T>(sizeMiB: Int, _ body: (TemporaryDirectory) throws -> T) throws -> T {
        let state = TemporaryDirectory()
        try sh("mount -t tmpfs -o size=\(sizeMiB)M ingest-test-staging \(shellQuoted(state.path))")
        defer { _ = try? sh("umount \(shellQuoted(state.path))") }
        return try body(state)
    }

    /// A sparse file bigger than the whole staging file system (it holds no block on the
    /// card) between two photos: it fails alone, naming its size and the disk's, before a
    /// byte of it is read; the photos on either side are staged, and nothing is left behind.
    @Test(needsRoot) func aFileLargerThanTheWholeStagingDiskFailsAloneAndTheFilesAfterItAreStaged() throws {
        let card = TemporaryDirectory()
        let first = try card.write("DCIM/A.JPG", randomBytes(70_000))
        let giant = try card.write("DCIM/B.MP4", [])
        let last = try card.write("DCIM/C.JPG", randomBytes(80_000))
        #expect(truncate(giant, 1 << 40) == 0)
        var st = stat()
        #expect(stat(giant, &st) == 0 && st.st_blocks == 0, "sparse: no block on the card")

        try withSmallStagingDisk(sizeMiB: 8) { state in
            let area = try StagingArea(root: state.path + "/staging")
            let stager = Stager(area: area, settings: StageSettings(reserve: 1 << 20, chunkSize: Self.chunk, chunks: 3))
            let log = OutcomeLog()
            try stager.run(root: card.path, files: try scanFiles(card.path), volumeName: "test card") { log.add($0) }

            #expect(Set(log.staged.map(\.fingerprint.hex)) == Set([try xxh128sum(first), try xxh128sum(last)]))
            let failure = try #require(log.failed.first)
            #expect(log.failed.map(\.0.path.display) == ["DCIM/B.MP4"])
            #expect(failure.1.kind == .largerThanStaging(size: 1 << 40, stagingPath: area.root, capacity: 8 << 20, reserve: 1 << 20))
            #expect(failure.1.code == "larger-than-staging")
            #expect(failure.1.description.contains("is 1.0 TiB, more than the staging file system can ever hold (\(area.root): 8.0 MiB"))
            #expect(stager.bytesRead.load(ordering: .relaxed) == 150_000, "not a byte of the giant is read")
            #expect(try partials(area).isEmpty)
        }
    }

    /// A file that fits the staging disk but not the space free on it now: the space comes
    /// back as uploads finish, so the run stops (exit 73), not the file.
    @Test(needsRoot) func aFileThatFitsTheStagingDiskButNotItsFreeSpaceStopsTheRun() throws {
        let card = TemporaryDirectory()
        try card.write("DCIM/A.JPG", randomBytes(3 << 20))
        try withSmallStagingDisk(sizeMiB: 8) { state in
            try sh("head -c 6M /dev/zero > \(shellQuoted(state.path))/filler")
            var thrown: IngestError?
            do { _ = try stage(card, into: state) } catch let error as IngestError { thrown = error }

            guard case .stagingFull(_, let needed, _, _) = thrown else {
                Issue.record("expected stagingFull, got \(String(describing: thrown))")
                return
            }
            #expect(needed == 3 << 20)
            #expect(thrown?.exitStatus == .cantCreate)
        }
    }

    @Test(arguments: [VerifyMode.staged, .both])
    func verificationReadsTheCopyBackAndMarksItVerified(mode: VerifyMode) throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("a.jpg", randomBytes(3 * Self.chunk + 7))
        let settings = StageSettings(reserve: 0, verify: mode, chunkSize: Self.chunk, chunks: 2)

        let (_, log) = try stage(card, into: state, settings: settings)

        #expect(log.staged.count == 1)
        #expect(log.staged.allSatisfy { $0.verified })
    }

    @Test func countsEveryFileItOpensOnTheCard() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        for i in 0..<5 { try card.write("f\(i)", randomBytes(100)) }
        let area = try StagingArea(root: state.path + "/staging")
        let stager = Stager(area: area, settings: StageSettings(reserve: 0))
        try stager.run(root: card.path, files: try scanFiles(card.path), volumeName: "card") { _ in }
        #expect(stager.filesOpened.load(ordering: .relaxed) == 5)
        #expect(stager.bytesRead.load(ordering: .relaxed) == 500)
    }

    @Test func partialCopiesOfDeadProcessesAreRemovedAndLiveOnesKept() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        // A process that has exited: its pid is free (until reused, which a test cannot see).
        let child = try ChildProcess("/bin/true", [])
        _ = try child.wait()
        let dead = "\(area.partialDirectory)/\(child.pid)-1.partial"
        let live = "\(area.partialDirectory)/\(getpid())-2.partial"
        #expect(FileManager.default.createFile(atPath: dead, contents: Data([1])))
        #expect(FileManager.default.createFile(atPath: live, contents: Data([2])))

        #expect(area.removeAbandonedPartials() == 1)
        #expect(try partials(area) == ["\(getpid())-2.partial"])
    }

    /// `/proc/self/mem` is a regular file whose first read fails with EIO: a bad sector
    /// that any test can have.
    static func unreadableAtOffsetZero(_ count: Int) -> [ScannedFile] {
        (0..<count).map { _ in ScannedFile(path: CardPath("mem"), size: 0, mtime: 0) }
    }

    @Test(.timeLimit(.minutes(1)))
    func readErrorsOnManyFilesNeverExhaustTheBufferPool() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let stager = Stager(area: area, settings: StageSettings(reserve: 0, chunkSize: 4096, chunks: 2))
        let log = OutcomeLog()
        try stager.run(root: "/proc/self", files: Self.unreadableAtOffsetZero(20), volumeName: "bad card") { log.add($0) }
        #expect(log.failed.count == 20)
        #expect(log.failed.allSatisfy { $0.1.code == "io-error" })
        #expect(try partials(area).isEmpty)
    }

    /// The defect this guards against: three read errors in a row were taken for a pulled
    /// card and stopped the run (exit 74), leaving every later file pending for ever.
    @Test func readErrorsInARowOnACardStillThereFailThoseFilesAndTheRunGoesOn() throws {
        let state = TemporaryDirectory()
        let area = try StagingArea(root: state.path + "/staging")
        let stager = Stager(area: area, settings: StageSettings(reserve: 0))
        let log = OutcomeLog()
        try stager.run(root: "/proc/self", files: Self.unreadableAtOffsetZero(10), volumeName: "bad card") { log.add($0) }
        #expect(log.failed.count == 10, "every file is tried: the card is still there")
        #expect(log.failed.allSatisfy { $0.1.kind == .ioError(SystemError(call: "pread", errno: .ioError, path: "mem")) })
    }

    /// The reader asks for the rest of a file and a byte, in whole blocks, so a small file's
    /// read comes back short, and ends, in one call; never more than a chunk, never a sum
    /// with a size the card gave.
    @Test func aReadAsksForTheRestOfTheFileAndAByteInWholeBlocksAndNoMoreThanAChunk() {
        let chunk = 1 << 20
        #expect(Stager.readLength(left: 20_000, chunk: chunk) == 20_480)
        #expect(Stager.readLength(left: 4096, chunk: chunk) == 8192)
        #expect(Stager.readLength(left: 0, chunk: chunk) == 4096)
        #expect(Stager.readLength(left: -1, chunk: chunk) == 4096)
        #expect(Stager.readLength(left: Int64(chunk) - 1, chunk: chunk) == chunk)
        #expect(Stager.readLength(left: Int64(chunk), chunk: chunk) == chunk)
        #expect(Stager.readLength(left: .max, chunk: chunk) == chunk)
        #expect(Stager.readLength(left: 4999, chunk: 5096) == 5096)
    }
}
