/// The reserved metadata ingest reads back: HEAD answers carry user metadata by header name
/// without `x-amz-meta-`, lowercased.
public enum ObjectLabelKeys {
    /// The XXH3-128 fingerprint of the content, as `xxh128sum` prints it.
    public static let fingerprint = "xxh128"
    /// The file's path on the card (encoded as ``MetadataEncoding`` says).
    public static let originalPath = "original-path"
    public static let originalName = "original-name"

    /// Metadata values as people read them (RFC 2047 words decoded).
    public static func decoded(_ metadata: [String: String]) -> [String: String] {
        metadata.mapValues(MetadataEncoding.decode)
    }
}
