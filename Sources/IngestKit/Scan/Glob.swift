/// A shell-style pattern for include and exclude rules, matched against card paths.
///
/// - `*` matches any run of characters within one path component, `?` one character,
///   `[abc]`, `[a-z]` and `[!abc]` one character of (or not of) a set;
/// - `**` matches across directories: `DCIM/**/*.JPG` matches at any depth below `DCIM`;
/// - a pattern without `/` matches a file or directory name at any depth (`*.tmp`), one
///   with `/` matches the whole path from the card's root;
/// - letters match without regard to case, as on the FAT and exFAT cards cameras write.
public struct Glob: Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    private let bytes: [UInt8]
    private let matchesNameOnly: Bool

    public init(_ pattern: String) throws(GlobError) {
        guard !pattern.isEmpty else { throw GlobError(pattern: pattern, problem: "is empty") }
        var trimmed = Array(pattern.utf8)
        if trimmed.first == UInt8(ascii: "/") { trimmed.removeFirst() }  // "/DCIM" means at the root
        var depth = 0
        for byte in trimmed {
            if byte == UInt8(ascii: "[") { depth += 1 }
            if byte == UInt8(ascii: "]"), depth > 0 { depth -= 1 }
        }
        guard depth == 0 else { throw GlobError(pattern: pattern, problem: "has a '[' without its ']'") }
        self.pattern = pattern
        self.bytes = trimmed.map(Self.folded)
        self.matchesNameOnly = !pattern.utf8.contains(UInt8(ascii: "/"))
    }

    public var description: String { pattern }

    public func matches(_ path: CardPath) -> Bool {
        let subject = (matchesNameOnly ? Array(path.name) : path.bytes).map(Self.folded)
        return Self.match(bytes[...], subject[...])
    }

    private static func folded(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    private static let slash = UInt8(ascii: "/")

    private static func match(_ pattern: ArraySlice<UInt8>, _ subject: ArraySlice<UInt8>) -> Bool {
        var p = pattern
        var s = subject
        while let token = p.first {
            switch token {
            case UInt8(ascii: "*"):
                let isDouble = p.dropFirst().first == UInt8(ascii: "*")
                p = p.dropFirst(isDouble ? 2 : 1)
                if isDouble, p.first == slash {
                    // "**/" also matches no directory at all.
                    if match(p.dropFirst(), s) { return true }
                }
                var rest = s
                while true {
                    if match(p, rest) { return true }
                    guard let next = rest.first, isDouble || next != slash else { return false }
                    rest = rest.dropFirst()
                }
            case UInt8(ascii: "?"):
                guard let next = s.first, next != slash else { return false }
                p = p.dropFirst()
                s = s.dropFirst()
            case UInt8(ascii: "["):
                guard let next = s.first, next != slash,
                    let (matched, rest) = matchClass(p.dropFirst(), next), matched
                else { return false }
                p = rest
                s = s.dropFirst()
            default:
                guard s.first == token else { return false }
                p = p.dropFirst()
                s = s.dropFirst()
            }
        }
        return s.isEmpty
    }

    /// Matches one byte against a `[...]` set whose `[` is already consumed; returns whether
    /// it matched and the pattern after the closing `]`.
    private static func matchClass(_ set: ArraySlice<UInt8>, _ byte: UInt8) -> (Bool, ArraySlice<UInt8>)? {
        var rest = set
        let negated = rest.first == UInt8(ascii: "!") || rest.first == UInt8(ascii: "^")
        if negated { rest = rest.dropFirst() }
        var matched = false
        var first = true
        while let current = rest.first, current != UInt8(ascii: "]") || first {
            first = false
            rest = rest.dropFirst()
            if rest.first == UInt8(ascii: "-"), let upper = rest.dropFirst().first, upper != UInt8(ascii: "]") {
                if (current...upper).contains(byte) { matched = true }
                rest = rest.dropFirst(2)
            } else if current == byte {
                matched = true
            }
        }
        guard rest.first == UInt8(ascii: "]") else { return nil }
        return (matched != negated, rest.dropFirst())
    }
}

public struct GlobError: Error, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    public let problem: String
    public var description: String { "pattern '\(pattern)' \(problem)" }
}
