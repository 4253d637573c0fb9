/// Where a label came from, so that an error can name the setting to change.
///
/// Labels are merged from several places, and a person fixing a conflict needs to know
/// which two of them disagree: the description is written to finish a sentence such as
/// "given by …".
public enum LabelSource: Sendable, Hashable, CustomStringConvertible {
    /// Set by ingest on every object (`xxh128`, `original-name`, `original-path`); no one
    /// else may set these keys, or an object could lie about its own content.
    case reserved
    /// The config's `[device] id`: the only source of the key `device`, which names the
    /// station (and, with the host name when there is no id, the keys' `{device}`).
    case deviceID
    /// The config's `[device.tags]` table.
    case deviceConfig
    /// What udev knows of the card: `fs-uuid`, `fs-label`, `card-serial`, `card-vendor`,
    /// `card-model`, `card-bus`.
    case cardIdentity
    /// A scene file at the card's root (``SceneFile``), written by someone in the field.
    case sceneFile(path: String)
    /// The config's default scene, for a card that brings no scene of its own.
    case sceneConfig
    /// `--scene` and `--tag k=v`.
    case commandLine

    public var description: String {
        switch self {
        case .reserved: "ingest itself (reserved)"
        case .deviceID: "the config's [device] id"
        case .deviceConfig: "the config's [device] section"
        case .cardIdentity: "the card's identity"
        case .sceneFile(let path): "the scene file \(path)"
        case .sceneConfig: "the config's default scene"
        case .commandLine: "the command line (--scene, --tag)"
        }
    }

    /// Whether a person typed the value. A person's value that S3 would refuse is an error
    /// they can fix; a value read from the card (its label, its serial, its file names) is
    /// repaired instead, because no one can fix a card in the middle of an ingest.
    public var isUserGiven: Bool {
        switch self {
        case .reserved, .cardIdentity: false
        case .deviceID, .deviceConfig, .sceneFile, .sceneConfig, .commandLine: true
        }
    }
}

/// One key and its value, with where it came from.
///
/// The value is kept as bytes because two reserved labels, a file's name and path, are
/// whatever bytes the card holds, and a name that is not UTF-8 must still arrive intact.
/// Every other value is UTF-8 text.
public struct Label: Sendable, Equatable {
    /// Lowercased; see ``LabelSet`` for the rules.
    public let key: String
    /// The value exactly as it is stored (UTF-8 text, or a file name's raw bytes).
    public let bytes: [UInt8]
    public let source: LabelSource

    /// The value as text; bytes that are not UTF-8 read as `\xNN`, as ``CardPath/display`` shows them.
    public var value: String { CardPath(bytes: bytes).display }
}

/// The labels of one card or one object, at most one value per key.
///
/// Merging is where mistakes show up: the config says `site = "north"`, the scene file on the
/// card says `site = "south"`. Picking either would mislabel a card's worth of data, so a key
/// given two different values is an error naming both values and both sources; the same value
/// from two places is fine.
///
/// Keys become HTTP header names (`x-amz-meta-<key>`), which HTTP treats without regard to
/// case, so keys are compared and stored lowercased, and may hold only `a-z 0-9 - _ .`
/// (1 to 128 of them: S3's limit for a tag key).
public struct LabelSet: Sendable, Equatable {
    /// Keys only ingest sets: the file's fingerprint, name and path.
    public static let reservedKeys: Set<String> = ["xxh128", "original-name", "original-path"]
    /// S3's limit on a tag key, which every label key may become.
    public static let maximumKeyLength = 128

    private var labels: [String: Label] = [:]

    public init() {}

    /// Keys that describe the station or the card, not the scene: the config's device id and
    /// the card's udev identity (``CardLabels``). A card's scene file may not set them, or any
    /// card could claim to come from another station or to be another card.
    public static let stationKeys: Set<String> = [
        "device", "fs-uuid", "fs-label", "card-serial", "card-vendor", "card-model", "card-bus",
    ]

    /// The key that names the station; only ``LabelSource/deviceID`` sets it.
    public static let deviceKey = "device"

    /// Adds `key = value`; fails on an invalid or reserved key, a station key given by what
    /// may not set it, an empty value, or a key that already has a different value.
    public mutating func add(_ key: String, _ value: String, from source: LabelSource) throws(LabelError) {
        try add(key, bytes: Array(value.utf8), from: source)
    }

    /// ``add(_:_:from:)`` for a value that may not be UTF-8 (a file's name or path).
    ///
    /// A control character (U+0000–U+001F, U+007F) in a value a person or a scene file gave is
    /// an error naming the key; in a value of the card's identity it is percent-escaped
    /// (``escapingControlCharacters(_:)``), because no one can edit what udev reads from a card.
    mutating func add(_ key: String, bytes: [UInt8], from source: LabelSource) throws(LabelError) {
        let key = try Self.normalizedKey(key, from: source)
        if source != .reserved, Self.reservedKeys.contains(key) { throw .reserved(key: key, source: source) }
        if case .sceneFile = source, Self.stationKeys.contains(key) { throw .notTheScene(key: key, source: source) }
        // The station is named once, by its configuration: a `device` from `--tag` or a tags
        // table would label every object with one station while its key names another.
        if key == Self.deviceKey, source != .deviceID { throw .notTheDevice(source: source) }
        guard !bytes.isEmpty else { throw .emptyValue(key: key, source: source) }
        var bytes = bytes
        if source == .cardIdentity {
            bytes = Self.escapingControlCharacters(bytes)
        } else if source.isUserGiven, let control = bytes.first(where: Self.isControl) {
            throw .controlCharacter(key: key, source: source, character: Self.visible(Unicode.Scalar(control)))
        }
        let label = Label(key: key, bytes: bytes, source: source)
        if let existing = labels[key] {
            // Bytes, not String equality: the stored value is exactly what both sources said.
            guard existing.bytes == bytes else { throw .conflict(existing, label) }
            return
        }
        labels[key] = label
    }

    /// All labels, sorted by key.
    public var entries: [Label] { labels.values.sorted { $0.key < $1.key } }

    public var isEmpty: Bool { labels.isEmpty }

    /// The label of `key` (any case), if there is one.
    public func label(_ key: String) -> Label? { labels[Self.lowercased(key)] }

    /// The value of `key` (any case) as text, if there is one.
    public subscript(key: String) -> String? { label(key)?.value }

    /// `key` lowercased, or an error saying what is wrong with it.
    static func normalizedKey(_ key: String, from source: LabelSource) throws(LabelError) -> String {
        let lowered = lowercased(key)
        if let problem = keyProblem(lowered) { throw .invalidKey(key: key, source: source, problem: problem) }
        return lowered
    }

    /// Why `key` (already lowercased) cannot be a label key, or nil when it can.
    static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "is empty" }
        if key.unicodeScalars.count > maximumKeyLength {
            return "is \(key.unicodeScalars.count) characters long, more than \(maximumKeyLength)"
        }
        let bad = key.unicodeScalars.filter { !isKeyCharacter($0) }
        guard bad.isEmpty else {
            return "holds " + Set(bad).sorted().map { "'\(Self.visible($0))'" }.joined(separator: ", ")
        }
        return nil
    }

    /// Whether `byte` is a control character: U+0000–U+001F or U+007F. In UTF-8 these are
    /// single bytes that never occur inside another character's encoding.
    static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// `bytes` with each control character written `%XX` (upper-case hex): a NUL becomes
    /// `%00`, a line feed `%0A`. Everything else, `%` included, is kept as it is.
    static func escapingControlCharacters(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(where: isControl) else { return bytes }
        let hex = Array("0123456789ABCDEF".utf8)
        var escaped: [UInt8] = []
        escaped.reserveCapacity(bytes.count + 8)
        for byte in bytes {
            if isControl(byte) {
                escaped += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            } else {
                escaped.append(byte)
            }
        }
        return escaped
    }

    /// ASCII letters only: `String.lowercased()` would turn the Kelvin sign (U+212A) into `k`
    /// and let a key that is not ASCII pass as one that is.
    static func lowercased(_ key: String) -> String {
        var lowered = String.UnicodeScalarView()
        for scalar in key.unicodeScalars {
            lowered.append(("A"..."Z").contains(scalar) ? Unicode.Scalar(UInt8(scalar.value) + 32) : scalar)
        }
        return String(lowered)
    }

    private static func isKeyCharacter(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_" || scalar == "."
    }

    /// `text` for an error message: each control character by its code point (`U+001B`), so
    /// that text from a card or a config cannot garble a terminal or a log line.
    static func printable(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars {
            shown += scalar.properties.generalCategory == .control ? visible(scalar) : String(scalar)
        }
        return shown
    }

    /// A character for an error message: invisible ones by their code point.
    static func visible(_ scalar: Unicode.Scalar) -> String {
        guard scalar.properties.generalCategory == .control || scalar.properties.isWhitespace else {
            return String(scalar)
        }
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
