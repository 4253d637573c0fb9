import Foundation
import Logging
import Testing

@testable import IngestKit

/// What the tus client sends and how it reads answers, without a server: the metadata
/// header, the offsets it trusts, where an upload URL may point, the statuses it retries,
/// and what an error may say.
@Suite struct TusProtocolValuesTests {
    // MARK: Upload-Metadata

    @Test func metadataPairsAreKeyAndBase64SortedAndJoinedByCommas() throws {
        let metadata = try TusMetadata(text: ["filetype": "video/mp4", "filename": "DJI_0001.MP4"])
        #expect(metadata.headerValue == "filename REpJXzAwMDEuTVA0,filetype dmlkZW8vbXA0")
    }

    @Test func metadataValuesThatAreNotUTF8AreSentAsTheirBytes() throws {
        // Latin-1 "é.MP4" from an old camera's FAT card: not UTF-8, still a value.
        let bytes: [UInt8] = [0xE9, 0x2E, 0x4D, 0x50, 0x34, 0xFF, 0x00]
        let metadata = try TusMetadata(["filename": bytes])
        #expect(metadata.headerValue == "filename " + Data(bytes).base64EncodedString())
        #expect(metadata.headerValue == "filename 6S5NUDT/AA==")
    }

    @Test func anEmptyValueIsTheKeyAlone() throws {
        let metadata = try TusMetadata(text: ["is_confidential": "", "name": "a"])
        #expect(metadata.headerValue == "is_confidential,name YQ==")
    }

    @Test func noMetadataMakesAnEmptyHeaderValue() {
        #expect(TusMetadata().headerValue == "")
    }

    @Test(arguments: ["", "file name", "a,b", "clé", "tab\tkey", "line\nkey", "nul\u{0}"])
    func keysTheProtocolCannotCarryAreRefused(key: String) {
        #expect(throws: TusError.invalidMetadataKey(key)) { try TusMetadata(text: [key: "v"]) }
    }

    @Test func settingAKeyAgainReplacesItsValue() throws {
        var metadata = TusMetadata()
        try metadata.set("filename", Array("a".utf8))
        try metadata.set("filename", Array("b".utf8))
        #expect(metadata.headerValue == "filename Yg==")
    }

    // MARK: Offsets

    @Test(arguments: ["0", "12582912", "9223372036854775807", "007"])
    func plainDecimalOffsetsAreRead(text: String) throws {
        #expect(try TusAnswerNumbers.offset(text, lowest: 0, highest: nil, status: 200) == Int64(text))
    }

    @Test(arguments: ["-1", "+5", " 5", "5 ", "5.0", "0x10", "1e3", "", "abc", "9223372036854775808"])
    func offsetsThatAreNotPlainByteCountsAreRefused(text: String) {
        #expect(throws: TusError.self) { try TusAnswerNumbers.offset(text, lowest: 0, highest: nil, status: 200) }
    }

    @Test func aMissingOffsetIsRefused() {
        #expect(throws: TusError.unexpectedAnswer(status: 200, detail: "no Upload-Offset header")) {
            try TusAnswerNumbers.offset(nil, lowest: 0, highest: nil, status: 200)
        }
    }

    @Test func anOffsetBeyondTheLengthIsRefused() throws {
        #expect(try TusAnswerNumbers.offset("100", lowest: 0, highest: 100, status: 200) == 100)
        #expect(throws: TusError.self) { try TusAnswerNumbers.offset("101", lowest: 0, highest: 100, status: 200) }
    }

    @Test func aPatchAnswerBelowTheOffsetSentOrBeyondTheChunkIsRefused() throws {
        #expect(try TusAnswerNumbers.offset("1000", lowest: 1000, highest: 1500, status: 204) == 1000)
        #expect(try TusAnswerNumbers.offset("1500", lowest: 1000, highest: 1500, status: 204) == 1500)
        #expect(throws: TusError.self) { try TusAnswerNumbers.offset("999", lowest: 1000, highest: 1500, status: 204) }
        #expect(throws: TusError.self) { try TusAnswerNumbers.offset("1501", lowest: 1000, highest: 1500, status: 204) }
    }

    // MARK: Where uploads may point

    @Test func aRelativeLocationResolvesAgainstTheCreationURL() throws {
        let endpoint = try TusEndpoint("https://tus.example.com/files/")
        #expect(try endpoint.resolve(location: "/files/24e533e0") == "https://tus.example.com/files/24e533e0")
        #expect(try endpoint.resolve(location: "24e533e0") == "https://tus.example.com/files/24e533e0")
    }

    @Test func anAbsoluteLocationOnTheSameServerIsTakenAsIs() throws {
        let endpoint = try TusEndpoint("http://127.0.0.1:1080/files/")
        #expect(try endpoint.resolve(location: "http://127.0.0.1:1080/files/abc") == "http://127.0.0.1:1080/files/abc")
        let https = try TusEndpoint("https://tus.example.com/files/")
        #expect(try https.resolve(location: "https://TUS.example.com:443/files/abc") == "https://TUS.example.com:443/files/abc")
    }

    @Test(arguments: [
        ("https://evil.example.net/files/abc", "https://evil.example.net:443"),
        ("https://tus.example.com:8443/files/abc", "https://tus.example.com:8443"),
        ("http://tus.example.com/files/abc", "http://tus.example.com:80"),
        ("//evil.example.net/files/abc", "https://evil.example.net:443"),
        ("https://user:pw@tus.example.com/files/abc", "https://tus.example.com:443"),
    ])
    func aLocationOnAnotherServerIsRefused(location: String, origin: String) throws {
        let endpoint = try TusEndpoint("https://tus.example.com/files/")
        #expect(throws: TusError.foreignServer(origin: origin)) { try endpoint.resolve(location: location) }
    }

    @Test(arguments: ["ftp://tus.example.com/files/", "tus.example.com/files/", "https:///files/",
                      "https://tus.example.com/files/#x"])
    func creationURLsThatAreNotHTTPSOrHTTPWithAHostAreRefused(url: String) {
        #expect(throws: TusError.self) { try TusEndpoint(url) }
    }

    @Test func aCreationURLWithAPasswordIsRefusedWithoutRepeatingIt() {
        do {
            _ = try TusEndpoint("https://user:s3cretpassw0rd@tus.example.com/files/")
            Issue.record("a creation URL with a password was accepted")
        } catch {
            #expect(!"\(error)".contains("s3cretpassw0rd"), "\(error)")
        }
    }

    // MARK: The client's headers

    @Test(arguments: [("X-Token", "a\r\nX-Other: b"), ("X-Token", "a\nb"), ("Bad Name", "v"), ("", "v"), ("X:Y", "v")])
    func headersThatWouldSmuggleOthersAreRefused(name: String, value: String) {
        #expect(throws: TusError.invalidHeader(name: name)) {
            try TusClient(
                creationURL: "https://tus.example.com/files/", headers: [(name: name, value: value)],
                transport: CurlTransport(), logger: Logger(label: "test"))
        }
    }

    @Test func theDescriptionNamesTheHeadersWithoutTheirValues() throws {
        let client = try TusClient(
            creationURL: "https://tus.example.com/files/", headers: [(name: "Authorization", value: "Bearer s3cr3t-t0ken")],
            transport: CurlTransport(), logger: Logger(label: "test"))
        #expect(client.description == "tus client of https://tus.example.com/files/ (headers: Authorization)")
    }

    // MARK: Retries and error text

    @Test(arguments: [(423, FailureKind.transient), (500, .transient), (503, .transient), (429, .throttled),
                      (460, .corruptedBody), (400, .permanent), (401, .permanent), (403, .permanent), (412, .permanent)])
    func statusesAreRetriedAsTusMeansThem(status: Int, kind: FailureKind) {
        #expect(TusClient.failureKind(status: status) == kind)
    }

    @Test func aChecksumMismatchIsSentAgainOnceThenFails() {
        var state = RetryState()
        #expect(RetryPolicy.part.decide(afterFailureOf: .corruptedBody, state: &state, random: 0.5) == .rereadPartAndRetry)
        #expect(RetryPolicy.part.decide(afterFailureOf: .corruptedBody, state: &state, random: 0.5) == .fail(.recoveryDidNotHelp))
    }

    @Test func aLockedUploadIsRetriedWithBackoffUntilTheBudgetIsSpent() {
        var state = RetryState()
        let policy = RetryPolicy(maxAttempts: 3, base: .milliseconds(100), cap: .seconds(1))
        #expect(policy.decide(afterFailureOf: .transient, state: &state, random: 0.5) == .retry(after: .milliseconds(50)))
        #expect(policy.decide(afterFailureOf: .transient, state: &state, random: 0.5) == .retry(after: .milliseconds(100)))
        #expect(policy.decide(afterFailureOf: .transient, state: &state, random: 0.5) == .fail(.attemptsExhausted(attempts: 3)))
    }

    @Test func anErrorBodyThatEchoesTheTokenIsRedactedBeforeItIsCut() {
        let token = "tok_" + String(repeating: "x", count: 300)
        let body = Array("{\"detail\": \"bad header Authorization: Bearer \(token)\"}\n".utf8)
        let excerpt = TusClient.excerpt(of: body, hiding: [("Authorization", "Bearer \(token)")])
        #expect(!excerpt.contains("tok_"))
        #expect(excerpt.contains("<redacted>"))
        #expect(!excerpt.contains("\n"))
    }

    @Test func aLongErrorBodyIsCutToOneShortLine() {
        let excerpt = TusClient.excerpt(of: Array((String(repeating: "a", count: 500) + "\nb").utf8), hiding: [])
        #expect(excerpt.count == 201)
        #expect(excerpt.hasSuffix("…"))
    }

    @Test func everyErrorNamesWhatToDo() {
        let errors: [TusError] = [
            .invalidCreationURL(reason: "is not a URL"), .invalidHeader(name: "X"), .foreignServer(origin: "https://e:443"),
            .invalidMetadataKey("a b"), .offsetMismatch(sent: 5), .uploadGone(status: 404),
            .checksumMismatch(algorithm: "sha1"), .server(status: 401, detail: "", attempts: 1),
            .server(status: 503, detail: "busy", attempts: 5), .unexpectedAnswer(status: 204, detail: "no Upload-Offset header"),
        ]
        for error in errors {
            let text = error.description
            #expect(text.contains(":") && text.count > 40, "\(text)")
        }
        #expect(TusError.server(status: 503, detail: "busy", attempts: 5).description.contains("after 5 attempts"))
    }
}
