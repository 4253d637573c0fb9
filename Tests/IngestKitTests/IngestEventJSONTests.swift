import Foundation
import Testing

@testable import IngestKit

private let photo = ScannedFile(path: CardPath("DCIM/100CANON/IMG_0001.JPG"), size: 6_291_456, mtime: 1_700_000_000_000_000_000)
private let digest = "99aa06d3014798d86001c324468d497f"

/// The event's NDJSON line, checked to be one line of valid JSON, and the object it parses to.
private func encodeAndParse(
    _ event: IngestEvent, sourceLocation: SourceLocation = #_sourceLocation
) throws -> (line: String, object: [String: Any]) {
    let line = JSONValue.line(event.json)
    #expect(!line.contains("\n"), "an NDJSON line holds no newline", sourceLocation: sourceLocation)
    let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
    let object = try #require(parsed as? [String: Any], sourceLocation: sourceLocation)
    return (line, object)
}

/// The keys of a one-level JSON object line, in the order they are written.
private func keysInWrittenOrder(_ line: String, keys: some Collection<String>) throws -> [String] {
    try keys.map { key in
        let range = try #require(line.range(of: "\"\(key)\":"))
        return (line.distance(from: line.startIndex, to: range.lowerBound), key)
    }.sorted { $0.0 < $1.0 }.map(\.1)
}

private func int(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }

@Suite struct IngestEventJSONTests {
    // MARK: file events

    @Test func stagedEventHasPathSizeAndDigest() throws {
        let staged = StagedFile(file: photo, fingerprint: try #require(Fingerprint(hex: digest)), deduplicated: true, verified: false)
        let (line, object) = try encodeAndParse(.staged(staged))
        #expect(object["event"] as? String == "staged")
        #expect(object["path"] as? String == "DCIM/100CANON/IMG_0001.JPG")
        #expect(int(object["size"]) == 6_291_456)
        #expect(object["xxh128"] as? String == digest)
        #expect(line.contains("\"deduplicated\":true"))
        #expect(line.contains("\"verified\":false"))
    }

    @Test func failedEventHasPathSizeAndReason() throws {
        let (_, object) = try encodeAndParse(.failed(photo, StageFailure(kind: .vanished)))
        #expect(object["event"] as? String == "failed")
        #expect(object["path"] as? String == "DCIM/100CANON/IMG_0001.JPG")
        #expect(int(object["size"]) == 6_291_456)
        #expect(object["reason"] as? String == "vanished")
        #expect((object["message"] as? String)?.isEmpty == false)
        #expect(object["xxh128"] == nil)
    }

    @Test func failedEventOfADeviceErrorSaysIOError() throws {
        let failure = StageFailure(kind: .ioError(SystemError(call: "read", errno: .ioError, path: nil)))
        let (_, object) = try encodeAndParse(.failed(photo, failure))
        #expect(object["reason"] as? String == "io-error")
    }

    @Test func noticeEventHasPathSizeCodeAndMessage() throws {
        let file = ScannedFile(path: CardPath("DCIM/EMPTY.JPG"), size: 0, mtime: 0)
        let (_, object) = try encodeAndParse(.notice(file, code: "empty", message: "the file is empty"))
        #expect(object["event"] as? String == "notice")
        #expect(object["path"] as? String == "DCIM/EMPTY.JPG")
        #expect(int(object["size"]) == 0)
        #expect(object["code"] as? String == "empty")
        #expect(object["message"] as? String == "the file is empty")
    }

    @Test func skippedEventHasPathAndReason() throws {
        let (_, object) = try encodeAndParse(.skipped(CardPath("DCIM/link"), .symlink))
        #expect(object["event"] as? String == "skipped")
        #expect(object["path"] as? String == "DCIM/link")
        #expect(object["reason"] as? String == "symlink")
        #expect((object["message"] as? String)?.isEmpty == false)
    }

    @Test func pathThatIsNotUTF8IsWrittenInItsEscapedDisplayForm() throws {
        let file = ScannedFile(path: CardPath(bytes: Array("DCIM/caf".utf8) + [0xE9] + Array(".jpg".utf8)), size: 1, mtime: 0)
        let (line, object) = try encodeAndParse(.notice(file, code: "not-utf8", message: "name is not UTF-8"))
        #expect(object["path"] as? String == #"DCIM/caf\xE9.jpg"#)
        #expect(line.contains(#""path":"DCIM/caf\\xE9.jpg""#))
    }

    // MARK: other events

    @Test func volumeEventDescribesTheCard() throws {
        let device = BlockDevice(node: "/dev/sdb1", udevProperties: [
            "ID_FS_UUID": "3E5A-1B2C", "ID_FS_LABEL": "EOS_DIGITAL", "ID_FS_TYPE": "exfat", "ID_SERIAL_SHORT": "123",
        ])
        let volume = VolumeIdentity(
            key: "uuid:3E5A-1B2C", rootPath: "/media/pi/EOS_DIGITAL", mountPoint: "/media/pi/EOS_DIGITAL",
            pathInFileSystem: "/", fsType: "exfat", device: device)
        let (_, object) = try encodeAndParse(.volume(volume))
        #expect(object["event"] as? String == "volume")
        #expect(object["key"] as? String == "uuid:3E5A-1B2C")
        #expect(object["root"] as? String == "/media/pi/EOS_DIGITAL")
        #expect(object["mount_point"] as? String == "/media/pi/EOS_DIGITAL")
        #expect(object["device"] as? String == "/dev/sdb1")
        #expect(object["fs_uuid"] as? String == "3E5A-1B2C")
        #expect(object["fs_label"] as? String == "EOS_DIGITAL")
        #expect(object["fs_type"] as? String == "exfat")
        #expect(object["serial"] as? String == "123")
        #expect(object["vendor"] == nil)
    }

    @Test func volumeEventOfAPlainDirectoryHasNoDeviceFields() throws {
        let volume = VolumeIdentity(
            key: "path:/srv/incoming", rootPath: "/srv/incoming", mountPoint: nil, pathInFileSystem: "/srv/incoming",
            fsType: nil, device: nil)
        let (_, object) = try encodeAndParse(.volume(volume))
        #expect(Set(object.keys) == ["event", "key", "root"])
    }

    @Test func scannedEventHasTheTotals() throws {
        var totals = ScanTotals()
        totals.toStage = 3
        totals.toStageBytes = 3_000
        totals.known = 2
        totals.knownBytes = 2_000
        totals.skipped = 1
        let (_, object) = try encodeAndParse(.scanned(totals))
        #expect(object["event"] as? String == "scanned")
        #expect(int(object["to_stage"]) == 3)
        #expect(int(object["to_stage_bytes"]) == 3_000)
        #expect(int(object["known"]) == 2)
        #expect(int(object["known_bytes"]) == 2_000)
        #expect(int(object["skipped"]) == 1)
    }

    @Test func summaryEventHasCountsSecondsAndExitStatus() throws {
        var summary = RunSummary(volume: "EOS_DIGITAL")
        summary.staged = 10
        summary.stagedBytes = 1 << 30
        summary.failed = 2
        summary.seconds = 12.3456
        summary.stoppedBy = "staging full"
        let (line, object) = try encodeAndParse(.finished(summary))
        #expect(object["event"] as? String == "summary")
        #expect(object["volume"] as? String == "EOS_DIGITAL")
        #expect(int(object["staged"]) == 10)
        #expect(int(object["staged_bytes"]) == 1 << 30)
        #expect(int(object["failed"]) == 2)
        #expect((object["seconds"] as? NSNumber)?.doubleValue == 12.346)
        #expect(line.contains("\"seconds\":12.346"))
        #expect(int(object["exit_status"]) == 1)  // some files failed: partial, sysexits-style 1
        #expect(object["stopped_by"] as? String == "staging full")
    }

    @Test func summaryWithoutFailuresExitsZeroAndOmitsStoppedBy() throws {
        let (_, object) = try encodeAndParse(.finished(RunSummary(volume: "x")))
        #expect(int(object["exit_status"]) == 0)
        #expect(object["stopped_by"] == nil)
    }

    // MARK: encoding

    @Test func keysAreWrittenInSortedOrder() throws {
        let staged = StagedFile(file: photo, fingerprint: try #require(Fingerprint(hex: digest)), deduplicated: false, verified: true)
        var summary = RunSummary(volume: "v")
        summary.stoppedBy = "card lost"
        let events: [IngestEvent] = [
            .staged(staged), .failed(photo, StageFailure(kind: .changedWhileCopying)),
            .skipped(CardPath("a"), .directoryCycle), .scanned(ScanTotals()), .finished(summary),
        ]
        for event in events {
            let (line, object) = try encodeAndParse(event)
            #expect(try keysInWrittenOrder(line, keys: object.keys) == object.keys.sorted(), "\(line)")
        }
    }

    @Test func lineOfASmallObjectIsCompactWithSortedKeys() {
        let line = JSONValue.line(["b": .int(2), "a": "x", "c": .bool(true), "ab": .double(0.5)])
        #expect(line == #"{"a":"x","ab":0.500,"b":2,"c":true}"#)
    }

    @Test func quotesAndBackslashesAreEscaped() throws {
        let text = #"say "cheese" in C:\DCIM\"#
        let line = JSONValue.line(["k": .string(text)])
        #expect(line == #"{"k":"say \"cheese\" in C:\\DCIM\\"}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["k"] as? String == text)
    }

    @Test func controlCharactersAreEscaped() throws {
        let text = "a\nb\rc\td\u{0}e\u{1}f\u{1F}g\u{7F}"
        let line = JSONValue.line(["k": .string(text)])
        #expect(line == "{\"k\":\"a\\nb\\rc\\td\\u0000e\\u0001f\\u001fg\u{7F}\"}")
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["k"] as? String == text)
    }

    @Test func nonASCIITextIsWrittenAsUTF8AndParsesBack() throws {
        let text = "Été à Zürich — 東京 📷 \u{2028}"
        let line = JSONValue.line(["k": .string(text)])
        #expect(line == "{\"k\":\"\(text)\"}")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["k"] as? String == text)
    }

    @Test func pathWithNewlineQuoteAndBackslashStaysOneValidLine() throws {
        let file = ScannedFile(path: CardPath("DCIM/a\"b\\c\nd\u{1}.JPG"), size: 5, mtime: 0)
        let (_, object) = try encodeAndParse(.notice(file, code: "odd-name", message: "odd \"name\""))
        #expect(object["path"] as? String == "DCIM/a\"b\\c\nd\u{1}.JPG")
        #expect(object["message"] as? String == "odd \"name\"")
    }

    @Test func negativeAndLargeIntegersAreExact() throws {
        let line = JSONValue.line(["max": .int(Int64.max), "min": .int(Int64.min)])
        #expect(line == "{\"max\":9223372036854775807,\"min\":-9223372036854775808}")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(int(object["max"]) == Int64.max)
        #expect(int(object["min"]) == Int64.min)
    }
}
