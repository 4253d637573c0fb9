/// Text for a terminal or a log line. A card's names are hostile input: a newline would
/// forge a second line in the journal, an escape sequence can move the cursor, retitle the
/// terminal or hide what follows, and a bidirectional override can show a name reversed.
/// Each such character is shown as an escape instead (`\n`, `\t`, `\r`, `\x1B`, `\u{202E}`),
/// so one name stays one visible piece of one line. NDJSON needs none of this: its strings
/// are JSON-escaped.
public enum Printable {
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isUnsafe(scalar) else {
                out.append(scalar)
                continue
            }
            let escape: String =
                switch scalar {
                case "\n": "\\n"
                case "\t": "\\t"
                case "\r": "\\r"
                case _ where scalar.value < 0x100: "\\x" + hex(scalar.value, width: 2)
                default: "\\u{" + hex(scalar.value, width: 4) + "}"
                }
            out.append(contentsOf: escape.unicodeScalars)
        }
        return String(out)
    }

    /// C0 and C1 control characters, DEL, and the bidirectional embeddings, overrides and
    /// isolates (U+202A–U+202E, U+2066–U+2069).
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00..<0x20, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

extension ReportOutput {
    /// Writes one line of text for people, its unsafe characters escaped (``Printable``).
    public func line(_ text: String) { write(Printable.escaped(text) + "\n") }
}
