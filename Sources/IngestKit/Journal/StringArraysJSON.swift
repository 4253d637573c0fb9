/// The JSON of an array of arrays of strings, `[["a","b"],["c"]]`: how an upload's headers
/// are kept in the journal (``UploadRecord/headers``). Written when a file is planned and
/// read when it is sent, once per file each; Foundation's `JSONEncoder` and `JSONDecoder`
/// took a visible share of the CPU time of a card of small files for it, this a small part of that.
///
/// Writes RFC 8259 JSON, its strings as the `--json` lines' (``appendJSONString(_:to:)``).
/// Reads any JSON of that shape, whitespace and every escape included
/// (journals written by `JSONEncoder`, which escapes `/`, read the same), and nothing else.
enum StringArraysJSON {
    static func encode(_ arrays: [[String]]) -> String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (index, array) in arrays.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            for (position, string) in array.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                appendJSONString(string, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// The arrays `text` holds; nil when it is not JSON of that shape.
    static func decode(_ text: String) -> [[String]]? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            guard let arrays = reader.arrays(), reader.atEnd else { return nil }
            return arrays
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return at == bytes.count
            }
        }

        mutating func skipSpace() {
            while at < bytes.count {
                switch bytes[at] {
                case 0x20, 0x09, 0x0A, 0x0D: at += 1
                default: return
                }
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        /// `[` elements `]`, each read by `element`, separated by commas.
        mutating func list<T>(_ element: (inout Reader) -> T?) -> [T]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var items: [T] = []
            if take(UInt8(ascii: "]")) { return items }
            repeat {
                guard let item = element(&self) else { return nil }
                items.append(item)
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) ? items : nil
        }

        mutating func arrays() -> [[String]]? { list { $0.list { $0.string() } } }

        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var out: [UInt8] = []
            while at < bytes.count {
                let byte = bytes[at]
                at += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard at < bytes.count else { return nil }
                    let escape = bytes[at]
                    at += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        out += Array(String(Character(scalar)).utf8)
                    default: return nil
                    }
                case 0..<0x20:
                    return nil  // a control character must be escaped
                default:
                    out.append(byte)
                }
            }
            return nil
        }

        /// The scalar of `\uXXXX` (the `\u` read), or of a surrogate pair `\uD8XX\uDCXX`.
        mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let first = hexQuad() else { return nil }
            guard (0xD800..<0xDC00).contains(first) else { return Unicode.Scalar(first) }
            guard at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else { return nil }
            at += 2
            guard let second = hexQuad(), (0xDC00..<0xE000).contains(second) else { return nil }
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        }

        mutating func hexQuad() -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = Character(Unicode.Scalar(bytes[at])).hexDigitValue else { return nil }
                value = value << 4 | UInt32(digit)
                at += 1
            }
            return value
        }
    }
}
