import Foundation

/// Server-side copies: an object made from another object of the same bucket, its bytes never
/// crossing the network. `CopyObject` copies up to ``S3UploadLimits/maxSingleCopySize``;
/// above it, a multipart upload whose parts are `UploadPartCopy` ranges of the source.
extension S3Client {
    /// The `x-amz-copy-source` of `key` in this client's bucket: `/bucket/key`, the key's
    /// bytes percent-encoded as in a path.
    func copySource(_ key: String) -> SigV4Header {
        SigV4Header("x-amz-copy-source", "/" + S3Encoding.percentEncoded(destination.bucket) + "/" + S3Encoding.encodedPath(key))
    }

    /// `x-amz-copy-source-if-match`: the copy is made only from the source object whose
    /// ETag was looked at (`412` otherwise), never from bytes written there since.
    static func copySourceIfMatch(_ etag: String) -> SigV4Header {
        SigV4Header("x-amz-copy-source-if-match", etag)
    }

    /// CopyObject of `source` (with ETag `sourceETag`) to `key`. `headers` replace the
    /// source's metadata, tags and content type (the copy is another file's object, with its
    /// own labels), and may carry `If-None-Match: *`. Returns the new object's ETag. An
    /// `<Error>` in a 200 answer (a copy that failed after the answer began) is an error,
    /// never a success.
    public func copyObject(
        key: String, from source: String, sourceETag: String, headers: [SigV4Header]
    ) async throws(S3ClientError) -> String {
        let directives = [
            copySource(source), Self.copySourceIfMatch(sourceETag), SigV4Header("x-amz-metadata-directive", "REPLACE"),
            SigV4Header("x-amz-tagging-directive", "REPLACE"),
        ]
        let response = try await perform("PUT", key: key, headers: directives + headers)
        guard let document = S3XMLDocument.parse(response.body), let etag = document.fields["ETag"] else {
            throw .unexpectedAnswer(status: response.status, detail: "no ETag in CopyObjectResult")
        }
        return etag
    }

    /// UploadPartCopy: part `partNumber` of the multipart upload `uploadID` at `key` is the
    /// bytes `range` of `source` (with ETag `sourceETag`). Returns the part's ETag.
    public func uploadPartCopy(
        key: String, uploadID: String, partNumber: Int, from source: String, sourceETag: String, range: ClosedRange<Int64>
    ) async throws(S3ClientError) -> String {
        let response = try await perform(
            "PUT", key: key, query: [S3QueryItem("partNumber", String(partNumber)), S3QueryItem("uploadId", uploadID)],
            headers: [
                copySource(source), Self.copySourceIfMatch(sourceETag),
                SigV4Header("x-amz-copy-source-range", "bytes=\(range.lowerBound)-\(range.upperBound)"),
            ],
            policy: .part)
        guard let document = S3XMLDocument.parse(response.body), let etag = document.fields["ETag"] else {
            throw .unexpectedAnswer(status: response.status, detail: "no ETag in CopyPartResult")
        }
        return etag
    }
}
