import Foundation

/// Where a tus upload stands on the server, as its answer to `HEAD` says (tus 1.0, "HEAD").
public enum TusUploadStatus: Sendable, Equatable {
    /// The server holds the upload and its first `offset` bytes; `length` is the upload's
    /// size if the server says it, `expires` when the server will forget an unfinished upload
    /// (`Upload-Expires`, the `expiration` extension), if it says; `metadata` what it keeps of
    /// the creation's `Upload-Metadata` (empty if it does not say).
    case found(offset: Int64, length: Int64?, expires: Date?, metadata: TusMetadata)
    /// The server does not know the upload (HTTP 404 or 410): it expired, was terminated, or
    /// never existed there. An answer, not an error: the caller starts a new upload.
    case gone
}
