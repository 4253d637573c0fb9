extension S3Client {
    /// Aborts the multipart upload `known` (if any) and every other unfinished multipart
    /// upload at exactly `key`: a run killed between `CreateMultipartUpload` and its journal
    /// write leaves one whose id only the server knows. Returns how many were aborted; an
    /// upload the server no longer knows counts as aborted.
    public func abortUploads(key: String, known: String?) async throws(S3ClientError) -> Int {
        var ids: Set<String> = known.map { [$0] } ?? []
        for upload in try await listMultipartUploads(prefix: key, keeping: { $0.key == key }).uploads {
            ids.insert(upload.uploadID)
        }
        for id in ids.sorted() { try await abortMultipartUpload(key: key, uploadID: id) }
        return ids.count
    }
}
