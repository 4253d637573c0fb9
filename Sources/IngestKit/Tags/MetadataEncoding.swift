import Foundation

/// How a label's value travels in an `x-amz-meta-*` header and comes back.
///
/// HTTP header values are ASCII in practice: S3 refuses or drops metadata it cannot print
/// (a HEAD then says `x-amz-missing-meta`), and HTTP trims spaces at either end. So a value
/// that is printable ASCII with no space at either end is sent as it is, and every other value
/// as one RFC 2047 encoded word, `=?UTF-8?B?<base64>?=`: what AWS SDKs send, and what S3
/// stores and returns unchanged. A value that itself looks like an encoded word (starts with
/// `=?` and ends with `?=`) is encoded too, so that decoding always gives back what was
/// encoded.
///
/// A file name that is not UTF-8 is sent as `=?UNKNOWN-8BIT?B?<base64 of its bytes>?=`
/// (`UNKNOWN-8BIT` is the IANA charset of RFC 1428 for exactly this: bytes of no known
/// encoding). Labelling such bytes `UTF-8` would be a lie other tools could trip on; this way
/// the raw bytes come back losslessly with ``decodeBytes(_:)``, and ``decode(_:)`` shows them
/// the way ``CardPath/display`` does.
///
/// The value is one encoded word however long: RFC 2047's 75-character words exist for mail
/// header folding, which HTTP does not do. The decoder still reads several words separated by
/// spaces, B or Q encoding, and the UTF-8, US-ASCII, ISO-8859-1 and UNKNOWN-8BIT charsets.
public enum MetadataEncoding {
    /// `value` as it is sent in a header.
    public static func encode(_ value: String) -> String { encode(bytes: Array(value.utf8)) }

    /// `bytes` as they are sent in a header; they need not be UTF-8.
    public static func encode(bytes: [UInt8]) -> String {
        if isPlain(bytes) { return String(decoding: bytes, as: UTF8.self) }
        let charset = String(validating: bytes, as: UTF8.self) == nil ? "UNKNOWN-8BIT" : "UTF-8"
        return "=?\(charset)?B?\(Data(bytes).base64EncodedString())?="
    }

    /// A header value as text to show: decoded when it is made of encoded words, as it is
    /// otherwise; bytes that are not UTF-8 read as `\xNN`, as ``CardPath/display`` shows them.
    public static func decode(_ header: String) -> String { CardPath(bytes: decodeBytes(header)).display }

    /// The bytes a header value stands for. A value that is not entirely encoded words, or
    /// whose words cannot be decoded, stands for itself: values other tools wrote are shown as
    /// they are rather than refused.
    public static func decodeBytes(_ header: String) -> [UInt8] {
        let plain = Array(header.utf8)
        let words = header.utf8.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A })
        guard !words.isEmpty else { return plain }
        var bytes: [UInt8] = []
        for word in words {
            guard let decoded = decodeWord(Array(word)) else { return plain }
            bytes += decoded
        }
        return bytes
    }

    /// Printable ASCII, no space at either end, and not mistakable for an encoded word.
    private static func isPlain(_ bytes: [UInt8]) -> Bool {
        guard bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return false }
        guard let first = bytes.first, let last = bytes.last else { return true }
        if first == 0x20 || last == 0x20 { return false }
        return !(bytes.starts(with: wordStart) && bytes.reversed().starts(with: wordEnd.reversed()))
    }

    private static let wordStart = Array("=?".utf8)
    private static let wordEnd = Array("?=".utf8)

    /// The bytes of one `=?charset?encoding?text?=` word, or nil if it is not one.
    private static func decodeWord(_ word: [UInt8]) -> [UInt8]? {
        guard word.count >= 8, word.starts(with: wordStart), word.reversed().starts(with: wordEnd.reversed())
        else { return nil }
        let inner = word.dropFirst(2).dropLast(2)
        let parts = inner.split(separator: UInt8(ascii: "?"), omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        // RFC 2231 lets a language follow the charset: `UTF-8*en`.
        let charset = String(decoding: parts[0].prefix { $0 != UInt8(ascii: "*") }, as: UTF8.self).uppercased()
        let encoded: [UInt8]
        switch String(decoding: parts[1], as: UTF8.self).uppercased() {
        case "B":
            guard let bytes = base64(parts[2]) else { return nil }
            encoded = bytes
        case "Q":
            guard let bytes = quotedPrintable(parts[2]) else { return nil }
            encoded = bytes
        default:
            return nil
        }
        switch charset {
        case "UTF-8", "US-ASCII", "UNKNOWN-8BIT":
            return encoded
        case "ISO-8859-1", "LATIN1":
            // Each byte is the code point of the same number.
            return encoded.flatMap { Array(String(Character(Unicode.Scalar($0))).utf8) }
        default:
            return nil
        }
    }

    private static func base64(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var padded = String(decoding: text, as: UTF8.self)
        // Some encoders leave out the final `=` padding.
        padded += String(repeating: "=", count: (4 - padded.utf8.count % 4) % 4)
        return Data(base64Encoded: padded).map { Array($0) }
    }

    /// RFC 2047's Q encoding: `_` is a space, `=XX` a byte in hex, anything else itself.
    private static func quotedPrintable(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var bytes: [UInt8] = []
        var rest = text
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "_"):
                bytes.append(0x20)
            case UInt8(ascii: "="):
                guard rest.count >= 2, let high = hexValue(rest.removeFirst()), let low = hexValue(rest.removeFirst())
                else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
