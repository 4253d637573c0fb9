/// A shell-style pattern for include and exclude rules, matched against card paths.
///
/// - `*` matches any run of characters within one path component, `?` one character,
///   `[abc]`, `[a-z]` and `[!abc]` one character of (or not of) a set (`[]x]` and `[[]`
///   hold a literal `]` or `[`);
/// - `**` matches across directories: `DCIM/**/*.JPG` matches at any depth below `DCIM`;
/// - a pattern without `/` matches a file or directory name at any depth (`*.tmp`), one
///   with `/` matches the whole path from the card's root;
/// - letters A–Z match without regard to case, as on the FAT and exFAT cards cameras write;
/// - characters are Unicode scalars (`?` matches `é`); a byte of a name that is not UTF-8
///   counts as one character.
public struct Glob: Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    private let units: [UInt32]
    private let matchesNameOnly: Bool

    public init(_ pattern: String) throws(GlobError) {
        guard !pattern.isEmpty else { throw GlobError(pattern: pattern, problem: "is empty") }
        var units = pattern.unicodeScalars.map { Self.folded($0.value) }
        if units.first == Self.slash { units.removeFirst() }  // "/DCIM" means at the root
        var index = 0
        while index < units.count {
            if units[index] == Self.open {
                guard let close = Self.closingBracket(units, after: index) else {
                    throw GlobError(pattern: pattern, problem: "has a '[' without its ']'")
                }
                index = close
            }
            index += 1
        }
        self.pattern = pattern
        self.units = units
        self.matchesNameOnly = !pattern.unicodeScalars.contains("/")
    }

    public var description: String { pattern }

    public func matches(_ path: CardPath) -> Bool {
        Self.match(units[...], Self.units(of: matchesNameOnly ? path.name : path.bytes[...])[...])
    }

    private static let slash = UInt32(UInt8(ascii: "/"))
    private static let star = UInt32(UInt8(ascii: "*"))
    private static let question = UInt32(UInt8(ascii: "?"))
    private static let open = UInt32(UInt8(ascii: "["))
    private static let close = UInt32(UInt8(ascii: "]"))
    private static let dash = UInt32(UInt8(ascii: "-"))

    /// A name's characters: Unicode scalars where the bytes are UTF-8, and each other byte as
    /// a value above the Unicode range, so it matches `?` and `*` but no literal.
    private static func units(of bytes: ArraySlice<UInt8>) -> [UInt32] {
        var units: [UInt32] = []
        var rest = bytes
        while !rest.isEmpty {
            var iterator = rest.makeIterator()
            var decoder = UTF8()
            if case .scalarValue(let scalar) = decoder.decode(&iterator) {
                units.append(folded(scalar.value))
                rest = rest.dropFirst(UTF8.width(scalar))
            } else {
                units.append(0x11_0000 + UInt32(rest.first!))
                rest = rest.dropFirst()
            }
        }
        return units
    }

    private static func folded(_ unit: UInt32) -> UInt32 {
        (0x41...0x5A).contains(unit) ? unit + 32 : unit
    }

    /// The index of the `]` that closes the set opened at `start`, or nil.
    private static func closingBracket(_ units: [UInt32], after start: Int) -> Int? {
        var index = start + 1
        if index < units.count, units[index] == UInt32(UInt8(ascii: "!")) || units[index] == UInt32(UInt8(ascii: "^")) {
            index += 1
        }
        if index < units.count, units[index] == close { index += 1 }  // a leading ']' is literal
        while index < units.count {
            if units[index] == close { return index }
            index += 1
        }
        return nil
    }

    private static func match(_ pattern: ArraySlice<UInt32>, _ subject: ArraySlice<UInt32>) -> Bool {
        var p = pattern
        var s = subject
        while let token = p.first {
            switch token {
            case star:
                let isDouble = p.dropFirst().first == star
                p = p.dropFirst(isDouble ? 2 : 1)
                if isDouble, p.first == slash, match(p.dropFirst(), s) {
                    return true  // "**/" also matches no directory at all
                }
                var rest = s
                while true {
                    if match(p, rest) { return true }
                    guard let next = rest.first, isDouble || next != slash else { return false }
                    rest = rest.dropFirst()
                }
            case question:
                guard let next = s.first, next != slash else { return false }
                p = p.dropFirst()
                s = s.dropFirst()
            case open:
                guard let next = s.first, next != slash, let (matched, rest) = matchSet(p, next), matched else { return false }
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

    /// Matches one character against the `[...]` set at the start of `pattern`; returns
    /// whether it matched and the pattern after the set.
    private static func matchSet(_ pattern: ArraySlice<UInt32>, _ unit: UInt32) -> (Bool, ArraySlice<UInt32>)? {
        let units = Array(pattern)
        guard let end = closingBracket(units, after: 0) else { return nil }
        var members = units[1..<end]
        let negated = members.first == UInt32(UInt8(ascii: "!")) || members.first == UInt32(UInt8(ascii: "^"))
        if negated { members = members.dropFirst() }
        var matched = false
        while let low = members.first {
            members = members.dropFirst()
            if members.first == dash, let high = members.dropFirst().first {
                if low <= unit && unit <= high { matched = true }
                members = members.dropFirst(2)
            } else if low == unit {
                matched = true
            }
        }
        return (matched != negated, pattern.dropFirst(end + 1))
    }
}

public struct GlobError: Error, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    public let problem: String
    public var description: String { "pattern '\(pattern)' \(problem)" }
}
