import Foundation

extension UploadRecord {
    /// The object's fingerprint goes in its `xxh128` tag, not in its metadata: its parts were
    /// sent while the file was still being read (``PartStreamer``), so the fingerprint, known
    /// only at the file's end, was not there to send with `CreateMultipartUpload`, and S3
    /// allows no metadata change after. A tag can be set once the object is complete
    /// (`PutObjectTagging`), and `ingest ls` or any S3 tool reads it back.
    var fingerprintGoesInTag: Bool {
        let metadataName = ObjectLabels.metadataPrefix + ObjectLabelKeys.fingerprint
        return !requestHeaders.contains { $0.name.lowercased() == metadataName }
    }

    /// The tags the object was created with (its `x-amz-tagging` header, decoded): what the
    /// fingerprint's tag is added to, since `PutObjectTagging` replaces the whole set.
    var objectTags: [String: String] {
        guard let header = requestHeaders.first(where: { $0.name.lowercased() == ObjectLabels.taggingHeader }) else { return [:] }
        var tags: [String: String] = [:]
        for pair in header.value.split(separator: "&") {
            let sides = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = sides.first?.removingPercentEncoding else { continue }
            tags[key] = sides.count == 2 ? (sides[1].removingPercentEncoding ?? "") : ""
        }
        return tags
    }
}
