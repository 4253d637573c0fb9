import Crypto
import Foundation

// ASC MHL (ASC Media Hash List, specification v1.0 of 2022-03-15, XML version "2.0"): the
// film industry's per-folder hash history, which a client verifies with the ASC's reference
// tool `ascmhl` (PyPI `ascmhl`, checked against 1.2). The layout it expects:
//
//     <folder>/ascmhl/0001_<folder>_2026-11-28_113713Z.mhl   one manifest per generation
//     <folder>/ascmhl/ascmhl_chain.xml                        every generation and its C4 id
//
// Paths in a manifest are relative to <folder>. `ascmhl` ignores files named `.DS_Store`
// and anything named `ascmhl` (the history itself) at any depth, and reports every other
// file that no generation records as new. Directory and root hashes are optional and left
// out: they are XXH128 hashes of hashes, which this file (Foundation and swift-crypto only)
// cannot compute, and the file hashes alone are what `ascmhl` verifies.

/// One file's record in a manifest.
public struct MHLEntry: Sendable, Equatable {
    /// Relative to the folder the history covers, `/`-separated, with no leading `/` and no
    /// empty, `.` or `..` components (not checked: a directory walk yields no others):
    /// exactly the name `ascmhl` will find on disk after a download, byte for byte (it
    /// compares code points, so no Unicode normalization happens here either).
    public var path: String
    public var size: Int64
    public var lastModified: Date
    /// XXH3-128 as `xxh128sum` prints it: 32 lower-case hex digits. `ascmhl` compares it as
    /// text with its own lower-case digest, so any other spelling would fail verification.
    public var xxh128: String
    /// When the hash was taken.
    public var hashDate: Date

    public init(path: String, size: Int64, lastModified: Date, xxh128: String, hashDate: Date) {
        self.path = path
        self.size = size
        self.lastModified = lastModified
        self.xxh128 = xxh128
        self.hashDate = hashDate
    }
}

/// Who wrote a manifest: the schema's `<creatorinfo>`.
public struct MHLCreator: Sendable, Equatable {
    /// One fact about the station, the card or the scene, shown as a `key: value` line.
    public struct Detail: Sendable, Equatable {
        public var key: String
        public var value: String

        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    public var toolName: String
    public var toolVersion: String
    public var hostName: String
    /// The person who ran the ingest, if the station knows one: `<author>`.
    public var authorName: String?
    /// The card's file-system UUID, label and serial, the device and its tags, the scene.
    /// They go into `<comment>`, one `key: value` line each: the schema's `creatorinfo` holds
    /// nothing else that fits (`<location>` is a geographical place, `<author>` a person),
    /// the implementation guidelines (§2.2) name `<comment>` as the place for context the
    /// specification does not cover, and `ascmhl info -v` prints it. (`<metadata>` would take
    /// any XML, but the schema and the specification's prose disagree on where it goes.)
    public var details: [Detail]

    public init(toolName: String, toolVersion: String, hostName: String, authorName: String? = nil, details: [Detail] = []) {
        self.toolName = toolName
        self.toolVersion = toolVersion
        self.hostName = hostName
        self.authorName = authorName
        self.details = details
    }
}

/// The schema's `<process>`: how the hashes in a manifest came to be.
public enum MHLProcess: String, Sendable {
    /// Files were copied and hashed on the way, and the copy is known to equal the source
    /// (here: hashed while read from the card, and every part's checksum verified by the
    /// object store). The right value for an ingest.
    case transfer
    /// Files were hashed where they lie, without being copied.
    case inPlace = "in-place"
}

/// One generation as the chain file lists it.
public struct MHLGeneration: Sendable, Equatable {
    /// 1 for the first manifest of a history, then one more for each.
    public var number: Int
    /// The manifest's file name, relative to the `ascmhl` directory.
    public var fileName: String
    /// The manifest's C4 id (``ASCMHL/c4(_:)`` of its bytes).
    public var c4: String

    public init(number: Int, fileName: String, c4: String) {
        self.number = number
        self.fileName = fileName
        self.c4 = c4
    }
}

/// A manifest that cannot be written.
public enum ASCMHLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// These paths hold characters XML 1.0 cannot carry at all, not even escaped: control
    /// characters other than tab, line feed and carriage return, U+FFFE and U+FFFF.
    /// (`ascmhl` itself crashes on such a name, leaving a truncated manifest behind.)
    case unrecordablePaths([String])

    public var description: String {
        switch self {
        case .unrecordablePaths(let paths):
            let shown = paths.prefix(3).map { String(reflecting: $0) }.joined(separator: ", ")
            return "\(paths.count) file name(s) hold control characters that an ASC MHL manifest (XML 1.0) cannot "
                + "record, e.g. \(shown): write the manifest without them (those files stay uploaded, but "
                + "ascmhl will report them as new), or rename them on the card and ingest it again"
        }
    }
}

public enum ASCMHL {
    /// The directory, at the top of the folder it covers, that holds a history.
    public static let directoryName = "ascmhl"
    /// The chain file's name inside ``directoryName``.
    public static let chainFileName = "ascmhl_chain.xml"

    static let manifestNamespace = "urn:ASC:MHL:v2.0"
    static let chainNamespace = "urn:ASC:MHL:DIRECTORY:v2.0"
    /// `ascmhl`'s default ignore list, which it writes into every manifest. A manifest that
    /// named no patterns would get the same list when read, but writing it says so to anyone
    /// reading the XML, and the specification forbids records for what it matches.
    static let ignorePatterns = [".DS_Store", directoryName, directoryName + "/"]

    // MARK: Manifest

    /// The manifest of one generation: UTF-8 XML, one `<hash>` per entry in the order given,
    /// each with its size, last-modification date and `xxh128` marked `original` with its
    /// hash date.
    ///
    /// Entries that the manifest's own ignore patterns match (a path component `.DS_Store`
    /// or `ascmhl`) are left out: the specification forbids records for them, and `ascmhl`
    /// never looks at those files anyway.
    ///
    /// Every entry is marked `original`, the first hash of its file in the history, so a
    /// later generation must list only files that no earlier one records (the
    /// specification's "history append"); a file hashed again would need `verified`.
    ///
    /// With no entries left the manifest has no `<hashes>` at all: the schema allows a
    /// missing list but not an empty one.
    ///
    /// Linear in the entries: the text is built in one buffer, without a string per entry.
    ///
    /// - Throws: ``ASCMHLError/unrecordablePaths(_:)`` listing every path XML cannot hold.
    public static func manifest(
        entries: [MHLEntry], creator: MHLCreator, created: Date, process: MHLProcess
    ) throws(ASCMHLError) -> [UInt8] {
        var xml: [UInt8] = []
        // About 300 bytes per entry (path, size, two dates, hash, markup).
        xml.reserveCapacity(2_048 + entries.count * 300)
        xml.append(text: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        xml.append(text: "<hashlist version=\"2.0\" xmlns=\"\(manifestNamespace)\">\n")

        xml.append(text: "  <creatorinfo>\n    <creationdate>")
        xml.appendDate(created, withMicroseconds: false)
        xml.append(text: "</creationdate>\n    <hostname>")
        xml.appendEscaped(creator.hostName)
        xml.append(text: "</hostname>\n    <tool version=\"")
        xml.appendEscaped(creator.toolVersion)
        xml.append(text: "\">")
        xml.appendEscaped(creator.toolName)
        xml.append(text: "</tool>\n")
        if let author = creator.authorName {
            xml.append(text: "    <author>")
            xml.appendEscaped(author)
            xml.append(text: "</author>\n")
        }
        if !creator.details.isEmpty {
            xml.append(text: "    <comment>")
            for (index, detail) in creator.details.enumerated() {
                // The lines are separated by a literal line feed, which XML keeps in element
                // text; one inside a key or value would split its line, so it becomes a space.
                if index > 0 { xml.append(UInt8(ascii: "\n")) }
                xml.appendEscaped(detail.key.onOneLine)
                xml.append(text: ": ")
                xml.appendEscaped(detail.value.onOneLine)
            }
            xml.append(text: "</comment>\n")
        }
        xml.append(text: "  </creatorinfo>\n")

        xml.append(text: "  <processinfo>\n    <process>\(process.rawValue)</process>\n    <ignore>\n")
        for pattern in ignorePatterns {
            xml.append(text: "      <pattern>\(pattern)</pattern>\n")
        }
        xml.append(text: "    </ignore>\n  </processinfo>\n")

        var unrecordable: [String] = []
        var listed = 0
        for entry in entries where !isIgnored(entry.path) {
            precondition(isDigest(entry.xxh128), "xxh128 of \(String(reflecting: entry.path)) is not 32 lower-case hex digits")
            if listed == 0 { xml.append(text: "  <hashes>\n") }
            listed += 1
            xml.append(text: "    <hash>\n      <path size=\"")
            xml.appendDecimal(entry.size)
            xml.append(text: "\" lastmodificationdate=\"")
            xml.appendDate(entry.lastModified, withMicroseconds: false)
            xml.append(text: "\">")
            if !xml.appendEscaped(entry.path) { unrecordable.append(entry.path) }
            xml.append(text: "</path>\n      <xxh128 action=\"original\" hashdate=\"")
            xml.appendDate(entry.hashDate, withMicroseconds: true)
            xml.append(text: "\">")
            xml.append(contentsOf: entry.xxh128.utf8)
            xml.append(text: "</xxh128>\n    </hash>\n")
        }
        if listed > 0 { xml.append(text: "  </hashes>\n") }
        xml.append(text: "</hashlist>\n")

        guard unrecordable.isEmpty else { throw .unrecordablePaths(unrecordable) }
        return xml
    }

    /// Whether a component of `path` is one `ascmhl` ignores (see ``ignorePatterns``).
    static func isIgnored(_ path: String) -> Bool {
        path.utf8.split(separator: UInt8(ascii: "/")).contains { component in
            component.elementsEqual(".DS_Store".utf8) || component.elementsEqual(directoryName.utf8)
        }
    }

    /// Whether `name` can be a manifest's file name in a history's `ascmhl` directory: one
    /// plain file name ending in `.mhl`, as a chain read from elsewhere must name it before
    /// the name becomes a local file.
    public static func isManifestFileName(_ name: String) -> Bool {
        name.hasSuffix(".mhl") && name.utf8.count > 4 && name.utf8.count <= 255 && !name.hasPrefix(".")
            && !name.utf8.contains { $0 == UInt8(ascii: "/") || $0 == 0 }
    }

    static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 32
            && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    // MARK: Names

    /// The file name of generation `generation` (1-based) of the history of the folder named
    /// `folderName`, as the specification (§6.3) and `ascmhl` spell it:
    /// `0001_A001_2026-11-28_113713Z.mhl`, the number four digits or more, the date and time
    /// `created` in UTC.
    ///
    /// `ascmhl` reads the generation number from the name (`^(\d{4,})(?:_(.+))?$` before
    /// `.mhl`) and never compares the folder part with the folder, so characters that would
    /// break that pattern or the name itself become `_`: control characters (a line feed
    /// would stop `.+`), `/`, and `\ : * ? " < > |`, which Windows and macOS clients
    /// cannot put in a file name.
    public static func manifestName(generation: Int, folderName: String, created: Date) -> String {
        precondition(generation >= 1, "generations count from 1")
        let forbidden = "/\\:*?\"<>|".unicodeScalars
        let time = CivilTime(created)
        var name: [UInt8] = []
        name.appendDecimal(Int64(generation), digits: 4)
        name.append(UInt8(ascii: "_"))
        for scalar in folderName.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || forbidden.contains(scalar) {
                name.append(UInt8(ascii: "_"))
            } else {
                UTF8.encode(scalar) { name.append($0) }
            }
        }
        name.append(UInt8(ascii: "_"))
        name.appendDecimal(time.year, digits: 4)
        name.append(UInt8(ascii: "-"))
        name.appendDecimal(time.month, digits: 2)
        name.append(UInt8(ascii: "-"))
        name.appendDecimal(time.day, digits: 2)
        name.append(UInt8(ascii: "_"))
        name.appendDecimal(time.hour, digits: 2)
        name.appendDecimal(time.minute, digits: 2)
        name.appendDecimal(time.second, digits: 2)
        name.append(text: "Z.mhl")
        return String(decoding: name, as: UTF8.self)
    }

    // MARK: Chain

    /// `ascmhl_chain.xml` listing `generations` in the order given (the specification wants
    /// them numbered 1, 2, 3… in order). `ascmhl` refuses a history whose chain lists a
    /// manifest that is missing or whose C4 id differs, so each manifest is written exactly
    /// as hashed, and the chain after it.
    ///
    /// A later run appends: ``parseChain(_:)`` the chain found in the bucket, add the new
    /// generation numbered one more than the last, and write the whole chain again.
    public static func chain(_ generations: [MHLGeneration]) -> [UInt8] {
        var xml: [UInt8] = []
        xml.reserveCapacity(256 + generations.count * 200)
        xml.append(text: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        xml.append(text: "<ascmhldirectory xmlns=\"\(chainNamespace)\">\n")
        for generation in generations {
            xml.append(text: "  <hashlist sequencenr=\"")
            xml.appendDecimal(Int64(generation.number))
            xml.append(text: "\">\n    <path>")
            // Names come from manifestName or from a parsed chain, and neither can hold a
            // character XML cannot carry.
            let written = xml.appendEscaped(generation.fileName)
            precondition(written, "chain entry \(String(reflecting: generation.fileName)) holds a character XML cannot carry")
            xml.append(text: "</path>\n    <c4>")
            xml.appendEscaped(generation.c4)
            xml.append(text: "</c4>\n  </hashlist>\n")
        }
        xml.append(text: "</ascmhldirectory>\n")
        return xml
    }

    // MARK: C4

    /// The C4 id (SMPTE ST 2114) of `bytes`, as the chain file records a manifest's: "c4"
    /// and the SHA-512 digest, read as one big-endian number, in base 58 with the alphabet
    /// below, left-padded with its zero digit `1` to 88 digits (90 characters in all).
    public static func c4(_ bytes: [UInt8]) -> String {
        let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)
        var number = Array(SHA512.hash(data: bytes))
        // Long division of the 64-byte number by 58, one digit (the remainder) at a time,
        // least significant first.
        var digits: [UInt8] = []
        digits.reserveCapacity(88)
        while number.contains(where: { $0 != 0 }) {
            var remainder = 0
            for index in number.indices {
                let accumulator = remainder << 8 | Int(number[index])
                number[index] = UInt8(accumulator / 58)
                remainder = accumulator % 58
            }
            digits.append(alphabet[remainder])
        }
        // 2^512 < 58^88, so 88 digits always suffice.
        let padding = [UInt8](repeating: alphabet[0], count: 88 - digits.count)
        return "c4" + String(decoding: padding + digits.reversed(), as: UTF8.self)
    }
}

// MARK: - Writing XML

extension String {
    /// Line breaks as spaces.
    fileprivate var onOneLine: String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : $0 }))
    }
}

extension [UInt8] {
    /// Appends markup that is known to need no escaping.
    fileprivate mutating func append(text: String) { append(contentsOf: text.utf8) }

    /// Appends `text` escaped for XML element content or a double-quoted attribute:
    /// `& < > "` as entities; tab, line feed and carriage return as character references,
    /// since a parser would turn them into spaces in an attribute and a carriage return into
    /// a line feed anywhere. Returns false if `text` holds a character XML 1.0 cannot carry
    /// in any form (a control character below U+0020 other than those three, U+FFFE, U+FFFF),
    /// after writing U+FFFD in its place. Everything else, U+007F–U+009F included, XML allows
    /// as it is.
    @discardableResult
    fileprivate mutating func appendEscaped(_ text: String) -> Bool {
        // Most names need nothing escaped: one scan of the bytes for the few that may
        // (ASCII controls and markup, and 0xEF, which leads U+FFFE and U+FFFF) lets them be
        // copied whole.
        let needsLook = text.utf8.contains { (byte: UInt8) -> Bool in
            switch byte {
            case 0..<0x20, UInt8(ascii: "&"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\""), 0xEF: true
            default: false
            }
        }
        guard needsLook else {
            append(contentsOf: text.utf8)
            return true
        }
        var carried = true
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": append(text: "&amp;")
            case "<": append(text: "&lt;")
            case ">": append(text: "&gt;")
            case "\"": append(text: "&quot;")
            case "\t": append(text: "&#9;")
            case "\n": append(text: "&#10;")
            case "\r": append(text: "&#13;")
            case "\u{00}"..<"\u{20}", "\u{FFFE}", "\u{FFFF}":
                append(text: "\u{FFFD}")
                carried = false
            default: UTF8.encode(scalar) { append($0) }
            }
        }
        return carried
    }

    /// Appends `value` in decimal, zero-padded to at least `digits` digits.
    fileprivate mutating func appendDecimal(_ value: Int64, digits: Int = 1) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        // Least significant digit first, then turned around in place.
        let start = endIndex
        repeat {
            append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0 || endIndex - start < digits
        self[start...].reverse()
    }

    /// `2026-11-28T11:37:13+00:00`, or `2026-11-28T11:37:13.185452+00:00` with
    /// microseconds: ISO 8601 / `xs:dateTime` in UTC, as `ascmhl` writes its dates (Python's
    /// `isoformat`; it drops the fraction from all but hash dates). `+00:00` rather than
    /// `Z`, which Python's `fromisoformat` rejects before 3.11. Seconds are truncated, as
    /// `ascmhl` does.
    fileprivate mutating func appendDate(_ date: Date, withMicroseconds: Bool) {
        let time = CivilTime(date)
        appendDecimal(time.year, digits: 4)
        append(UInt8(ascii: "-"))
        appendDecimal(time.month, digits: 2)
        append(UInt8(ascii: "-"))
        appendDecimal(time.day, digits: 2)
        append(UInt8(ascii: "T"))
        appendDecimal(time.hour, digits: 2)
        append(UInt8(ascii: ":"))
        appendDecimal(time.minute, digits: 2)
        append(UInt8(ascii: ":"))
        appendDecimal(time.second, digits: 2)
        if withMicroseconds {
            append(UInt8(ascii: "."))
            appendDecimal(time.microsecond, digits: 6)
        }
        append(text: "+00:00")
    }
}

/// A date's UTC calendar fields, computed arithmetically: no formatter, locale or time zone
/// database, and cheap enough for two dates per entry of a 100,000-entry manifest.
private struct CivilTime {
    var year, month, day, hour, minute, second, microsecond: Int64

    init(_ date: Date) {
        // Whole microseconds since 1970, rounded: a Date holds a Double, and a time read
        // from the file system as whole microseconds may come back a hair below them.
        let microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let (seconds, fraction) = Self.floorDivide(microseconds, 1_000_000)
        let (days, secondOfDay) = Self.floorDivide(seconds, 86_400)
        microsecond = fraction
        hour = secondOfDay / 3_600
        minute = secondOfDay % 3_600 / 60
        second = secondOfDay % 60

        // Days since 1970-01-01 to a Gregorian date (Howard Hinnant's `civil_from_days`):
        // count from 0000-03-01 so that the leap day ends each year, in 400-year eras.
        let (era, dayOfEra) = Self.floorDivide(days + 719_468, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let marchMonth = (5 * dayOfYear + 2) / 153  // 0 is March, 11 February
        day = dayOfYear - (153 * marchMonth + 2) / 5 + 1
        month = marchMonth < 10 ? marchMonth + 3 : marchMonth - 9
        year = era * 400 + yearOfEra + (month <= 2 ? 1 : 0)
    }

    /// Quotient and remainder rounded toward minus infinity, so dates before 1970 work too.
    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }
}
