// How the stager copies: the reserve, the read-back, the chunks in flight, direct reads.

/// What `--verify` re-reads after a copy.
public enum VerifyMode: String, Sendable, CaseIterable, Codable {
    case off
    /// Re-read the staged copy from disk and compare fingerprints.
    case staged
    /// Re-read the staged copy and the source.
    case both
}

public struct StageSettings: Sendable, Equatable {
    /// Free space to leave on the staging file system, in bytes.
    public var reserve: Int64
    public var verify: VerifyMode
    /// Size of one read from the card.
    public var chunkSize: Int
    /// Chunks in flight between reader and writer: the memory bound is `chunkSize × chunks`.
    /// Sixteen, so that the card's reader can run further ahead of the writer: with eight, a
    /// card with a large file first ended measurably behind a plain read of it.
    /// A chunk's pages are only touched as far as reads fill it, so a card of small files
    /// pays a few KiB a chunk, not the MiB: the eight more cost it next to no memory.
    public var chunks: Int
    /// When the copies are uploaded next: how they are cut into parts, so that the read that
    /// fingerprints a file also computes its parts' CRC32Cs (nil: none are computed).
    public var partChecksums: UploadCut?
    /// Read the card with direct I/O (where its file system takes it) rather than through
    /// the page cache. Direct reads cost far less CPU on a virtual machine (see
    /// DirectIO.swift) but have no kernel read-ahead: the benchmark's loop card, read while
    /// the copies were written, was read slower direct than through the cache. So they are
    /// for runs that upload, where the uploads, not the card, set the pace and the CPU is shared with them.
    /// A file already in the page cache is read through it either way (see `readOne`).
    public var directReads = false

    public init(reserve: Int64 = 1 << 30, verify: VerifyMode = .off, chunkSize: Int = 1 << 20, chunks: Int = 16) {
        self.reserve = reserve
        self.verify = verify
        self.chunkSize = chunkSize
        self.chunks = chunks
    }
}
