// The stager: copies a card's files into the staging area, fingerprinting each in the same
// read. Its run's reader and writer are in Stager+Pipeline.swift, Stager+Reader.swift and
// Stager+Writer.swift; what it reports in StageOutcome.swift and StageFailure.swift.

import Synchronization

/// Copies files from a card into the staging area, computing each file's XXH3-128 in the
/// same pass: the card is read once per file.
///
/// Two dedicated threads form a pipeline: the reader reads and hashes chunks, the writer
/// writes them to partial files and, in batches, syncs them to disk and links each to its
/// content address. A fixed pool of chunks between them bounds memory (`chunkSize × chunks`)
/// whatever the file size, and the reader goes on with the next file while the writer syncs.
/// The writer writes with direct I/O where the file system takes it (see DirectIO.swift), so
/// the copy's pages never pass through the page cache; the reader reads the card through it,
/// for the kernel's read-ahead, dropping what it has read, or direct
/// (``StageSettings/directReads``), except a file already in the cache, which it reads from
/// there and leaves there.
///
/// Files are opened beneath the root one component at a time, never through a symbolic link
/// (``CardOpener``), so no path length limit applies and nothing off the card is read.
///
/// A file whose open or read fails, that changes while it is copied, or that is larger than
/// the staging file system could ever hold, leaves no staged copy: its partial file is
/// removed, it is reported and the run goes on. The run stops, with the rest left pending,
/// when the staging area runs out of space (a file that fits the disk but not what is free
/// now: the space comes back as uploads finish) or the card itself is gone
/// (``CardPresence``, asked after each failed read).
public final class Stager: Sendable {
    public let area: StagingArea
    public let settings: StageSettings
    /// Takes the large files whose parts are uploaded while they are copied; nil: none.
    public let streams: (any CopyStreams)?
    /// Bytes read from the card so far, for progress displays (any thread may read it).
    public let bytesRead = Atomic<Int64>(0)
    /// Files opened for reading on the card so far.
    public let filesOpened = Atomic<Int>(0)

    /// Set by ``cancel()``: the reader stops before its next file.
    let isCancelled = Atomic<Bool>(false)

    public init(area: StagingArea, settings: StageSettings = StageSettings(), streams: (any CopyStreams)? = nil) {
        self.area = area
        self.settings = settings
        self.streams = streams
    }

    /// Stops a running ``run(root:files:volumeName:report:)`` at its next chunk: the file
    /// being read is dropped (its partial copy removed, nothing reported) and no other is
    /// opened; what was not copied is found again by the next scan. Any thread.
    public func cancel() { isCancelled.store(true, ordering: .relaxed) }

    /// Stages `files` from the tree at `root`, calling `report` (on the writer thread) once
    /// per file. `files` is taken one file at a time as the reader gets to it, so it may be
    /// a walk of the card still going on. Blocks until done: call it from a dedicated
    /// thread, never from the concurrency pool. Throws only what stops the whole run.
    public func run(
        root: String, files: some Sequence<ScannedFile>, volumeName: String,
        report: @escaping @Sendable (StageOutcome) -> Void
    ) throws(IngestError) {
        let rootDirectory: FileDescriptor
        let presence: CardPresence
        do {
            rootDirectory = try FileDescriptor(path: root, flags: [.readOnly, .directory])
            presence = try CardPresence(root: rootDirectory, rootPath: root)
        } catch {
            throw .sourceUnavailable(path: root, reason: error.reason)
        }
        let capacity: Int64
        do { capacity = try area.capacityBytes() } catch { throw .stagingUnwritable(error) }
        try Pipeline(stager: self, root: rootDirectory, presence: presence, volumeName: volumeName, stagingCapacity: capacity)
            .run(files: files, report: report)
    }
}

extension Stager {
    /// What to ask of a file with `left` bytes still to read: a chunk, or fewer whole
    /// direct-I/O blocks that hold the rest and at least one byte more, so the read comes back
    /// short. (`left` is the card's to say, negative for a file grown since its `fstat`: no
    /// sum with it.)
    static func readLength(left: Int64, chunk: Int) -> Int {
        let block = AlignedBuffer.alignment
        guard left >= 0 else { return block }
        guard left < Int64(chunk) else { return chunk }
        return min(chunk, (Int(left) / block + 1) * block)
    }
}
