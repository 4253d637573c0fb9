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

    @Test func progressReportsTellSystemdAndProgramsAtEachIntervalAndStopCleanly() async throws {
        let socket = try NotifySocket()
        let capture = OutputCapture()
        let progress = JobProgress(uploads: true)
        let reports = ProgressReports(
            progress: progress, line: nil, events: capture.output,
            systemd: SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.name]), interval: .milliseconds(100))
        let clip = JobProgressTests.upload("clip", size: 40 << 20, partSize: 10 << 20)
        progress.record(.upload(.queued(clip)))
        reports.start()
        try await Task.sleep(for: .milliseconds(350))
        progress.record(.upload(.partUploaded(clip, number: 1, partCount: 4, bytes: 10 << 20)))
        try await Task.sleep(for: .milliseconds(350))
        reports.stop()
        let afterStop = capture.text()
        try await Task.sleep(for: .milliseconds(250))

        let events = afterStop.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(events.count >= 4, "\(afterStop)")
        #expect(events.allSatisfy { $0?["event"] as? String == "progress" })
        let uploaded = events.compactMap { $0?["bytes_uploaded"] as? Int }
        #expect(uploaded.first == 0)
        #expect(uploaded.last == 10 << 20)
        #expect(capture.text().isEmpty, "nothing is told once stopped")

        let statuses = socket.receiveAll(quiet: 0.2, until: Date() + 5)
        #expect(statuses.contains("STATUS=uploaded 0 B/40.0 MiB"), "\(statuses)")
        #expect(statuses.last?.hasPrefix("STATUS=ended: uploaded 10.0 MiB/40.0 MiB") == true, "\(statuses)")
    }
}
