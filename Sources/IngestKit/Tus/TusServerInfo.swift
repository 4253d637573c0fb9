/// What a tus server says of itself in its answer to `OPTIONS` (tus 1.0, "OPTIONS").
public struct TusServerInfo: Sendable, Equatable {
    /// The protocol versions it speaks (`Tus-Version`), most preferred first.
    public var versions: [String]
    /// The extensions it supports (`Tus-Extension`): `creation`, `termination`,
    /// `expiration`, `checksum`, …
    public var extensions: Set<String>
    /// The largest upload it accepts, in bytes (`Tus-Max-Size`), if it says.
    public var maxSize: Int64?
    /// The checksum algorithms it accepts in `Upload-Checksum` (`Tus-Checksum-Algorithm`),
    /// lowercase: `sha1`, `md5`, `crc32`, …
    public var checksumAlgorithms: Set<String>

    public init(versions: [String], extensions: Set<String>, maxSize: Int64?, checksumAlgorithms: Set<String>) {
        self.versions = versions
        self.extensions = extensions
        self.maxSize = maxSize
        self.checksumAlgorithms = checksumAlgorithms
    }

    /// Whether the server speaks the version this client does, 1.0.0.
    public var speaksVersion1: Bool { versions.contains(TusClient.protocolVersion) }
}
