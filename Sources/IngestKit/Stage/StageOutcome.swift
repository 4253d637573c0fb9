// What staging one file comes to: staged (with its fingerprint) or failed.

public enum StageOutcome: Sendable, Equatable {
    case staged(StagedFile)
    case failed(ScannedFile, StageFailure)
}

/// A file staged: its content is in the staging area under its fingerprint.
public struct StagedFile: Sendable, Equatable {
    /// The file as it was copied (size and mtime from the open file, not the scan).
    public var file: ScannedFile
    public var fingerprint: Fingerprint
    /// The staging area already held this content (another file, another card, an earlier run).
    public var deduplicated: Bool
    /// The staged copy (and, with `.stagedAndSource`, the source) was read back and matched.
    public var verified: Bool
    /// The parts' CRC32Cs, computed from the card's bytes in the same read (with
    /// ``StageSettings/partChecksums`` set).
    public var partChecksums: PartChecksums?

    public init(file: ScannedFile, fingerprint: Fingerprint, deduplicated: Bool, verified: Bool, partChecksums: PartChecksums? = nil) {
        self.file = file
        self.fingerprint = fingerprint
        self.deduplicated = deduplicated
        self.verified = verified
        self.partChecksums = partChecksums
    }
}
