import Glibc
import Testing

@testable import IngestKit

/// `--json` event lines are held briefly and written together (``ReportOutput/writeSoon(_:)``);
/// nothing may be lost or reordered by it.
@Suite(.serialized) struct ReportOutputTests {
    /// What `capture` has received once it holds `expected`, or after 5 s: read each time
    /// the pipe has something to read.
    static func text(of capture: OutputCapture, awaiting expected: String) -> String {
        let deadline = ContinuousClock.now + .seconds(5)
        var text = capture.text()
        while text.utf8.count < expected.utf8.count, ContinuousClock.now < deadline {
            var readable = pollfd(fd: capture.read, events: Int16(POLLIN), revents: 0)
            _ = poll(&readable, 1, 5000)
            text += capture.text()
        }
        return text
    }

    @Test func linesWrittenSoonArriveWholeAndInOrderWithNoFurtherCall() {
        let capture = OutputCapture()
        let lines = (0..<100).map { "{\"event\":\"staged\",\"n\":\($0)}\n" }
        for line in lines { capture.output.writeSoon(line) }
        #expect(Self.text(of: capture, awaiting: lines.joined()) == lines.joined())
    }

    @Test func whatIsWrittenNowComesAfterTheLinesHeldBeforeIt() {
        let capture = OutputCapture()
        capture.output.writeSoon("held 1\n")
        capture.output.writeSoon("held 2\n")
        capture.output.write("now\n")
        #expect(capture.text() == "held 1\nheld 2\nnow\n")
    }

    @Test func linesOfAnotherOutputAreWrittenBeforeItsLinesAreHeld() {
        let (first, second) = (OutputCapture(), OutputCapture())
        first.output.writeSoon("to the first\n")
        second.output.writeSoon("to the second\n")
        #expect(first.text() == "to the first\n")
        #expect(Self.text(of: second, awaiting: "to the second\n") == "to the second\n")
    }

    @Test func heldLinesReachingTheLimitAreWrittenAtOnce() {
        let capture = OutputCapture()
        #expect(fcntl(capture.write, 1031 /* F_SETPIPE_SZ */, 1 << 20) >= HeldLines.limit * 2)
        let line = String(repeating: "x", count: 1023) + "\n"
        let count = HeldLines.limit / line.utf8.count
        for _ in 0..<count { capture.output.writeSoon(line) }
        #expect(capture.text().utf8.count == count * line.utf8.count)
    }
}
