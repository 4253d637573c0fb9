import Foundation
import Glibc
import Testing

@testable import IngestKit

/// Captures what a reporter writes through a pipe.
final class OutputCapture {
    let read: Int32, write: Int32
    init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        (read, write) = (fds[0], fds[1])
        _ = fcntl(read, F_SETFL, O_NONBLOCK)
    }
    var output: ReportOutput { ReportOutput(fd: write) }
    func text() -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(read, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    deinit {
        close(read)
        close(write)
    }
}

@Suite struct ConsoleReporterTests {
    /// 25 empty files and 2 names that are not UTF-8: ten notes of the first kind and a count
    /// of the rest, both of the second; one kind does not drown another.
    @Test func repeatedNotesOfOneKindAreShownTenTimesThenCounted() {
        let capture = OutputCapture()
        let reporter = ConsoleReporter(output: capture.output)
        for index in 1...25 {
            let file = ScannedFile(path: CardPath("DCIM/EMPTY\(index).TXT"), size: 0, mtime: 0)
            reporter.emit(.notice(file, code: "empty-file", message: "empty file; ingested like any other"))
        }
        for index in 1...2 {
            let file = ScannedFile(path: CardPath("DCIM/RAW\(index).TXT"), size: 1, mtime: 0)
            reporter.emit(.notice(file, code: "name-not-utf8", message: "name is not valid UTF-8"))
        }
        reporter.emit(.scanned(ScanTotals()))
        let lines = capture.text().split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("  note: DCIM/EMPTY") }.count == 10)
        #expect(lines.filter { $0.hasPrefix("  note: DCIM/RAW") }.count == 2)
        #expect(lines.contains("  note: 15 more files with the same note (empty file; ingested like any other), not listed"))
        #expect(lines.filter { $0.contains("more file") }.count == 1)
    }

    @Test func aMessageClearsTheProgressLineFirstAndTheLineIsDrawnAgainBelowIt() {
        let capture = OutputCapture()
        let line = ProgressLine(output: capture.output)
        let reporter = ConsoleReporter(output: capture.output, line: line)
        line.draw("copied 1/4 files")
        reporter.emit(.failed(ScannedFile(path: CardPath("DCIM/b.MP4"), size: 5, mtime: 0), StageFailure(kind: .vanished)))
        line.draw("copied 2/4 files")
        line.end()
        line.draw("copied 3/4 files")

        #expect(capture.text() == "\r\u{1B}[Kcopied 1/4 files"
            + "\r\u{1B}[K  failed DCIM/b.MP4: disappeared before it could be copied\n"
            + "\r\u{1B}[Kcopied 2/4 files"
            + "\r\u{1B}[K", "once ended, the line is cleared and never drawn again")
    }

    @Test func aLineWrittenAsideByAnotherWriterClearsTheProgressLineFirst() {
        let capture = OutputCapture()
        let line = ProgressLine(output: capture.output)
        line.draw("copied 1/4 files")
        line.writingAside { capture.output.write("warning: upload failed\n") }
        line.writingAside { capture.output.write("warning: again\n") }
        line.draw("copied 2/4 files")

        #expect(capture.text() == "\r\u{1B}[Kcopied 1/4 files"
            + "\r\u{1B}[Kwarning: upload failed\n"
            + "warning: again\n"
            + "\r\u{1B}[Kcopied 2/4 files", "cleared once, when it was shown; drawn again below")
    }

    @Test func withoutAProgressLineMessagesAreBareLines() {
        let capture = OutputCapture()
        ConsoleReporter(output: capture.output).emit(
            .failed(ScannedFile(path: CardPath("a\u{1B}[2J"), size: 5, mtime: 0), StageFailure(kind: .vanished)))
        #expect(capture.text() == "  failed a\\x1B[2J: disappeared before it could be copied\n")
    }

    /// A run whose uploads did not all finish says so before any "verified"; one that
    /// uploaded nothing never says "verified" at all.
    @Test func aRunWhoseUploadsFailedNeverOpensWithVerified() {
        var failed = UploadTotals()
        failed.notAttempted = 3
        #expect(ConsoleReporter.uploadLine(failed, failed: true) == "Uploads not finished: 3 not attempted; 0 objects (0 B) uploaded")
        failed.uploaded = 1
        failed.uploadedBytes = 2048
        failed.failed = 1
        #expect(ConsoleReporter.uploadLine(failed, failed: true)
            == "Uploads not finished: 1 failed, 3 not attempted; 1 object (2.0 KiB) uploaded and verified")
        #expect(ConsoleReporter.uploadLine(UploadTotals(), failed: true) == "Uploads stopped by an error; 0 objects (0 B) uploaded")
        #expect(ConsoleReporter.uploadLine(UploadTotals(), failed: false) == "Uploaded 0 objects (0 B)")

        var done = UploadTotals()
        done.uploaded = 2
        done.uploadedBytes = 4096
        done.copied = 1
        done.alreadyThere = 1
        #expect(ConsoleReporter.uploadLine(done, failed: false)
            == "Uploaded 2 objects (4.0 KiB), verified, 1 of them copied in the bucket; 1 already in the bucket")
    }

    /// Counts agree with their nouns: one file, two files.
    @Test func theSummaryOfOneFileSaysFile() {
        let capture = OutputCapture()
        var summary = RunSummary(volume: "card")
        summary.staged = 1
        summary.stagedBytes = 100
        summary.scan.toStage = 1
        summary.scan.toStageBytes = 100
        ConsoleReporter(output: capture.output).emit(.scanned(summary.scan))
        ConsoleReporter(output: capture.output).emit(.finished(summary))
        let text = capture.text()
        #expect(text.hasPrefix("Found 1 file to copy (100 B)"), "\(text)")
        #expect(text.contains("\nStaged 1 file (100 B);"), "\(text)")
    }

    /// `ingest scan` names the volume it scans as scanned, not ingested.
    @Test func aDryRunSaysScanningNotIngesting() {
        let capture = OutputCapture()
        let volume = VolumeIdentity(key: "path:/srv/card", rootPath: "/srv/card", mountPoint: nil, pathInFileSystem: "/", fsType: nil, device: nil)
        ConsoleReporter(output: capture.output, action: .scanning).emit(.volume(volume))
        ConsoleReporter(output: capture.output).emit(.volume(volume))
        #expect(capture.text() == "Scanning /srv/card\nIngesting /srv/card\n")
    }

    @Test func theProgressLineIsCutToTheTerminalsWidthSoItNeverWraps() {
        #expect(ProgressLine.cut("copied 1/4 files", to: 80) == "copied 1/4 files")
        #expect(ProgressLine.cut("copied 1/4 files", to: 10) == "copied 1…", "nine characters: the tenth column is left free")
        #expect(ProgressLine.cut("copied 1/4 files", to: nil) == "copied 1/4 files", "no terminal, no width")
    }

    @Test(arguments: [(0.0, "0:00"), (59.4, "0:59"), (61, "1:01"), (3600, "1:00:00"), (3725, "1:02:05")])
    func etaReadsLikeAClock(seconds: Double, expected: String) {
        #expect(ProgressSnapshot.clock(seconds) == expected)
    }
}
