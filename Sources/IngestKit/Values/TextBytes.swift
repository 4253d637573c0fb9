/// Text written byte by byte, for the strings made once or more per file of a card
/// (fingerprints, digests, JSON lines, the journal's headers column): into one byte buffer,
/// where joining and appending strings cost more than the work they carried.

/// Lower-case hexadecimal digits, as ASCII bytes.
let lowercaseHexDigits = Array("0123456789abcdef".utf8)

/// Bytes as lower-case hexadecimal, two digits each (fingerprints, SigV4 hashes and
/// signatures, MD5 ETags).
func lowercaseHex(_ bytes: some Sequence<UInt8>) -> String {
    var result: [UInt8] = []
    result.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        result.append(lowercaseHexDigits[Int(byte >> 4)])
        result.append(lowercaseHexDigits[Int(byte & 0x0F)])
    }
    return String(decoding: result, as: UTF8.self)
}

/// An ASCII byte with `A`–`Z` lower-cased; any other byte as it is (header names, which
/// HTTP and SigV4 compare without regard to case).
func asciiLowercased(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
}

/// Appends `text` as a JSON string (RFC 8259): `"` and `\` escaped, `\n`, `\r` and `\t` by
/// their short escapes, other control characters as `\u00XX`; every other byte as it is (a
/// Swift string is valid UTF-8), copied a run at a time.
func appendJSONString(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var text = text
    text.withUTF8 { bytes in
        var plain = 0
        for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            out += bytes[plain..<index]
            plain = index + 1
            switch byte {
            case UInt8(ascii: "\""): out += #"\""#.utf8
            case UInt8(ascii: "\\"): out += #"\\"#.utf8
            case UInt8(ascii: "\n"): out += #"\n"#.utf8
            case UInt8(ascii: "\r"): out += #"\r"#.utf8
            case UInt8(ascii: "\t"): out += #"\t"#.utf8
            default:
                out += #"\u00"#.utf8
                out.append(lowercaseHexDigits[Int(byte >> 4)])
                out.append(lowercaseHexDigits[Int(byte & 0x0F)])
            }
        }
        out += bytes[plain...]
    }
    out.append(UInt8(ascii: "\""))
}
