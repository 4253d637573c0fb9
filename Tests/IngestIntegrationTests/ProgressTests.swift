import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The job's progress as people, programs and systemd see it, on real uploads to SeaweedFS
/// through the fault proxy, which holds every part back half a second: uploading is then
/// much slower than copying, as on a station's mobile link, and the line must go on
/// counting after the card is copied.
@Suite(.serialized)
final class ProgressTests {
    let server: SeaweedFS
    let proxy: FaultProxy
    let work = TemporaryDirectory()
    let config: String
    /// The card: a 30 MiB clip (six 5 MiB parts) and three photos.
    let card: String
    let cardBytes: Int64 = (30 << 20) + 3 * 100_000

    init() throws {
        server = try SeaweedFS()
        proxy = try FaultProxy(upstreamPort: server.s3Port, rules: [FaultRule(.delay, "PUT", "partNumber=", seconds: 0.5)])
        config = try work.write("ingest.toml", Array("""
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            parts_in_flight = 1
            [s3]
            endpoint = "\(proxy.endpoint)"
            bucket = "\(server.bucket)"
            """.utf8))
        _ = try work.write("card/DCIM/100MEDIA/CLIP_0001.MP4", randomBytes(30 << 20))
        for i in 1...3 { _ = try work.write("card/DCIM/100MEDIA/IMG_000\(i).JPG", randomBytes(100_000)) }
        card = work.path + "/card"
    }

    deinit { proxy.stop() }

    var environment: [String: String] {
        var environment = IngestRun.environment.merging(server.awsEnvironment) { $1 }
        environment["INGEST_CONFIG"] = config
        return environment
    }

    var state: [String] { ["--state-dir", work.path + "/state"] }

    /// The environment of a run whose clip goes up once staged, from the journal
    /// (`stream_parts = false`): what a kill mid-parts leaves for `resume` or `rescan`.
    func journalledUploads() throws -> [String: String] {
        let text = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "parts_in_flight = 1", with: "parts_in_flight = 1\nstream_parts = false")
        return environment.merging(["INGEST_CONFIG": try work.write("journalled.toml", Array(text.utf8))]) { $1 }
    }

    /// The frames of a terminal's progress line, each as drawn (carriage return, erase line).
    static func frames(_ output: String) -> [String] {
        output.components(separatedBy: "\r\u{1B}[K").map { $0.split(separator: "\n").first.map(String.init) ?? "" }
    }

    /// The bytes a frame says are uploaded: "uploaded 10.0 MiB/30.3 MiB" gives 10 MiB.
    static func uploaded(in frame: String) -> Double? {
        guard let match = frame.firstMatch(of: /uploaded ([0-9.]+) (B|KiB|MiB|GiB)\//) else { return nil }
        let units: [Substring: Double] = ["B": 1, "KiB": 0x1p10, "MiB": 0x1p20, "GiB": 0x1p30]
        return Double(match.1).map { $0 * units[match.2]! }
    }

    /// Counts of bytes uploaded while the clip is on its way: more than the photos (which go
    /// whole, at once), less than the card. Counting whole objects only, there are none.
    static func clipUnderWay(_ uploaded: [Double]) -> [Double] {
        uploaded.filter { $0 > 0x1p20 && $0 < 30 * 0x1p20 }
    }

    /// The clip of a run killed after two of its parts counts them as soon as its upload is
    /// taken up again: the bytes uploaded go from the photos' (under 1 MiB) to 10 MiB and
    /// more, never through the 5 MiB of a first part sent anew.
    static func countsTheClipsTwoPartsUpFront(_ uploaded: [Double]) -> Bool {
        uploaded.contains { $0 >= 10 * 0x1p20 } && !uploaded.contains { $0 > 0x1p20 && $0 < 10 * 0x1p20 }
    }

    @Test(.timeLimit(.minutes(3)))
    func onATerminalTheLineCountsTheBytesUploadedAndTheTimeLeftAfterCopyingEnds() throws {
        let terminal = try PseudoTerminal(IngestBinary.path, [card] + state, environment: environment)
        let (status, output) = try terminal.wait(timeout: 150)
        #expect(status == 0, "\(output)")
        #expect(output.contains("Uploaded 4 objects"), "\(output)")

        let frames = Self.frames(output)
        // Once the card is copied the line says so, and goes on with the upload.
        let afterCopying = frames.filter { $0.hasPrefix("copied 4 files (") }
        let uploaded = afterCopying.compactMap(Self.uploaded(in:))
        #expect(uploaded == uploaded.sorted(), "\(afterCopying)")
        #expect(Set(Self.clipUnderWay(uploaded)).count >= 2, "the clip's parts count as they land: \(afterCopying)")
        #expect(afterCopying.contains { $0.contains(" · ETA ") }, "\(afterCopying)")
        #expect(afterCopying.allSatisfy { $0.contains("/30.3 MiB") }, "the bytes to upload are the card's: \(afterCopying)")
        #expect(try proxy.stats().injected(.delay) == 6, "every part was held back")
    }

    @Test(.timeLimit(.minutes(3)))
    func noProgressFlagKeepsTheTerminalFreeOfTheLine() throws {
        let terminal = try PseudoTerminal(IngestBinary.path, [card, "--no-progress", "--no-upload"] + state, environment: environment)
        let (status, output) = try terminal.wait(timeout: 60)
        #expect(status == 0, "\(output)")
        #expect(output.contains("Staged 4 files"), "\(output)")
        #expect(!output.contains("copied "), "\(output)")
    }

    @Test(.timeLimit(.minutes(3)))
    func jsonCarriesProgressEventsWhoseUploadedBytesGrowAtEachInterval() throws {
        let run = try IngestRun.ingest([card, "--json", "--progress-interval", "250ms"] + state, environment: environment, timeout: 150)
        #expect(run.status == 0, "\(run.stderr)")
        let events = run.events.compactMap { $0["event"] as? String }
        let progress = run.events("progress")
        #expect(progress.count >= 6, "one each 250 ms of a run of 3 s or more: \(events)")
        let uploaded = progress.compactMap { $0["bytes_uploaded"] as? Int }
        #expect(uploaded.count == progress.count)
        #expect(uploaded == uploaded.sorted())
        #expect(Set(Self.clipUnderWay(uploaded.map(Double.init))).count >= 2, "\(uploaded)")
        // After copying ended, the events still count the upload, with its rate and time left.
        let ended = try #require(events.firstIndex(of: "staging_ended"))
        let later = run.events[ended...].filter { $0["event"] as? String == "progress" }
        #expect(later.contains { ($0["eta_seconds"] as? Int) != nil && ($0["upload_rate"] as? Int ?? 0) > 0 }, "\(later)")
        #expect(later.allSatisfy { $0["bytes_to_upload"] as? Int == Int(cardBytes) && $0["copying"] as? Bool == false })
        #expect(run.events("upload_queued").count == 4)
        #expect(events.last == "summary", "no progress event after the summary")
    }

    @Test(.timeLimit(.minutes(3)))
    func resumeDrawsItsUploadStartingFromThePartsTheServerHasAlready() throws {
        let environment = try journalledUploads()
        let killed = try IngestRun.ingest(
            [card, "--json"] + state, environment: environment.merging(["INGEST_TEST_STOP_AT": "after-parts:2"]) { $1 },
            timeout: 150)
        #expect(killed.status == SIGKILL, "the hook kills the process: \(killed.stderr)")

        let terminal = try PseudoTerminal(IngestBinary.path, ["resume"] + state, environment: environment)
        let (status, output) = try terminal.wait(timeout: 150)
        #expect(status == 0, "\(output)")
        let uploaded = Self.frames(output).compactMap(Self.uploaded(in:))
        #expect(Self.countsTheClipsTwoPartsUpFront(uploaded), "\(output)")
        #expect(uploaded == uploaded.sorted(), "\(output)")
        #expect(Set(uploaded).count >= 2, "\(output)")
        #expect(output.contains("\r\u{1B}[KResumed "), "the line is cleared before the outcome: \(output)")
    }

    @Test(.timeLimit(.minutes(3)))
    func rescansResumeStepTellsItsProgressFromThePartsTheServerHasAlready() throws {
        let environment = try journalledUploads()
        let killed = try IngestRun.ingest(
            [card, "--json"] + state, environment: environment.merging(["INGEST_TEST_STOP_AT": "after-parts:2"]) { $1 },
            timeout: 150)
        #expect(killed.status == SIGKILL, "the hook kills the process: \(killed.stderr)")

        let rescan = try IngestRun.ingest(
            ["rescan", "--json", "--progress-interval", "250ms"] + state, environment: environment, timeout: 150)
        #expect(rescan.status == 0, "\(rescan.stderr)")
        #expect((rescan.events("resume_summary").first?["uploaded"] as? Int ?? 0) >= 1, "\(rescan.result.stdoutText)")
        let uploaded = rescan.events("progress").compactMap { $0["bytes_uploaded"] as? Int }
        #expect(Self.countsTheClipsTwoPartsUpFront(uploaded.map(Double.init)), "\(uploaded)")
        #expect(uploaded == uploaded.sorted(), "\(uploaded)")
        #expect(Set(Self.clipUnderWay(uploaded.map(Double.init))).count >= 2, "\(uploaded)")
    }

    @Test(.timeLimit(.minutes(3)))
    func underSystemdTheRunSaysReadyFirstThenItsProgressAsStatus() throws {
        let socket = try NotifySocket(abstract: true)
        let process = try IngestRun.start(
            [card, "--progress-interval", "250ms"] + state, environment: environment.merging(["NOTIFY_SOCKET": socket.name]) { $1 })
        var messages: [String] = []
        let deadline = Date() + 150
        while process.isRunning, Date() < deadline {
            if let message = socket.receive(timeout: 0.5) { messages.append(message) }
        }
        messages += socket.receiveAll(quiet: 0.5, until: Date() + 5)
        let result = try process.wait(timeout: 10)
        #expect(result.status == 0, "\(result.stderr)")

        #expect(messages.first == "READY=1", "\(messages)")
        let statuses = messages.filter { $0.hasPrefix("STATUS=") }
        #expect(statuses.count >= 4, "\(messages)")
        #expect(statuses.contains { $0.hasPrefix("STATUS=copied 4 files (") && $0.contains(" · uploaded ") }, "\(statuses)")
        #expect(Set(Self.clipUnderWay(statuses.compactMap(Self.uploaded(in:)))).count >= 2, "\(statuses)")
        #expect(statuses.last?.hasPrefix("STATUS=ended: copied 4 files (") == true, "\(statuses)")
        #expect(statuses.last?.contains("uploaded 30.3 MiB/30.3 MiB") == true, "\(statuses)")
    }

    @Test(.timeLimit(.minutes(1)))
    func underSystemdARunThatFailsAtOnceHasSaidReadySoTheUnitNeverHangsActivating() throws {
        let socket = try NotifySocket()
        let failed = try IngestRun.ingest(
            [card, "--config", work.path + "/missing.toml"] + state, environment: ["NOTIFY_SOCKET": socket.name])
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("missing.toml"), "\(failed.stderr)")
        #expect(socket.receive(timeout: 5) == "READY=1")
    }
}
