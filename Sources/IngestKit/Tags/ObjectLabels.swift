import Foundation

/// The headers that label one object: every label as user metadata, some as object tags.
///
/// S3 allows only 10 tags per object but lifecycle rules and analytics can select only on
/// tags, so the whole label set goes into `x-amz-meta-*` headers, where nothing is lost, and
/// the configured selection (``LabelPolicy/objectTagKeys``) also into the `x-amz-tagging`
/// header of PutObject or CreateMultipartUpload.
public struct ObjectLabels: Sendable, Equatable, CustomStringConvertible {
    /// S3's limit on user metadata: the UTF-8 bytes of every key (without `x-amz-meta-`) and
    /// every value as sent, that is after ``MetadataEncoding``.
    public static let maximumMetadataBytes = 2048
    /// What turns a label key into a header name; HEAD answers carry it back.
    public static let metadataPrefix = "x-amz-meta-"
    /// The header of PutObject and CreateMultipartUpload that sets an object's tags.
    public static let taggingHeader = "x-amz-tagging"

    /// `x-amz-meta-<key>` headers with their encoded values, sorted by key.
    public let metadata: [(name: String, value: String)]
    /// The `x-amz-tagging` value (`k=v&k2=v2`, percent-encoded), or nil when no label is a tag.
    public let tagging: String?
    /// The object tags as S3 stores them (not percent-encoded), for tests and events.
    public let tags: [String: String]
    /// The size S3 counts against ``maximumMetadataBytes``.
    public let metadataBytes: Int

    /// Every header to add to the request that creates the object.
    public var headers: [(name: String, value: String)] {
        metadata + (tagging.map { [(name: Self.taggingHeader, value: $0)] } ?? [])
    }

    public var description: String { headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n") }

    /// What `label` counts against ``maximumMetadataBytes``: its key and its value as sent.
    static func metadataSize(of label: Label) -> Int {
        label.key.utf8.count + MetadataEncoding.encode(bytes: label.bytes).utf8.count
    }

    /// Builds the headers of `labels`, tagging the ones in `tagKeys`; `path` names the file in errors.
    init(labels: LabelSet, tagKeys: [String], path: CardPath) throws(LabelError) {
        var metadata: [(name: String, value: String)] = []
        var bytes = 0
        var fileBytes = 0
        var largest: (label: Label, bytes: Int)?
        for label in labels.entries {
            let value = MetadataEncoding.encode(bytes: label.bytes)
            let size = label.key.utf8.count + value.utf8.count
            metadata.append((Self.metadataPrefix + label.key, value))
            bytes += size
            if label.source == .reserved { fileBytes += size }
            if label.source.isUserGiven, size > largest?.bytes ?? -1 { largest = (label, size) }
        }
        guard bytes <= Self.maximumMetadataBytes else {
            throw .metadataTooLarge(
                path: path.display, bytes: bytes, fileBytes: fileBytes, largest: largest?.label,
                largestBytes: largest?.bytes ?? 0)
        }
        var tags: [String: String] = [:]
        for key in tagKeys {
            guard let label = labels.label(key) else { continue }
            tags[label.key] = try ObjectTagging.value(of: label)
        }
        self.metadata = metadata
        self.metadataBytes = bytes
        self.tags = tags
        self.tagging = tags.isEmpty ? nil : ObjectTagging.header(tags)
    }

    public static func == (a: ObjectLabels, b: ObjectLabels) -> Bool {
        a.tagging == b.tagging && a.tags == b.tags && a.metadataBytes == b.metadataBytes
            && a.metadata.map { [$0.name, $0.value] } == b.metadata.map { [$0.name, $0.value] }
    }
}

/// S3's rules for object tags ("Categorizing your storage using tags"): at most 10 per
/// object, a key of up to 128 characters and a value of up to 256, both made of letters,
/// digits, spaces and `+ - = . _ : / @` (the API's pattern `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`).
///
/// Label keys are a subset of what tag keys allow, so only values need checking. A value a
/// person gave that breaks a rule is an error they can fix; a value read from the card (its
/// label, its serial, a file name) is repaired in the tag only, each character S3 refuses
/// becoming `_` and the value cut at 256, because failing the card would lose the ingest over a
/// label no one chose. The metadata keeps the exact value either way.
public enum ObjectTagging {
    /// Tags per object.
    public static let maximumTags = 10
    /// Characters in a tag value (a key's 128 is ``LabelSet/maximumKeyLength``).
    public static let maximumValueLength = 256

    /// The value `label` has as a tag.
    ///
    /// The value is first put in Unicode's composed form (NFC): S3's pattern admits letters
    /// but not combining accents, so `é` typed as `e` + U+0301 would otherwise be refused. Its
    /// length is counted in UTF-16 units, never fewer than characters, so a value that passes
    /// here passes S3 however it counts.
    static func value(of label: Label) throws(LabelError) -> String {
        let composed = label.value.precomposedStringWithCanonicalMapping
        if label.source.isUserGiven {
            var refused: [Unicode.Scalar] = []
            for scalar in composed.unicodeScalars where !isAllowed(scalar) && !refused.contains(scalar) {
                refused.append(scalar)
            }
            guard refused.isEmpty else {
                throw .tagCharacters(label, characters: refused.map { "'\(LabelSet.visible($0))'" })
            }
            guard composed.utf16.count <= maximumValueLength else {
                throw .tagValueTooLong(label, length: composed.utf16.count)
            }
            return composed
        }
        var repaired = String.UnicodeScalarView()
        var length = 0
        for scalar in composed.unicodeScalars {
            let kept = isAllowed(scalar) ? scalar : "_"
            length += UTF16.width(kept)
            if length > maximumValueLength { break }
            repaired.append(kept)
        }
        return String(repaired)
    }

    /// Whether S3 allows `scalar` in a tag.
    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
            .decimalNumber, .letterNumber, .otherNumber,
            .spaceSeparator, .lineSeparator, .paragraphSeparator:
            true
        default:
            "_.:/=+-@".unicodeScalars.contains(scalar)
        }
    }

    /// The `x-amz-tagging` header: `key=value` pairs sorted by key, joined by `&`, each side
    /// percent-encoded as S3 decodes a query string.
    static func header(_ tags: [String: String]) -> String {
        tags.sorted { $0.key < $1.key }
            .map { S3Encoding.percentEncoded($0.key) + "=" + S3Encoding.percentEncoded($0.value) }
            .joined(separator: "&")
    }
}
