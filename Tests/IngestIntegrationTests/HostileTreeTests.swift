import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// Trees a card can be crafted with to exhaust the station, on ext4 images, given to the
/// real binary: a folder of 300,000 long names (its listing alone is 60 MB of names) and a
/// chain of folders 20,000 deep (deeper than any recursion's stack, and than the descriptors
/// a process may hold).
@Suite(.serialized, needsRoot)
struct HostileTreeTests {
    /// `ingest scan` of `root` under `/usr/bin/time`: the run and its peak resident memory.
    static func scanMeasured(_ root: String, state: TemporaryDirectory) throws -> (run: IngestRun, peakKiB: Int) {
        let measured = IngestRun(
            result: try run(
                "/usr/bin/time", ["-f", "peak-kib=%M", IngestBinary.path, "scan", "--json", "--state-dir", state.path, root],
                environment: IngestRun.environment, timeout: 240))
        let line = measured.stderr.split(separator: "\n").last { $0.hasPrefix("peak-kib=") }
        let peak = try #require(line.flatMap { Int($0.dropFirst("peak-kib=".count)) }, "no figure from time: \(measured.stderr)")
        return (measured, peak)
    }

    @Test(.timeLimit(.minutes(5)))
    func aFolderOfThreeHundredThousandLongNamesIsScannedInBoundedMemory() throws {
        // 4 KiB blocks (an image of 512 MiB or more) for a folder this large; sparse.
        let card = try LoopCard(sizeMiB: 600, label: "MANY_NAMES")
        let folder = card.mountPoint + "/DCIM"
        #expect(mkdir(folder, 0o755) == 0)
        // Litter names (`._…`), so the scan only counts them: what is measured is the walk,
        // not the list of files a plan keeps to copy.
        let count = 300_000
        let padding = String(repeating: "x", count: 190)
        try Self.makeNames(in: folder, count: count) { "._\(String($0).leftZeroPadded(7))-\(padding)" }
        try card.seal()
        let state = TemporaryDirectory()
        let tiny = TemporaryDirectory()
        try tiny.write("one.jpg", [1])

        let (baseline, baselineKiB) = try Self.scanMeasured(tiny.path, state: state)
        #expect(baseline.status == 0, "\(baseline.stderr)")
        let (scan, peakKiB) = try Self.scanMeasured(card.mountPoint, state: state)
        #expect(scan.status == 0, "\(scan.stderr)")
        #expect(scan.events("scanned").first?.int("skipped") == count + 1, "every name, and lost+found")
        // The names alone are 60 MB: a listing held whole (117 MB peak before) cannot fit.
        #expect(peakKiB - baselineKiB < 24 << 10, "peak \(peakKiB) KiB against \(baselineKiB) KiB for one file")
    }

    @Test(.timeLimit(.minutes(5)))
    func aChainOfFoldersDeeperThanTheLimitIsSkippedAndTheFilesAboveItAreIngested() throws {
        let card = try LoopCard(sizeMiB: 128, label: "DEEP_CARD")
        try card.write("top.jpg")
        // deep/f0, deep/d/f1, … deep/d/…/d with 20,000 levels: made one folder at a time,
        // relative to the one above, as no path that long can be given whole.
        var directory = open(card.mountPoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        for level in 0..<20_000 {
            let name = level == 0 ? "deep" : "d"
            #expect(mkdirat(directory, name, 0o755) == 0)
            let child = openat(directory, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            close(directory)
            directory = child
            if level < 5 { close(openat(directory, "f\(level)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)) }
        }
        close(directory)
        try card.seal()
        let state = TemporaryDirectory()

        let run = try IngestRun.ingest([card.mountPoint, "--state-dir", state.path, "--json", "--no-upload"], timeout: 240)
        #expect(run.status == 1, "what is too deep to enter is not ingested: the run fails: \(run.stderr)")
        let staged = Set(run.events("staged").compactMap { $0.string("path") })
        #expect(staged == ["top.jpg", "deep/f0", "deep/d/f1", "deep/d/d/f2", "deep/d/d/d/f3", "deep/d/d/d/d/f4"])
        let skipped = run.events("skipped")
        #expect(skipped.map { $0.string("reason") } == ["too-deep"])
        let path = try #require(skipped.first?.string("path"))
        #expect(path == "deep" + String(repeating: "/d", count: Scanner.defaultMaxDepth - 1))
        #expect(skipped.first?.string("message")?.contains("more than \(Scanner.defaultMaxDepth) levels deep") == true)
    }

    /// Makes `count` entries named by `name` in `folder`: hard links to a few empty files
    /// (ext4 allows 65,000 links to one), so the image needs no inode per name.
    static func makeNames(in folder: String, count: Int, name: (Int) -> String) throws {
        var target = ""
        for index in 0..<count {
            let path = folder + "/" + name(index)
            if index % 60_000 == 0 {
                target = path
                let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
                try #require(fd >= 0)
                close(fd)
            } else {
                try #require(link(target, path) == 0, "link: \(String(cString: strerror(errno)))")
            }
        }
    }
}

extension LoopCard {
    /// An empty file at `relative` on the mounted card.
    func write(_ relative: String) throws {
        let fd = open(mountPoint + "/" + relative, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        close(fd)
    }
}

extension String {
    fileprivate func leftZeroPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
