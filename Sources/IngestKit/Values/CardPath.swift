/// A file's path relative to the scanned root, as the raw bytes the file system holds.
///
/// Linux names are bytes, not text: a card written by a camera with another code page can
/// hold names that are not valid UTF-8. Keeping the bytes means such a file can still be
/// opened, staged and matched on the next run; ``display`` is the readable form.
public struct CardPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }
    public init(_ text: String) { self.bytes = Array(text.utf8) }

    public var isValidUTF8: Bool { String(validating: bytes, as: UTF8.self) != nil }

    /// The path as text; bytes that are not UTF-8 appear as `\xNN`, and a backslash as `\\`
    /// only then, so valid names read exactly as they are.
    public var display: String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var out = ""
        var rest = bytes[...]
        while !rest.isEmpty {
            let valid = Self.longestValidPrefix(rest)
            if valid > 0 {
                out += String(decoding: rest.prefix(valid), as: UTF8.self).replacingBackslashes
                rest = rest.dropFirst(valid)
            } else {
                out += "\\x" + String(rest.first!, radix: 16, uppercase: true).leftPadded(to: 2)
                rest = rest.dropFirst()
            }
        }
        return out
    }

    public var description: String { display }

    /// The last component.
    public var name: ArraySlice<UInt8> {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return bytes[...] }
        return bytes[(slash + 1)...]
    }

    public func appending(_ name: some Collection<UInt8>) -> CardPath {
        CardPath(bytes: bytes.isEmpty ? Array(name) : bytes + [UInt8(ascii: "/")] + name)
    }

    /// The path as a NUL-terminated C string, for `openat` relative to the scanned root.
    var cString: [CChar] { bytes.map { CChar(bitPattern: $0) } + [0] }

    public static func < (a: CardPath, b: CardPath) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    private static func longestValidPrefix(_ bytes: ArraySlice<UInt8>) -> Int {
        var length = 0
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while case .scalarValue(let scalar) = decoder.decode(&iterator) {
            length += UTF8.width(scalar)
        }
        return length
    }
}

extension String {
    fileprivate var replacingBackslashes: String { replacing("\\", with: "\\\\") }
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
