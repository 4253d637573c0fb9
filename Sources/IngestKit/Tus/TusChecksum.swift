import Foundation

/// The checksum of one PATCH chunk (tus 1.0, the `checksum` extension), sent as
/// `Upload-Checksum: <algorithm> <base64 digest>`; the server answers 460 when the bytes it
/// received do not match.
public struct TusChecksum: Sendable, Equatable {
    /// One of the server's `Tus-Checksum-Algorithm`, lowercase: `sha1`, `md5`, `crc32`, …
    public var algorithm: String
    /// The digest's raw bytes.
    public var digest: [UInt8]

    public init(algorithm: String, digest: [UInt8]) {
        self.algorithm = algorithm
        self.digest = digest
    }

    /// The `Upload-Checksum` header's value.
    public var headerValue: String { algorithm + " " + Data(digest).base64EncodedString() }
}
