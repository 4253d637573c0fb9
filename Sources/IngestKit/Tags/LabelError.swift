/// Why a card's or a file's labels cannot be sent. Each message names the key, the source and
/// what to change.
///
/// Label errors are found before anything of a card is uploaded: the run's settings when the
/// ``LabelPolicy`` is made, before anything is staged; a card's identity and scene file in
/// ``LabelPolicy/cardLabels(card:sceneFile:)``. Only
/// ``metadataTooLarge(path:bytes:fileBytes:largest:largestBytes:)`` belongs to a single file,
/// and only to one whose name and path are long.
public enum LabelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One key, two values: the label already there, and the one that disagrees.
    case conflict(Label, Label)
    /// A key only ingest sets, given by someone else.
    case reserved(key: String, source: LabelSource)
    /// A key that cannot be an HTTP header name or an S3 tag key.
    case invalidKey(key: String, source: LabelSource, problem: String)
    case emptyValue(key: String, source: LabelSource)
    /// A person's or a scene file's value holding a control character (U+0000–U+001F,
    /// U+007F), named by its code point: a NUL would cut the value short in C strings and
    /// HTTP headers, and others garble logs and terminals.
    case controlCharacter(key: String, source: LabelSource, character: String)
    /// A card's scene file setting a label of the station or the card
    /// (``LabelSet/stationKeys``): the card may describe its scene, not who ingests it.
    case notTheScene(key: String, source: LabelSource)
    /// The key `device` given by anything but the config's `[device] id` (`--tag`, a tags
    /// table): the station is named once, where its keys take their `{device}` from too.
    case notTheDevice(source: LabelSource)
    /// A person's value for a key that becomes an object tag, longer than S3 allows.
    case tagValueTooLong(Label, length: Int)
    /// A person's value for a key that becomes an object tag, with characters S3 refuses in tags.
    case tagCharacters(Label, characters: [String])
    /// The list of keys that become object tags is longer than S3's 10 tags per object.
    case tooManyTagKeys([String])
    /// An entry of the list of keys that become object tags is not a valid key.
    case invalidTagKey(key: String, problem: String)
    /// The labels every object of a card shares take more than ``LabelPolicy/sharedMetadataBytes``
    /// of user metadata, leaving too little of S3's 2 KB for each file's own labels:
    /// `bytes` in `count` labels, most of them from `heaviest`; `largest` is the largest label a
    /// person gave (or any, if none did).
    case sharedLabelsTooLarge(bytes: Int, count: Int, heaviest: LabelWeight, largest: Label, largestBytes: Int)
    /// A file's labels exceed S3's 2 KB of user metadata: `bytes` in all, `fileBytes` of them
    /// the file's own (its fingerprint, name and path), which a long path makes larger than
    /// ``LabelPolicy/fileMetadataBytes``; `largest` is the largest of the labels the card's
    /// objects share that a person gave, if any.
    case metadataTooLarge(path: String, bytes: Int, fileBytes: Int, largest: Label?, largestBytes: Int)
    /// A scene file that cannot be read as one.
    case sceneFile(path: String, problem: String)

    public var description: String {
        switch self {
        case let .conflict(existing, new):
            let given =
                existing.source == new.source
                ? "is given two values by \(new.source): '\(existing.value)' and '\(new.value)'"
                : "is given '\(existing.value)' by \(existing.source) and '\(new.value)' by \(new.source)"
            let invisible = existing.value == new.value ? " (they differ only in how their accents are encoded)" : ""
            return "label '\(new.key)' \(given)\(invisible); keys are compared without regard to case. "
                + "Nothing is uploaded with these labels: make the values agree or remove one of them."
        case let .reserved(key, source):
            return "label '\(key)' from \(source) is reserved: ingest sets it on every object "
                + "(xxh128, original-name, original-path). Give the label another name."
        case let .invalidKey(key, source, problem):
            return "label key '\(LabelSet.printable(key))' from \(source) \(problem); a key may hold only a-z, 0-9, '-', '_' and '.', "
                + "1 to \(LabelSet.maximumKeyLength) of them (it becomes the header name x-amz-meta-<key>). Rename it."
        case let .emptyValue(key, source):
            return "label '\(key)' from \(source) has an empty value; give it a value or leave it out."
        case let .controlCharacter(key, source, character):
            return "label '\(key)' from \(source) has a value holding the control character \(character); "
                + "control characters (U+0000 to U+001F, U+007F) are not allowed in labels. Remove it from the value."
        case let .notTheScene(key, source):
            return "label '\(key)' may not be set by \(source): a card's scene file describes the scene, and "
                + "'\(key)' describes the station or the card (ingest sets device from the config's [device] id and "
                + "\(LabelSet.stationKeys.subtracting(["device"]).sorted().joined(separator: ", ")) from the card's "
                + "identity). Remove '\(key)' from the file, or name it otherwise."
        case .notTheDevice(let source):
            return "label 'device' may not be set by \(source): it names the station, and only the config's "
                + "[device] id sets it (the objects' keys take their {device} from the same id, or from the host "
                + "name when there is none). Set [device] id = \"…\" in the configuration, or give the label another name."
        case let .tagValueTooLong(label, length):
            return "label '\(label.key)' from \(label.source) becomes an object tag, and S3 allows "
                + "\(ObjectTagging.maximumValueLength) characters in a tag value; this one has \(length). "
                + "Shorten it, or remove '\(label.key)' from the object tag keys (metadata keeps any length)."
        case let .tagCharacters(label, characters):
            return "label '\(label.key)' from \(label.source) becomes an object tag, and S3 tags allow only letters, "
                + "digits, spaces and + - = . _ : / @; '\(label.value)' holds \(characters.joined(separator: ", ")). "
                + "Change the value, or remove '\(label.key)' from the object tag keys (metadata keeps any value)."
        case .tooManyTagKeys(let keys):
            return "the object tag keys name \(keys.count) keys (\(keys.joined(separator: ", "))), and S3 allows "
                + "\(ObjectTagging.maximumTags) tags per object. Keep the ones lifecycle rules or analytics select on: "
                + "every label is in the object's metadata anyway."
        case let .invalidTagKey(key, problem):
            return "object tag key '\(key)' \(problem); list label keys, which hold only a-z, 0-9, '-', '_' and '.'."
        case let .sharedLabelsTooLarge(bytes, count, heaviest, largest, largestBytes):
            return "the \(count) labels every object of the card carries take \(bytes) bytes of user metadata "
                + "(keys and values as sent), and ingest allows them \(LabelPolicy.sharedMetadataBytes): S3 allows "
                + "\(ObjectLabels.maximumMetadataBytes) per object, and ingest keeps \(LabelPolicy.fileMetadataBytes) "
                + "for each file's own fingerprint, name and path. Most of the bytes come from \(heaviest.source) "
                + "(\(heaviest.count) labels, \(heaviest.bytes) bytes); the largest is '\(largest.key)' from "
                + "\(largest.source) (\(largestBytes) bytes). Remove labels or shorten their values until they fit."
        case let .metadataTooLarge(path, bytes, fileBytes, largest, largestBytes):
            let shared = largest.map { "; the largest of these is '\($0.key)' from \($0.source) (\(largestBytes) bytes)" } ?? ""
            return "the labels of \(path) take \(bytes) bytes of user metadata, and S3 allows "
                + "\(ObjectLabels.maximumMetadataBytes) (keys and values as sent): the file's own labels (xxh128, "
                + "original-name, original-path) take \(fileBytes) of them, more than the \(LabelPolicy.fileMetadataBytes) "
                + "ingest keeps for them, and the labels every object of the card carries \(bytes - fileBytes)\(shared). "
                + "Move the file to a shorter path on the card, or use fewer or shorter labels."
        case let .sceneFile(path, problem):
            return "scene file \(path): \(problem). Fix the file on the card (or remove it) and ingest the card again."
        }
    }
}

/// How much of a card's labels one source gives: for an error that names where most of them come from.
public struct LabelWeight: Sendable, Equatable {
    public let source: LabelSource
    public let count: Int
    public let bytes: Int
}
