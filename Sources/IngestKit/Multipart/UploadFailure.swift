/// Why an upload failed. Each message says what to do.
public enum UploadFailure: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    /// The server forgot the upload more often than allowed.
    case restartLimitExceeded(maxRestarts: Int)
    /// A request was given up; the owner reports the server's error next to this.
    case requestFailed(request: String, reason: String)
    /// After `Complete`, the object at the key is missing or not ours.
    case verificationFailed(expectedSize: Int64, foundSize: Int64?, foundFingerprint: Fingerprint?)
    /// After `Complete`, the server's digest of the object is not the one the parts sent
    /// add up to: some bytes differ from what was read from staging.
    case digestMismatch(String)
    /// The key holds other bytes (`foundSize` of them, with this recorded fingerprint, nil
    /// for none), and it is the file's alternative key already: nothing is replaced.
    case keyTakenTwice(foundSize: Int64, foundFingerprint: String?)
    /// A conditional write was refused as taken (`412`), then the key had no object:
    /// another writer is at work on it.
    case refusedThenFree
    /// The staged copy cannot be used now (unreadable), or the server refused its bytes
    /// while it still hashes right; it is kept. The owner reports the details.
    case stagedCopy(UploadStateMachine.StagedCopyTrouble)
    /// An action of the owner's own failed (a journal write, a local step); the owner
    /// reports its words next to this.
    case ownerFailed

    public var description: String {
        switch self {
        case let .keyTakenTwice(foundSize, foundFingerprint):
            return "the key holds other bytes (\(foundSize) bytes, fingerprint \(foundFingerprint ?? "none")), and it is "
                + "already the file's alternative key: nothing was replaced, the file stays staged. Find out what writes "
                + "there, then run ingest resume."
        case .refusedThenFree:
            return "the server refused the write as taken (412), then had no object at the key: another writer is at "
                + "work on this key. The file stays staged; run ingest resume."
        case .stagedCopy(.unreadable):
            return "the staged copy cannot be read now; it is kept, and the upload is tried again on the next run."
        case let .stagedCopy(trouble):
            return "the staged copy's trouble (\(trouble)): the file stays staged."
        case .ownerFailed:
            return "a local step of the upload failed; the file stays staged and resumes on the next run."
        case let .restartLimitExceeded(maxRestarts):
            let bound =
                maxRestarts == 0
                ? "and upload.max_restarts allows no new start"
                : "after it had been started over \(maxRestarts) time\(maxRestarts == 1 ? "" : "s"), "
                    + "the most upload.max_restarts allows"
            return "the server lost the multipart upload (NoSuchUpload) \(bound). "
                + "Check the bucket's lifecycle rules (AbortIncompleteMultipartUpload) and the server's health; "
                + "the file stays staged, run ingest rescan to try again."
        case let .requestFailed(request, reason):
            return "\(request) failed: \(reason). The file stays staged and resumes on the next run."
        case let .digestMismatch(detail):
            return "integrity error: the object's digest on the server does not match the parts sent (\(detail)). "
                + "The object is not trusted, nothing is moved to another key, the file stays staged and the card is "
                + "not safe to erase. Check the server and the network path (a proxy that rewrites bodies?); "
                + "ingest check names the checksum form the server reports. Then run ingest resume."
        case let .verificationFailed(expectedSize, foundSize, foundFingerprint):
            let found =
                foundSize.map {
                    "an object of \($0) bytes with fingerprint \(foundFingerprint?.hex ?? "(none)")"
                } ?? "no object"
            return "after the upload completed the server has \(found) at the key, not the "
                + "\(expectedSize) bytes uploaded. Something else writes to this key, or the server lost the "
                + "object; check the bucket, the file stays staged."
        }
    }
}
