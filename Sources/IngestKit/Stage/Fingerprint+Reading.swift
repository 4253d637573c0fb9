extension Fingerprint {
    /// The fingerprint of a whole file, read in 1 MiB blocks past the page cache: how a
    /// staged copy is checked before an upload resumes from it. With a `checksummer`, the
    /// same pass computes the parts' checksums too.
    /// Blocking: call it on a dedicated thread.
    public static func ofFile(
        at path: String, checksummer: PartChecksummer? = nil
    ) throws(SystemError) -> (Fingerprint, PartChecksums?) {
        let file = try FileDescriptor(path: path, flags: .readOnly)
        return try of(FileRangeReader(wholeFile: file, path: path, buffer: AlignedBuffer(size: 1 << 20)), checksummer: checksummer)
    }

    /// The fingerprint of what `reader` reads and, with a `checksummer`, its parts' checksums.
    static func of(
        _ reader: FileRangeReader, checksummer: PartChecksummer? = nil
    ) throws(SystemError) -> (Fingerprint, PartChecksums?) {
        let hasher = FingerprintHasher()
        var checksummer = checksummer
        while case let bytes = try reader.next(), !bytes.isEmpty {
            hasher.update(bytes)
            checksummer?.update(bytes)
        }
        return (hasher.finalize(), checksummer?.finish())
    }
}
