// Why one file could not be staged, in words for people and a code for `--json`.

/// Why one file could not be staged. The file stays pending and is tried again next run.
public struct StageFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The file may not be opened (permissions).
        case unreadable(SystemError)
        /// Reading or opening the file failed (a bad sector, a damaged inode…) while the card
        /// itself is still there; or, when the card is gone, the read that showed it.
        case ioError(SystemError)
        /// A folder on the file's path, or the file itself, is a symbolic link now (`at`):
        /// swapped in since the scan, and not followed, so nothing off the card is read.
        case symlinkInPath(at: CardPath)
        /// A folder on the file's path, or the file, is another mount now (`at`): a file
        /// system or a bind mount put there since the scan, and not entered.
        case otherFileSystemInPath(at: CardPath)
        /// The file (`size` bytes) is larger than the staging file system (`stagingPath`,
        /// `capacity` bytes in all) can ever hold above the reserve: no amount of freed space
        /// makes room for it, so it fails alone and the run goes on. (One that fits the disk
        /// but not its free space stops the run instead: the space comes back.) A sparse file
        /// can claim terabytes on a card while it holds a few blocks.
        case largerThanStaging(size: Int64, stagingPath: String, capacity: Int64, reserve: Int64)
        /// The file disappeared between scan and copy.
        case vanished
        /// The file changed size or time while it was copied.
        case changedWhileCopying
        /// Another file is at the path now than the scan saw there (another inode): moved or
        /// written into its place since. Not copied under the scanned file's name.
        case replacedSinceScan
        /// Reading back gave another fingerprint than the copy computed.
        case verificationMismatch(expected: Fingerprint, found: Fingerprint, of: String)
        /// Staged, but no object can be made of it (a key or metadata beyond S3's limits);
        /// it stays staged and is tried again when the configuration changes.
        case notUploadable(String)
    }

    public var kind: Kind

    public var description: String {
        switch kind {
        case .unreadable(let error): "cannot be opened: \(error.reason)"
        case .ioError(let error): "read failed: \(error.reason)"
        case .symlinkInPath(let link):
            "\(link.display) is a symbolic link now (it was not when the card was scanned); not followed, "
                + "so nothing off the card is read"
        case .otherFileSystemInPath(let place):
            "\(place.display) is another mount now (a file system or bind mount put there since the card was scanned); "
                + "not entered"
        case let .largerThanStaging(size, path, capacity, reserve):
            "is \(ByteCount(size)), more than the staging file system can ever hold (\(path): \(ByteCount(capacity)) "
                + "in all, less the \(ByteCount(reserve)) reserve); not copied. Put the state directory on a larger "
                + "disk (or lower [staging] reserve) to ingest it, or `ingest forget` it once it is quarantined"
        case .vanished: "disappeared before it could be copied"
        case .changedWhileCopying: "changed while it was copied (it will be copied again next run)"
        case .replacedSinceScan: "another file took its place since the card was scanned (it will be copied next run)"
        case let .verificationMismatch(expected, found, what):
            "verification failed: \(what) reads as \(found.hex), the copy made \(expected.hex)"
        case .notUploadable(let reason): "staged, but cannot be uploaded: \(reason)"
        }
    }

    /// A short stable word for `--json`.
    public var code: String {
        switch kind {
        case .unreadable: "unreadable"
        case .ioError: "io-error"
        case .symlinkInPath: "symlink-in-path"
        case .otherFileSystemInPath: "mount-in-path"
        case .largerThanStaging: "larger-than-staging"
        case .vanished: "vanished"
        case .changedWhileCopying: "changed"
        case .replacedSinceScan: "replaced"
        case .verificationMismatch: "verification-mismatch"
        case .notUploadable: "not-uploadable"
        }
    }

    /// A failed open: a missing file has vanished, a refused one is unreadable, a link in
    /// its path is refused; anything else (EIO, ENODEV…) is an I/O error, the file's own
    /// unless the card turns out to be gone.
    static func opening(_ error: CardOpenError) -> StageFailure {
        switch error {
        case .symlink(let link): StageFailure(kind: .symlinkInPath(at: link))
        case .otherFileSystem(let place): StageFailure(kind: .otherFileSystemInPath(at: place))
        case .system(let error):
            switch error.errno {
            case .noSuchFileOrDirectory, .notDirectory: StageFailure(kind: .vanished)
            case .permissionDenied, .notPermitted: StageFailure(kind: .unreadable(error))
            default: StageFailure(kind: .ioError(error))
            }
        }
    }
}
