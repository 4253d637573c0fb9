import Testing

@testable import IngestKit

@Suite struct MetadataEncodingTests {
    @Test(arguments: [
        "station-3", "DRONE 3", "a=b&c", "00112233445566778899aabbccddeeff", "100% done", "=?not a word", "",
    ])
    func printableASCIIIsSentAsItIs(value: String) {
        #expect(MetadataEncoding.encode(value) == value)
        #expect(MetadataEncoding.decode(value) == value)
    }

    @Test func nonASCIIIsOneUTF8EncodedWordAsAWSSDKsWriteIt() {
        // base64("Zürich") of its UTF-8 bytes.
        #expect(MetadataEncoding.encode("Zürich") == "=?UTF-8?B?WsO8cmljaA==?=")
        #expect(MetadataEncoding.decode("=?UTF-8?B?WsO8cmljaA==?=") == "Zürich")
    }

    @Test(arguments: [
        " leading", "trailing ", "tab\there", "line\nbreak", "nul\u{0}byte", "del\u{7F}", "=?UTF-8?B?WsO8cmljaA==?=",
    ])
    func valuesHTTPWouldAlterOrMisreadAreEncoded(value: String) {
        let encoded = MetadataEncoding.encode(value)
        #expect(encoded.hasPrefix("=?UTF-8?B?") && encoded.hasSuffix("?="))
        #expect(encoded.utf8.allSatisfy { (0x21...0x7E).contains($0) }, "a header-safe token")
        #expect(MetadataEncoding.decode(encoded) == value)
    }

    @Test func everyValueRoundTrips() {
        let samples = [
            "plain", "Été à Zürich 📷", "東京", "  ", " ", "=?", "?=", "=??=", "=?a?b?c?=", "=?UTF-8?Q?x?= tail",
            "a  b", "\u{FEFF}bom", "e\u{301}", String(repeating: "é", count: 500), "=?UTF-8?B?YQ==?= =?UTF-8?B?Yg==?=",
        ]
        for value in samples {
            let encoded = MetadataEncoding.encode(value)
            #expect(
                MetadataEncoding.decodeBytes(encoded) == Array(value.utf8), "\(value.debugDescription) → \(encoded)")
        }
    }

    @Test func everyByteSequenceRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(MetadataEncoding.decodeBytes(MetadataEncoding.encode(bytes: bytes)) == bytes, "\(bytes)")
        }
    }

    @Test func bytesThatAreNotUTF8AreMarkedUnknown8BitAndShownAsCardPathsAre() {
        let bytes = Array("caf".utf8) + [0xE9]
        let encoded = MetadataEncoding.encode(bytes: bytes)
        #expect(encoded == "=?UNKNOWN-8BIT?B?Y2Fm6Q==?=")
        #expect(MetadataEncoding.decodeBytes(encoded) == bytes)
        #expect(MetadataEncoding.decode(encoded) == #"caf\xE9"#)
    }

    @Test func theDecoderReadsOtherEncodersWords() {
        #expect(MetadataEncoding.decode("=?utf-8?b?WsO8cmljaA?=") == "Zürich", "lower case, no padding")
        #expect(MetadataEncoding.decode("=?UTF-8?Q?Z=C3=BCrich_am_See?=") == "Zürich am See")
        #expect(MetadataEncoding.decode("=?ISO-8859-1?Q?Z=FCrich?=") == "Zürich")
        #expect(MetadataEncoding.decode("=?UTF-8*de?B?WsO8cmljaA==?=") == "Zürich", "RFC 2231 language")
        #expect(MetadataEncoding.decode("=?UTF-8?B?WsO8?= =?UTF-8?B?cmljaA==?=") == "Zürich", "adjacent words join")
    }

    @Test(arguments: [
        "=?UTF-8?B?not base64!?=", "=?KOI8-R?B?YQ==?=", "=?UTF-8?X?abc?=", "=?UTF-8?Q?bad=Z1?=",
        "text =?UTF-8?B?YQ==?=",
        "=?UTF-8?B?YQ==?= text", "=?UTF-8?B?YQ==",
    ])
    func whatIsNotEncodedWordsIsShownAsItIs(header: String) {
        #expect(MetadataEncoding.decode(header) == header)
    }
}
