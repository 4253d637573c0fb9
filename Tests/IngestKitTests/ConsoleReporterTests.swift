import Foundation
import Glibc
import Testing

@testable import IngestKit

@Suite struct ConsoleReporterTests {
    /// Captures what a reporter writes through a pipe.
    final class Capture {
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

    @Test func drawsFilesBytesRateAndETAWhileCopyingAndClearsTheLineForMessages() async throws {
        let capture = Capture()
        let reporter = ConsoleReporter(output: capture.output, showsProgress: true)
        let state = TemporaryDirectory()
        let stager = Stager(area: try StagingArea(root: state.path + "/staging"))
        var totals = ScanTotals()
        totals.toStage = 4
        totals.toStageBytes = 4 << 30
        reporter.emit(.scanned(totals))
        reporter.emit(.stagingStarted(stager))
        stager.bytesRead.add(1 << 30, ordering: .relaxed)
        reporter.emit(.staged(StagedFile(
            file: ScannedFile(path: CardPath("DCIM/a.MP4"), size: 1 << 30, mtime: 0),
            fingerprint: Fingerprint(high: 1, low: 2), deduplicated: false, verified: false)))

        let display = Task { await reporter.runProgressDisplay(interval: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(200))
        display.cancel()
        await display.value
        reporter.emit(.failed(ScannedFile(path: CardPath("DCIM/b.MP4"), size: 5, mtime: 0), StageFailure(kind: .vanished)))

        let text = capture.text()
        #expect(text.contains("\r\u{1B}[K  1/4 files · 1.0 GiB/4.0 GiB · "))
        #expect(text.contains("/s · ETA "))
        #expect(text.contains("\r\u{1B}[K  failed DCIM/b.MP4: disappeared before it could be copied\n"), "a message first clears the progress line")
    }

    @Test func drawsNothingWhenNotOnATerminal() async throws {
        let capture = Capture()
        let reporter = ConsoleReporter(output: capture.output)  // a pipe is not a terminal
        let state = TemporaryDirectory()
        reporter.emit(.stagingStarted(Stager(area: try StagingArea(root: state.path + "/staging"))))
        let display = Task { await reporter.runProgressDisplay(interval: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(60))
        display.cancel()
        await display.value
        #expect(!capture.text().contains("\u{1B}["))
    }

    @Test(arguments: [(0.0, "0:00"), (59.4, "0:59"), (61, "1:01"), (3600, "1:00:00"), (3725, "1:02:05")])
    func etaReadsLikeAClock(seconds: Double, expected: String) {
        #expect(ConsoleReporter.clock(seconds) == expected)
    }
}
