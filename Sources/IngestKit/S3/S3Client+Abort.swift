import Foundation

extension S3Client {
    /// Aborts the multipart upload `known` (if any) and every other unfinished multipart
    /// upload at exactly `key` begun before `othersBefore`: a run killed between
    /// `CreateMultipartUpload` and its journal write leaves one whose id only the server
    /// knows; a later one may be another station's, still being sent. Returns how many
    /// were aborted; an upload the server no longer knows counts as aborted.
    public func abortUploads(key: String, known: String?, othersBefore: Date) async throws(S3ClientError) -> Int {
        var ids: Set<String> = known.map { [$0] } ?? []
        let listing = try await listMultipartUploads(prefix: key, keeping: { $0.key == key && $0.initiated < othersBefore })
        for upload in listing.uploads {
            ids.insert(upload.uploadID)
        }
        for id in ids.sorted() { try await abortMultipartUpload(key: key, uploadID: id) }
        return ids.count
    }
}
