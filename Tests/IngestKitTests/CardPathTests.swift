import Testing

@testable import IngestKit

@Suite struct CardPathTests {
    // MARK: construction

    @Test func textInitializerKeepsTheUTF8Bytes() {
        #expect(CardPath("DCIM/Café").bytes == [0x44, 0x43, 0x49, 0x4D, 0x2F, 0x43, 0x61, 0x66, 0xC3, 0xA9])
        #expect(CardPath("DCIM/Café") == CardPath(bytes: Array("DCIM/Café".utf8)))
    }

    // MARK: display

    @Test func validUTF8IsShownAsItIs() {
        let path = CardPath("DCIM/100CANON/Été à Zürich 📷.JPG")
        #expect(path.isValidUTF8)
        #expect(path.display == "DCIM/100CANON/Été à Zürich 📷.JPG")
        #expect(path.description == path.display)
    }

    @Test func backslashInAValidNameIsNotDoubled() {
        let path = CardPath(#"DCIM\IMG_0001.JPG"#)
        #expect(path.display == #"DCIM\IMG_0001.JPG"#)
    }

    @Test func invalidByteIsShownAsUppercaseHexEscape() {
        // "café.jpg" written by a camera in Latin-1: é is the single byte 0xE9.
        let path = CardPath(bytes: Array("DCIM/caf".utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(!path.isValidUTF8)
        #expect(path.display == #"DCIM/caf\xE9.jpg"#)
        #expect(path.description == #"DCIM/caf\xE9.jpg"#)
    }

    @Test func everyInvalidByteGetsItsOwnEscape() {
        let path = CardPath(bytes: [0xFF, 0xFE, 0x80])
        #expect(path.display == #"\xFF\xFE\x80"#)
    }

    @Test func truncatedSequenceEscapesOnlyItsBytes() {
        // 0xC3 starts a two-byte sequence, but "(" cannot continue it.
        #expect(CardPath(bytes: [0x61, 0xC3, 0x28]).display == #"a\xC3("#)
        // A lead byte and one of its two continuation bytes, then the end.
        #expect(CardPath(bytes: [0x61, 0xE2, 0x82]).display == #"a\xE2\x82"#)
        #expect(!CardPath(bytes: [0x61, 0xE2, 0x82]).isValidUTF8)
    }

    @Test func validCharactersAroundInvalidBytesAreKept() {
        let path = CardPath(bytes: Array("Été".utf8) + [0xFF] + Array("📷".utf8))
        #expect(path.display == #"Été\xFF📷"#)
    }

    @Test(arguments: [
        [0xC0, 0x80] as [UInt8],  // overlong NUL
        [0xED, 0xA0, 0x80],  // UTF-16 surrogate
        [0xF4, 0x90, 0x80, 0x80],  // beyond U+10FFFF
    ])
    func malformedSequencesAreNotValidUTF8(bytes: [UInt8]) {
        let path = CardPath(bytes: bytes)
        #expect(!path.isValidUTF8)
        #expect(path.display.hasPrefix(#"\x"#))
        #expect(path.display.unicodeScalars.allSatisfy { $0.isASCII })
    }

    @Test func backslashIsDoubledOnlyWhenTheNameHasInvalidBytes() {
        let path = CardPath(bytes: Array(#"DCIM\a"#.utf8) + [0xFF])
        #expect(path.display == #"DCIM\\a\xFF"#)
    }

    @Test func literalBackslashXTextAndAnInvalidByteStayDistinct() {
        // The four characters `\xFF` followed by the byte 0xFF, versus two 0xFF bytes.
        let text = CardPath(bytes: Array(#"\xFF"#.utf8) + [0xFF])
        let raw = CardPath(bytes: [0xFF, 0xFF])
        #expect(text.display == #"\\xFF\xFF"#)
        #expect(raw.display == #"\xFF\xFF"#)
        #expect(text.display != raw.display)
    }

    // MARK: name

    @Test func nameIsTheLastComponent() {
        #expect(Array(CardPath("DCIM/100CANON/IMG_0001.JPG").name) == Array("IMG_0001.JPG".utf8))
    }

    @Test func nameOfAPathWithoutSlashIsThePath() {
        #expect(Array(CardPath("IMG_0001.JPG").name) == Array("IMG_0001.JPG".utf8))
    }

    @Test func nameKeepsInvalidBytes() {
        let path = CardPath(bytes: Array("DCIM/".utf8) + [0xE9, 0x2E, 0x6A])
        #expect(Array(path.name) == [0xE9, 0x2E, 0x6A])
    }

    @Test func nameOfTheRootIsEmpty() {
        #expect(CardPath("").name.isEmpty)
    }

    // MARK: appending

    @Test func appendingToTheRootGivesTheNameAlone() {
        #expect(CardPath("").appending(Array("DCIM".utf8)) == CardPath("DCIM"))
    }

    @Test func appendingPutsASlashBetween() {
        #expect(CardPath("DCIM").appending(Array("100CANON".utf8)) == CardPath("DCIM/100CANON"))
        #expect(CardPath("DCIM/100CANON").appending("IMG_0001.JPG".utf8) == CardPath("DCIM/100CANON/IMG_0001.JPG"))
    }

    @Test func appendingRawBytesKeepsThem() {
        let path = CardPath("DCIM").appending([0xE9] as [UInt8])
        #expect(path.bytes == [0x44, 0x43, 0x49, 0x4D, 0x2F, 0xE9])
        #expect(Array(path.name) == [0xE9])
    }

    @Test func appendingASliceOfAnotherPathsName() {
        let source = CardPath("MISC/IMG_0001.JPG")
        #expect(CardPath("BACKUP").appending(source.name) == CardPath("BACKUP/IMG_0001.JPG"))
    }

    // MARK: ordering and identity

    @Test func orderIsByBytes() {
        #expect(CardPath("B") < CardPath("a"))  // 0x42 < 0x61
        #expect(CardPath("a.b") < CardPath("a/b"))  // '.' 0x2E < '/' 0x2F
        #expect(CardPath("DCIM") < CardPath("DCIM/100CANON"))
        #expect(CardPath("z") < CardPath("é"))  // 0x7A < 0xC3
        #expect(CardPath(bytes: [0x7F]) < CardPath(bytes: [0x80]))
        #expect(!(CardPath("a") < CardPath("a")))
    }

    @Test func sortingOrdersLikeByteComparison() {
        let paths = ["b", "B", "a/b", "a.b", "a", "é", "_"].map(CardPath.init)
        let sorted = paths.sorted().map(\.display)
        #expect(sorted == ["B", "_", "a", "a.b", "a/b", "b", "é"])
    }

    @Test func composedAndDecomposedAccentsAreDifferentPaths() {
        // Swift's String treats these as equal; a file system does not.
        let composed = CardPath("caf\u{E9}")
        let decomposed = CardPath("cafe\u{301}")
        #expect("caf\u{E9}" == "cafe\u{301}")
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed]).count == 2)
        #expect(decomposed < composed)  // 'e' 0x65 < 0xC3
    }

    @Test func cStringIsTheBytesWithATerminatingNUL() {
        let path = CardPath(bytes: Array("a/".utf8) + [0xE9])
        #expect(path.cString.map { UInt8(bitPattern: $0) } == [0x61, 0x2F, 0xE9, 0])
    }
}
