import Foundation

/// The object a file being staged becomes when its parts go out as it is read
/// (``UploadPlanner/streamedObject(for:)``).
public struct StreamedObject: Sendable, Equatable {
    public var target: S3Destination
    public var key: String
    /// Its labels without the fingerprint (which goes in a tag), its tags, its content type.
    public var headers: [SigV4Header]
    public var partSize: Int64
    public var partCount: Int
}
