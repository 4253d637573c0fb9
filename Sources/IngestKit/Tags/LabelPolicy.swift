/// What udev says of a card that becomes a label: `fs-uuid`, `fs-label`, `card-serial`,
/// `card-vendor`, `card-model` and `card-bus` (from `ID_FS_UUID`, `ID_FS_LABEL`,
/// `ID_SERIAL_SHORT`, `ID_VENDOR`, `ID_MODEL`, `ID_BUS`; for a card in a USB reader the last
/// four describe the reader, for an SD slot the card).
///
/// These make a card's objects findable by the card they came from, long after the card has
/// been wiped; absent or empty values are simply not labels. No one can edit them, so a
/// control character in one is written `%XX` rather than refused
/// (``LabelSet/escapingControlCharacters(_:)``), and a card's scene file may not set them.
public struct CardLabels: Sendable, Equatable {
    public var fsUUID: String?
    public var fsLabel: String?
    public var serial: String?
    public var vendor: String?
    public var model: String?
    public var bus: String?

    public init(
        fsUUID: String? = nil, fsLabel: String? = nil, serial: String? = nil, vendor: String? = nil, model: String? = nil,
        bus: String? = nil
    ) {
        self.fsUUID = fsUUID
        self.fsLabel = fsLabel
        self.serial = serial
        self.vendor = vendor
        self.model = model
        self.bus = bus
    }

    /// The labels of a block device; none for a plain directory.
    public init(device: BlockDevice?) {
        self.init(
            fsUUID: device?.fsUUID, fsLabel: device?.fsLabel, serial: device?.serial, vendor: device?.vendor,
            model: device?.model, bus: device?.bus)
    }

    /// The labels by key, in a fixed order.
    var entries: [(key: String, value: String?)] {
        [("fs-uuid", fsUUID), ("fs-label", fsLabel), ("card-serial", serial), ("card-vendor", vendor),
         ("card-model", model), ("card-bus", bus)]
    }
}

/// Which labels an ingest puts on its objects, and which of them become object tags.
///
/// Labels come from three layers, merged with ``LabelSet``'s rule that a key may not be given
/// two different values:
/// - the device: the config's `device.id` (key `device`) and `[device.tags]`, then the card's
///   udev identity (``CardLabels``);
/// - the scene: `--scene` (key `scene`) and `--tag k=v` from the command line, and the card's
///   scene file (``SceneFile``); a card without a scene file gets the config's default scene
///   instead, unless the command line names a scene, which then replaces the default (a
///   default is what applies when nothing more specific is said, not a second opinion);
/// - reserved labels ingest sets per file: `xxh128`, `original-name`, `original-path`.
///
/// Errors come as early as their cause: the run's own settings are checked when the policy
/// is made, before any card is read; a card's identity and scene file in
/// ``cardLabels(card:sceneFile:)``, before anything of the card is uploaded; only the size
/// of one file's metadata, which depends on its path, in ``objectLabels(base:path:fingerprint:)``.
///
/// S3's 2 KB of user metadata per object (``ObjectLabels/maximumMetadataBytes``) is split
/// the same way: the labels every object of a card carries may take
/// ``sharedMetadataBytes``, checked with the run's settings and again with the card's, and
/// ``fileMetadataBytes`` are kept for each file's own labels. So labels that pass those
/// checks never make a file fail at upload time: only a file whose name and path alone are
/// too long (over about 220 characters) can, and its message says so.
public struct LabelPolicy: Sendable, Equatable {
    /// What lifecycle rules and analytics most often select on: the station, the scene, the card.
    public static let defaultObjectTagKeys = ["device", "scene", "fs-uuid", "fs-label"]

    /// The user metadata ingest keeps for each file's own labels: `xxh128` and its 32 hex
    /// digits (38 bytes), the keys `original-name` and `original-path` (26), and 448 bytes
    /// for their values as sent, a path of some 220 characters with its name.
    public static let fileMetadataBytes = 512
    /// What the labels every object of a card carries may take of S3's 2 KB: 1,536 bytes.
    public static let sharedMetadataBytes = ObjectLabels.maximumMetadataBytes - fileMetadataBytes

    /// The keys that also become object tags, lowercased, in the order given; keys a card or
    /// file has no label for are skipped.
    public let objectTagKeys: [String]
    /// The config's default scene.
    public let defaultScene: Scene?
    /// `--scene` and `--tag k=v`.
    public let commandLine: Scene
    /// The device's config labels and the command line's, merged once.
    private let runLabels: LabelSet

    /// Checks and merges the run's own labels; the default scene is checked too, as it will
    /// apply to every card that brings no scene file.
    public init(
        deviceID: String? = nil,
        deviceTags: [String: String] = [:],
        defaultScene: Scene? = nil,
        commandLine: Scene = Scene(),
        objectTagKeys: [String] = defaultObjectTagKeys
    ) throws(LabelError) {
        var keys: [String] = []
        for key in objectTagKeys {
            let lowered = LabelSet.lowercased(key)
            if let problem = LabelSet.keyProblem(lowered) { throw .invalidTagKey(key: key, problem: problem) }
            if !keys.contains(lowered) { keys.append(lowered) }
        }
        guard keys.count <= ObjectTagging.maximumTags else { throw .tooManyTagKeys(keys) }

        var labels = LabelSet()
        if let deviceID { try labels.add(LabelSet.deviceKey, deviceID, from: .deviceID) }
        for (key, value) in deviceTags.sorted(by: { $0.key < $1.key }) {
            try labels.add(key, value, from: .deviceConfig)
        }
        try labels.add(commandLine, from: .commandLine)

        self.objectTagKeys = keys
        self.defaultScene = defaultScene
        self.commandLine = commandLine
        self.runLabels = labels
        // What a card with neither identity nor scene file would get: any error here would
        // recur on every such card, so it is the run's error.
        _ = try cardLabels(card: CardLabels(), sceneFile: nil)
    }

    /// The labels every file of a card shares, checked before any of them is uploaded.
    public func cardLabels(card: CardLabels, sceneFile: SceneFile?) throws(LabelError) -> LabelSet {
        var labels = runLabels
        for (key, value) in card.entries {
            if let value, !value.isEmpty { try labels.add(key, value, from: .cardIdentity) }
        }
        if let sceneFile {
            try labels.add(sceneFile.scene, from: .sceneFile(path: sceneFile.path))
        } else if commandLine.name == nil, let defaultScene {
            try labels.add(defaultScene, from: .sceneConfig)
        }
        for key in objectTagKeys {
            if let label = labels.label(key) { _ = try ObjectTagging.value(of: label) }
        }
        try Self.checkShared(labels)
        return labels
    }

    /// Fails when `labels`, the ones every object of a card carries, take more than
    /// ``sharedMetadataBytes`` of user metadata, counted as ``ObjectLabels`` counts them when
    /// it makes the headers. The error names the largest label a person gave (the fix is
    /// theirs to make) and, when most of the bytes come from elsewhere, where.
    static func checkShared(_ labels: LabelSet) throws(LabelError) {
        var total = 0
        var weights: [LabelSource: (count: Int, bytes: Int)] = [:]
        var largest: (label: Label, bytes: Int)?
        var largestOfAny: (label: Label, bytes: Int)?
        for label in labels.entries {
            let size = ObjectLabels.metadataSize(of: label)
            total += size
            weights[label.source, default: (0, 0)].count += 1
            weights[label.source, default: (0, 0)].bytes += size
            if label.source.isUserGiven, size > largest?.bytes ?? -1 { largest = (label, size) }
            if size > largestOfAny?.bytes ?? -1 { largestOfAny = (label, size) }
        }
        guard total > sharedMetadataBytes, let named = largest ?? largestOfAny else { return }
        // The heaviest source; a tie goes to the one named first in text, so the message is stable.
        let heaviest = weights.map { LabelWeight(source: $0.key, count: $0.value.count, bytes: $0.value.bytes) }
            .max { ($0.bytes, $1.source.description) < ($1.bytes, $0.source.description) }!
        throw .sharedLabelsTooLarge(
            bytes: total, count: labels.entries.count, heaviest: heaviest, largest: named.label, largestBytes: named.bytes)
    }

    /// The headers of one file: `base` (from ``cardLabels(card:sceneFile:)``) with the
    /// reserved labels added. For a scanned file and a `base` made by this policy it fails
    /// only when the file's metadata exceeds S3's 2 KB; the card's other files go on.
    /// `fingerprint` nil: the labels of an object created before its content's fingerprint
    /// is known, which then goes in a tag of its own (see `UploadRecord.fingerprintGoesInTag`).
    public func objectLabels(base: LabelSet, path: CardPath, fingerprint: Fingerprint?) throws(LabelError)
        -> ObjectLabels
    {
        var labels = base
        if let fingerprint { try labels.add("xxh128", bytes: Array(fingerprint.hex.utf8), from: .reserved) }
        try labels.add("original-name", bytes: Array(path.name), from: .reserved)
        try labels.add("original-path", bytes: path.bytes, from: .reserved)
        return try ObjectLabels(labels: labels, tagKeys: objectTagKeys, path: path)
    }
}

extension LabelSet {
    /// Adds a scene's name (key `scene`) and its tags, in key order so errors do not depend
    /// on a dictionary's order.
    mutating func add(_ scene: Scene, from source: LabelSource) throws(LabelError) {
        if let name = scene.name { try add("scene", name, from: source) }
        for (key, value) in scene.tags.sorted(by: { $0.key < $1.key }) {
            try add(key, value, from: source)
        }
    }
}
