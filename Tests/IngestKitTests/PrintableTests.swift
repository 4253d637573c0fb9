import Testing

@testable import IngestKit

/// What a card's names can do to a terminal or a log: nothing.
@Suite struct PrintableTests {
    @Test(arguments: [
        ("DCIM/DJI_0001.JPG", "DCIM/DJI_0001.JPG"),
        ("Été 📷.jpg", "Été 📷.jpg"),
        ("a\nb.jpg", "a\\nb.jpg"),
        ("x\r\tY", "x\\r\\tY"),
        ("\u{1B}]0;pwned\u{07}.jpg", "\\x1B]0;pwned\\x07.jpg"),
        ("\u{1B}[2J\u{1B}[H", "\\x1B[2J\\x1B[H"),
        ("c1\u{9B}31m", "c1\\x9B31m"),
        ("del\u{7F}", "del\\x7F"),
        ("gpj.\u{202E}exe", "gpj.\\u{202E}exe"),
        ("\u{2066}iso\u{2069}", "\\u{2066}iso\\u{2069}"),
        ("nul\u{0}", "nul\\x00"),
    ])
    func unsafeCharactersAreShownAsEscapes(text: String, shown: String) {
        #expect(Printable.escaped(text) == shown)
    }

    @Test func anEscapedLineHoldsNoControlCharacter() {
        let hostile = (0..<0x200).compactMap(Unicode.Scalar.init).map(String.init).joined() + "\u{202E}\u{2068}"
        let shown = Printable.escaped(hostile)
        #expect(!shown.unicodeScalars.contains { Printable.isUnsafe($0) })
        #expect(shown.contains("\\n") && shown.contains("\\x1B") && shown.contains("\\u{202E}"))
    }
}
