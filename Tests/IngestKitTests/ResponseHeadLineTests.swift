import Testing

@testable import IngestKit

@Suite struct ResponseHeadLineTests {
    private func parse(_ text: String) -> ResponseHeadLine {
        Array(text.utf8).withUnsafeBytes { ResponseHeadLine($0) }
    }

    @Test func aStatusLineStartsANewResponse() {
        #expect(parse("HTTP/1.1 100 Continue\r\n") == .status)
        #expect(parse("HTTP/2 200\r\n") == .status)
    }

    @Test func aFieldIsLowercasedAndTrimmedOfSpacesTabsAndTheLineEnd() {
        #expect(parse("ETag: \"abc\"\r\n") == .field(name: "etag", value: "\"abc\""))
        #expect(parse("X-Amz-Meta-Xxh128 :\t0123 \r\n") == .field(name: "x-amz-meta-xxh128", value: "0123"))
        #expect(parse("Date: Tue, 24 Nov 2026 17:00:00 GMT\r\n") == .field(name: "date", value: "Tue, 24 Nov 2026 17:00:00 GMT"))
    }

    @Test func aValueKeepsItsOwnColonsAndMayBeEmpty() {
        #expect(parse("Location: http://127.0.0.1:8333/b/k\r\n") == .field(name: "location", value: "http://127.0.0.1:8333/b/k"))
        #expect(parse("X-Empty:\r\n") == .field(name: "x-empty", value: ""))
    }

    @Test func theBlankLineAndLinesWithoutAColonAreNeitherStatusNorField() {
        #expect(parse("\r\n") == .other)
        #expect(parse("garbage without colon\r\n") == .other)
        #expect(parse("") == .other)
    }

    @Test func bytesThatAreNotUTF8AreRepairedNotTrapped() {
        let line: [UInt8] = Array("X-Odd: ".utf8) + [0xFF, 0xFE] + Array("\r\n".utf8)
        guard case .field(let name, let value) = line.withUnsafeBytes({ ResponseHeadLine($0) }) else {
            Issue.record("a field with odd bytes is still a field")
            return
        }
        #expect(name == "x-odd")
        #expect(value == "\u{FFFD}\u{FFFD}")
    }
}
