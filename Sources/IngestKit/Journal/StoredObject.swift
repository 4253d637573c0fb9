/// What identifies the bytes of an object as the server stored them, recorded in the journal
/// with the upload's completion, from the look (`HEAD`) that verified the object: a later
/// check compares the object with this and never adopts what it finds. Metadata we wrote
/// (`xxh128`) is a label anyone who can write the bucket can copy; the ETag, the server's
/// checksum and the version id are the server's own word on the bytes it holds.
public struct StoredObject: Sendable, Equatable {
    /// Exactly as the server sent it, quotes included.
    public var etag: String
    public var size: Int64
    /// The server's whole-object CRC32C (`x-amz-checksum-crc32c`), when it gave one.
    public var checksum: String?
    /// `x-amz-version-id`, where the bucket keeps versions.
    public var versionID: String?

    public init(etag: String, size: Int64, checksum: String? = nil, versionID: String? = nil) {
        self.etag = etag
        self.size = size
        self.checksum = checksum
        self.versionID = versionID
    }

    /// What a look at the object shows of its identity; nil when the server sent no ETag.
    public init?(_ head: ObjectHead) {
        guard let etag = head.etag, !ETag.unquoted(etag).isEmpty else { return nil }
        self.init(etag: etag, size: head.size, checksum: head.checksumCRC32C, versionID: head.versionID)
    }

    /// How `head` differs from this record, in words; nil when it is the same object. A
    /// checksum or version id compares only where both sides have one.
    public func difference(from head: ObjectHead) -> String? {
        if head.size != size { return "\(head.size) bytes, \(size) when verified" }
        guard let found = head.etag else { return "no ETag, \(etag) when verified" }
        if ETag.unquoted(found) != ETag.unquoted(etag) { return "ETag \(found), \(etag) when verified" }
        if let checksum, let other = head.checksumCRC32C, other != checksum {
            return "CRC32C \(other), \(checksum) when verified"
        }
        if let versionID, let other = head.versionID, other != versionID {
            return "version \(other), \(versionID) when verified"
        }
        return nil
    }
}
