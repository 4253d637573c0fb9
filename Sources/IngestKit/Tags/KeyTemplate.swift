import Foundation

/// How a file's object key is made: a fixed prefix, then a template of fields.
///
/// ```toml
/// [s3]
/// prefix = "cards/"
/// key_template = "{device}/{card_date}/{label}-{card_id}/{path}"   # the default
/// ```
///
/// Fields (``KeyField``): `{device}`, `{card_date}` (the day the card was first seen, UTC,
/// `YYYY-MM-DD`), `{date}` (the file's modification day), `{ingest_date}` (the run's day),
/// `{label}`, `{uuid}`, `{card_id}`, `{path}`, `{name}` and `{xxh128}`. A template needs `{path}`, `{name}` or `{xxh128}`, or
/// every file of a card would get the same key.
///
/// **One key, one file.** Field values are escaped so that two different values never
/// render alike, and the default template holds `{card_id}`, which tells cards apart, so two
/// cards labelled alike with the same folders still get keys of their own. Field values are
/// written as follows:
/// - valid UTF-8 stays as it is, except `%`, which becomes `%25`;
/// - bytes that are not UTF-8, control characters (U+0000–U+001F, U+007F), `/` (except
///   between the folders of `{path}`) and `\` (which some servers, SeaweedFS among them,
///   store as `/`) become `%XX`, upper-case hex of each byte;
/// - an empty value becomes `%`, a `.` segment `%2E` and a `..` segment `%2E%2E`.
///
/// Decoding `%XX` back to its byte (and a lone `%` to nothing) gives the value again, so the
/// escaping is injective: a name with a newline and the same name with `_`, or the byte 0xFF
/// and the text `%FF`, get two keys. Valid names without `%` read in the bucket exactly as on
/// the card, and the exact name is in the object's `original-path` metadata too.
///
/// A template without `{path}` can still give two files one key (`{name}` for two folders),
/// and two stations or cloned cards can meet at one key: objects are written only where no
/// object is (`If-None-Match: *`), and a file whose key holds other bytes goes to its
/// ``alternativeKey(_:fingerprint:)``. No object is ever replaced.
///
/// Whatever a card holds, a key starts with the prefix and has no empty, `.` or `..` segment,
/// so no name can climb out of the prefix. The prefix is checked once: no `/` at its start,
/// no empty, `.` or `..` segment, no control character; a `/` is added at its end unless it
/// is empty.
public struct KeyTemplate: Sendable, Equatable, CustomStringConvertible {
    /// By station, then day, then card, then the card's own folders: what a person looking
    /// for "yesterday's flight from station 3" browses by. The day is the card's (first
    /// seen), not each file's: a card shot over three days is one folder, which its ASC MHL
    /// history covers (``cardPrefix(for:)``), and later runs of the card land beside the first.
    /// `{card_id}` keeps two cards labelled alike (or not at all) apart.
    public static let defaultTemplate = "{device}/{card_date}/{label}-{card_id}/{path}"

    /// The prefix as keys start with it: empty, or ending with `/`.
    public let prefix: String
    /// The template as written, for messages.
    public let template: String
    private let pieces: [Piece]

    /// The key holds the content's fingerprint (`{xxh128}`), so it is known only once the
    /// whole file has been read.
    public var usesFingerprint: Bool { pieces.contains(.field(.xxh128)) }

    private enum Piece: Sendable, Equatable {
        case literal(String)
        case field(KeyField)
    }

    public init(prefix: String = "", template: String = KeyTemplate.defaultTemplate) throws(KeyTemplateError) {
        self.prefix = try Self.checkedPrefix(prefix)
        self.template = template
        self.pieces = try Self.parse(template)
    }

    public var description: String { prefix + template }

    /// The object key of one file, or ``KeyTemplateError/keyTooLong(path:bytes:)``.
    public func key(for context: KeyContext) throws(KeyTemplateError) -> String {
        var key = prefix
        for piece in pieces {
            switch piece {
            case .literal(let text): key += text
            case .field(let field): key += context.value(of: field)
            }
        }
        let bytes = key.utf8.count
        guard bytes <= S3UploadLimits.maxKeyBytes else { throw .keyTooLong(path: context.path.display, bytes: bytes) }
        return key
    }

    /// The folder every file of one card goes under, and no other card's, when the template
    /// gives a card one: nothing but the card's own fields (`{device}`, `{card_date}`,
    /// `{label}`, `{uuid}`, `{card_id}`, with `{card_id}` among them, which tells cards
    /// apart) and literals before a `{path}` that ends the template and starts its segment.
    /// nil when files of one card may spread over several folders (`{date}`, `{ingest_date}`,
    /// `{name}` or `{xxh128}` in the template, or `{path}` not last), or one folder may hold
    /// several cards (no `{card_id}`).
    public func cardPrefix(for context: KeyContext) -> String? {
        guard let last = pieces.last, last == .field(.path), pieces.contains(.field(.cardID)) else { return nil }
        var folder = prefix
        for piece in pieces.dropLast() {
            switch piece {
            case .literal(let text): folder += text
            case .field(let field):
                guard [.device, .cardDate, .label, .uuid, .cardID].contains(field) else { return nil }
                folder += context.value(of: field)
            }
        }
        guard folder.isEmpty || folder.hasSuffix("/") else { return nil }
        return folder
    }

    /// Where the probe of a destination's conditional writes leaves its empty object: beside
    /// the cards, under the prefix (where the credentials may write).
    public static func probeKey(prefix: String) -> String {
        ((try? checkedPrefix(prefix)) ?? "") + ".ingest-write-probe"
    }

    /// Where a file goes when its key holds an object with other bytes: the same key with
    /// `~` and the file's fingerprint (32 hex digits) before the last segment's extension,
    /// `DCIM/DJI_0001.JPG` → `DCIM/DJI_0001~<xxh128>.JPG` (a name without an extension, or
    /// starting with its only dot, gets it at the end). The rule is deterministic: a resume, a
    /// second run or another station sends the same content to the same alternative key.
    public static func alternativeKey(_ key: String, fingerprint: Fingerprint) throws(KeyTemplateError) -> String {
        let tag = "~" + fingerprint.hex
        let segmentStart = key.lastIndex(of: "/").map { key.index(after: $0) } ?? key.startIndex
        var insertAt = key.endIndex
        if let dot = key[segmentStart...].lastIndex(of: "."), dot != segmentStart { insertAt = dot }
        var alternative = key
        alternative.insert(contentsOf: tag, at: insertAt)
        let bytes = alternative.utf8.count
        guard bytes <= S3UploadLimits.maxKeyBytes else { throw .keyTooLong(path: key, bytes: bytes) }
        return alternative
    }

    // MARK: Parsing

    private static func parse(_ template: String) throws(KeyTemplateError) -> [Piece] {
        var pieces: [Piece] = []
        var literal = ""
        var rest = template.unicodeScalars[...]
        while let scalar = rest.popFirst() {
            switch scalar {
            case "{":
                guard let close = rest.firstIndex(where: { $0 == "}" || $0 == "{" }), rest[close] == "}" else {
                    throw .syntax(template: template, problem: "has a '{' without its '}'")
                }
                let name = String(String.UnicodeScalarView(rest[..<close]))
                guard let field = KeyField(rawValue: name) else { throw .unknownField(template: template, field: name) }
                if !literal.isEmpty { pieces.append(.literal(literal)) }
                literal = ""
                pieces.append(.field(field))
                rest = rest[rest.index(after: close)...]
            case "}":
                throw .syntax(template: template, problem: "has a '}' without its '{'")
            default:
                if isControl(scalar) {
                    throw .syntax(
                        template: template, problem: "holds the control character \(LabelSet.visible(scalar))")
                }
                literal.unicodeScalars.append(scalar)
            }
        }
        if !literal.isEmpty { pieces.append(.literal(literal)) }
        guard pieces.contains(where: { [.field(.path), .field(.name), .field(.xxh128)].contains($0) }) else {
            throw .notUnique(template: template)
        }
        try checkSegments(pieces, template: template)
        return pieces
    }

    /// Rejects segments the template's own text makes empty, `.` or `..`; fields never render
    /// as any of these, so a segment holding a field is safe.
    private static func checkSegments(_ pieces: [Piece], template: String) throws(KeyTemplateError) {
        var segment = ""
        var hasField = false
        func check() throws(KeyTemplateError) {
            guard !hasField else { return }
            if segment.isEmpty {
                throw .syntax(template: template, problem: "has an empty segment (a '/' at its start or end, or '//')")
            }
            if segment == "." || segment == ".." {
                throw .syntax(template: template, problem: "has a '\(segment)' segment")
            }
        }
        for piece in pieces {
            switch piece {
            case .field:
                hasField = true
            case .literal(let text):
                for scalar in text.unicodeScalars {
                    if scalar == "/" {
                        try check()
                        segment = ""
                        hasField = false
                    } else {
                        segment.unicodeScalars.append(scalar)
                    }
                }
            }
        }
        try check()
    }

    private static func checkedPrefix(_ prefix: String) throws(KeyTemplateError) -> String {
        guard !prefix.isEmpty else { return "" }
        if prefix.hasPrefix("/") {
            throw .prefix(prefix: prefix, problem: "starts with '/'; S3 keys have no leading slash")
        }
        if let control = prefix.unicodeScalars.first(where: isControl) {
            throw .prefix(prefix: prefix, problem: "holds the control character \(LabelSet.visible(control))")
        }
        let body = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
        for segment in body.split(separator: "/", omittingEmptySubsequences: false) {
            if segment.isEmpty { throw .prefix(prefix: prefix, problem: "has an empty segment ('//')") }
            if segment == "." || segment == ".." {
                throw .prefix(prefix: prefix, problem: "has a '\(segment)' segment")
            }
        }
        return body + "/"
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || scalar.value == 0x7F }
}

/// A field of a key template, by the name written between braces.
public enum KeyField: String, Sendable, CaseIterable {
    /// The config's `device.id`, else the host name.
    case device
    /// The day the card was first seen by this station, UTC, `YYYY-MM-DD` (kept in the
    /// journal): every run of the card gives its files the same day.
    case cardDate = "card_date"
    /// The file's modification day, UTC, `YYYY-MM-DD`.
    case date
    /// The day of the run, UTC, `YYYY-MM-DD`: for keys grouped by when data arrived.
    case ingestDate = "ingest_date"
    /// The card's file system label, else its device node, or a plain directory's name.
    case label
    /// The card's file system UUID, or `no-uuid`.
    case uuid
    /// Eight hex digits that tell cards apart: the start of the XXH3-128 of the volume's
    /// journal key (its file system UUID, else its serial and label, else its path).
    case cardID = "card_id"
    /// The file's path below the card's root, folders kept.
    case path
    /// The file's name.
    case name
    /// The file's fingerprint in hex.
    case xxh128
}

/// What a key is made of, for one file.
public struct KeyContext: Sendable, Equatable {
    /// The config's `device.id`, else the host name.
    public var device: String
    /// The card's file system label, else its volume's display name.
    public var label: String
    /// The card's file system UUID; nil gives `no-uuid`.
    public var fsUUID: String?
    /// ``KeyField/cardID``: see ``cardID(volumeKey:)``.
    public var cardID: String
    /// The file's path below the card's root.
    public var path: CardPath
    /// Modification time, nanoseconds since the epoch, as ``ScannedFile/mtime``.
    public var mtime: Int64
    /// When the run started: every file of a run gets the same `{ingest_date}`.
    public var runDate: Date
    public var fingerprint: Fingerprint
    /// When the card was first seen (``KeyField/cardDate``); nil: this run's day.
    public var cardDate: Date?

    public init(
        device: String, label: String, fsUUID: String?, cardID: String, path: CardPath, mtime: Int64, runDate: Date,
        fingerprint: Fingerprint, cardDate: Date? = nil
    ) {
        self.cardDate = cardDate
        self.device = device
        self.label = label
        self.fsUUID = fsUUID
        self.cardID = cardID
        self.path = path
        self.mtime = mtime
        self.runDate = runDate
        self.fingerprint = fingerprint
    }

    /// The context of a scanned file of `volume`.
    public init(
        device: String, volume: VolumeIdentity, file: ScannedFile, fingerprint: Fingerprint, runDate: Date,
        cardDate: Date? = nil
    ) {
        // A whole card by its label (else its device node); a directory by its own name:
        // {card_id} tells two of one name apart.
        let label =
            volume.device != nil && volume.pathInFileSystem == "/"
            ? volume.displayName : String(volume.rootPath.split(separator: "/").last ?? "")
        self.init(
            device: device, label: label, fsUUID: volume.device?.fsUUID,
            cardID: Self.cardID(volumeKey: volume.key), path: file.path, mtime: file.mtime, runDate: runDate,
            fingerprint: fingerprint, cardDate: cardDate)
    }

    /// The first eight hex digits of the XXH3-128 of a volume's journal key
    /// (``VolumeIdentity/key``): the same card gives the same digits wherever it is mounted.
    public static func cardID(volumeKey: String) -> String {
        String(Fingerprint.of(Array(volumeKey.utf8)).hex.prefix(8))
    }

    /// `field`'s text, made safe as ``KeyTemplate`` describes.
    func value(of field: KeyField) -> String {
        switch field {
        case .device: KeySegment.escaped(device.utf8)
        case .date: KeySegment.day(secondsSinceEpoch: mtime.floorDivided(by: 1_000_000_000))
        case .ingestDate: KeySegment.day(secondsSinceEpoch: KeySegment.seconds(runDate))
        case .cardDate: KeySegment.day(secondsSinceEpoch: KeySegment.seconds(cardDate ?? runDate))
        case .label: KeySegment.escaped(label.utf8)
        case .uuid: KeySegment.escaped((fsUUID ?? "no-uuid").utf8)
        case .cardID: KeySegment.escaped(cardID.utf8)
        case .path:
            path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
                .map { KeySegment.escaped($0) }.joined(separator: "/")
        case .name: KeySegment.escaped(path.name)
        case .xxh128: fingerprint.hex
        }
    }
}

/// The escaping of one key segment, and the day format.
enum KeySegment {
    /// `bytes` as one segment: never empty, `.`, `..`, and never holding `/` or a control
    /// character; injective (see ``KeyTemplate``).
    static func escaped(_ bytes: some Collection<UInt8>) -> String {
        var text = ""
        var rest = bytes[...]
        while let first = rest.first {
            var iterator = rest.makeIterator()
            var decoder = UTF8()
            if case .scalarValue(let scalar) = decoder.decode(&iterator), scalar != "%", scalar != "/", scalar != "\\",
                !KeyTemplate.isControl(scalar)
            {
                text.unicodeScalars.append(scalar)
                rest = rest.dropFirst(UTF8.width(scalar))
            } else {
                text += percent(first)
                rest = rest.dropFirst()
            }
        }
        switch text {
        case "": return "%"
        case ".": return "%2E"
        case "..": return "%2E%2E"
        default: return text
        }
    }

    private static func percent(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
    }

    /// Whole seconds since the epoch, rounded down and kept to years 1 to 9999.
    static func seconds(_ date: Date) -> Int64 {
        let interval = date.timeIntervalSince1970.rounded(.down)
        guard interval.isFinite else { return interval > 0 ? latest : earliest }
        return Int64(max(Double(earliest), min(Double(latest), interval)))
    }

    private static let earliest: Int64 = -62_135_596_800  // 0001-01-01T00:00:00Z
    private static let latest: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z

    /// The UTC day of an instant as `YYYY-MM-DD`, by the proleptic Gregorian calendar
    /// (Howard Hinnant's `civil_from_days`): no calendar object, no locale, no time zone.
    static func day(secondsSinceEpoch: Int64) -> String {
        let days = max(earliest, min(latest, secondsSinceEpoch)).floorDivided(by: 86_400) + 719_468
        let era = days.floorDivided(by: 146_097)
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return padded(year, 4) + "-" + padded(month, 2) + "-" + padded(day, 2)
    }

    private static func padded(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

extension Int64 {
    /// Division rounding toward minus infinity: a moment before 1970 belongs to the day before.
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

/// Why a key template, its prefix or one file's key is not usable. The template and prefix
/// errors complete a configuration error for ``configKey``.
public enum KeyTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownField(template: String, field: String)
    case syntax(template: String, problem: String)
    /// No field that tells a card's files apart.
    case notUnique(template: String)
    case prefix(prefix: String, problem: String)
    /// One file's key exceeds S3's 1024 bytes; the other files go on.
    case keyTooLong(path: String, bytes: Int)

    /// The configuration key a template or prefix error belongs to; nil for a file's error.
    public var configKey: String? {
        switch self {
        case .unknownField, .syntax, .notUnique: "s3.key_template"
        case .prefix: "s3.prefix"
        case .keyTooLong: nil
        }
    }

    public var description: String {
        switch self {
        case let .unknownField(template, field):
            let known = KeyField.allCases.map { "{\($0.rawValue)}" }.joined(separator: ", ")
            return "template '\(template)' has an unknown field {\(field)}; the fields are \(known)"
        case let .syntax(template, problem):
            return "template '\(template)' \(problem); braces only enclose field names, "
                + "and '/' separates non-empty segments"
        case .notUnique(let template):
            return "template '\(template)' has none of {path}, {name}, {xxh128}, so a card's files would "
                + "overwrite each other; add {path} to keep the card's folders"
        case let .prefix(prefix, problem):
            return "prefix '\(prefix)' \(problem); write it like \"cards/\" or \"station-3/incoming/\""
        case let .keyTooLong(path, bytes):
            return "the object key of \(path) would be \(bytes) bytes, and S3 allows \(S3UploadLimits.maxKeyBytes); "
                + "the file is not uploaded. Shorten s3.prefix or s3.key_template (for example, {name} or {xxh128} "
                + "instead of {path}), or move the file to a shorter path on the card"
        }
    }
}
