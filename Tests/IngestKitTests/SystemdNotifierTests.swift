import Foundation
import Testing

@testable import IngestKit

@Suite struct SystemdNotifierTests {
    @Test func readyAndStatusReachASocketAtAPath() throws {
        let socket = try NotifySocket()
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.name]))
        notifier.ready()
        notifier.status("copied 1/2 files\nand a second line")
        #expect(socket.receive(timeout: 5) == "READY=1")
        #expect(socket.receive(timeout: 5) == "STATUS=copied 1/2 files and a second line", "one line: a newline would start another assignment")
    }

    @Test func anAtSignNamesASocketInTheAbstractNamespace() throws {
        let socket = try NotifySocket(abstract: true)
        #expect(socket.name.hasPrefix("@"))
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.name]))
        #expect(notifier.send("READY=1\nSTATUS=up"))
        #expect(socket.receive(timeout: 5) == "READY=1\nSTATUS=up")
    }

    @Test(arguments: [[:], ["NOTIFY_SOCKET": ""], ["NOTIFY_SOCKET": "vsock:2:1234"], ["NOTIFY_SOCKET": "@"],
                      ["NOTIFY_SOCKET": "/" + String(repeating: "x", count: 200)]])
    func withoutASocketItCanSpeakToThereIsNoNotifier(environment: [String: String]) {
        #expect(SystemdNotifier(environment: environment) == nil)
    }

    @Test func aSocketNobodyListensOnLosesTheMessageWithoutAFailure() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify"])
        #expect(notifier?.send("READY=1") == false)
    }

    /// The clock is stepped by hand: three intervals before a part is uploaded, three after.
    @Test(.timeLimit(.minutes(1)))
    func progressReportsTellSystemdAndProgramsAtEachIntervalAndStopCleanly() async throws {
        let socket = try NotifySocket()
        let capture = OutputCapture()
        let clock = ManualClock()
        let progress = JobProgress(uploads: true, now: clock.now)
        let interval = Duration.milliseconds(100)
        let reports = ProgressReports(
            progress: progress, line: nil, events: capture.output,
            systemd: SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.name]), interval: interval, clock: clock)
        let clip = JobProgressTests.upload("clip", size: 40 << 20, partSize: 10 << 20)
        progress.record(.upload(.queued(clip)))
        reports.start()
        for _ in 1...3 { await clock.step(by: interval) }
        await clock.sleeping()
        progress.record(.upload(.partUploaded(clip, number: 1, partCount: 4, bytes: 10 << 20)))
        for _ in 1...3 { await clock.step(by: interval) }
        await clock.sleeping()
        reports.stop()
        let afterStop = capture.text()
        // The loop leaves its wait once stopped; time that passes after it tells nothing.
        #expect(await eventually { clock.sleepers == 0 })
        clock.advance(by: interval * 3)

        let events = afterStop.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(events.count == 6, "one event at each interval: \(afterStop)")
        #expect(events.allSatisfy { $0?["event"] as? String == "progress" })
        let uploaded = events.compactMap { $0?["bytes_uploaded"] as? Int }
        #expect(uploaded == [0, 0, 0, 10 << 20, 10 << 20, 10 << 20])
        #expect(capture.text().isEmpty, "nothing is told once stopped")

        var statuses: [String] = []
        while let status = socket.receive(timeout: 5) {
            statuses.append(status)
            if status.hasPrefix("STATUS=ended") { break }
        }
        #expect(statuses.count == 7, "one status at each interval, then the end: \(statuses)")
        #expect(statuses.first == "STATUS=uploaded 0 B/40.0 MiB", "\(statuses)")
        #expect(statuses.last?.hasPrefix("STATUS=ended: uploaded 10.0 MiB/40.0 MiB") == true, "\(statuses)")
    }
}
