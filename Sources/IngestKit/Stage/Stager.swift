import CSystemShims
import Glibc
import Synchronization

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

public enum StageOutcome: Sendable, Equatable {
    case staged(StagedFile)
    case failed(ScannedFile, StageFailure)
}

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

/// One run's reader and writer, and the state they share.
private final class Pipeline: @unchecked Sendable {
    /// A buffer that travels reader → writer → back to the pool.
    final class Chunk: @unchecked Sendable {
        private let buffer: AlignedBuffer
        var count = 0
        init(size: Int) { buffer = AlignedBuffer(size: size) }
        var storage: UnsafeMutableRawBufferPointer { buffer.storage }
        var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[..<count]) }
    }

    enum Message {
        /// A file begins; its copy is read as it grows when the streams took it.
        case begin(ScannedFile, GrowingCopy?)
        case chunk(Chunk)
        case end(ScannedFile, Fingerprint, PartChecksums?)
        case abort(ScannedFile, StageFailure)
        /// The run stopped while this file was read: drop its partial copy, report nothing.
        case abandon
        case finish
    }

    let stager: Stager
    let presence: CardPresence
    let volumeName: String
    /// The staging file system's whole size: what no file larger than (less the reserve)
    /// can ever be copied into.
    let stagingCapacity: Int64
    /// The reader's way to the card's files, and the writer's (for `--verify both`).
    let readerOpener: CardOpener
    let writerOpener: CardOpener
    let pool: BlockingQueue<Chunk>
    let queue: BlockingQueue<Message>
    /// The error that stops the run; set once, by whichever thread meets it first.
    private let fatal = Mutex<IngestError?>(nil)

    init(stager: Stager, root: FileDescriptor, presence: CardPresence, volumeName: String, stagingCapacity: Int64) {
        self.stager = stager
        self.presence = presence
        self.volumeName = volumeName
        self.stagingCapacity = stagingCapacity
        readerOpener = CardOpener(root: root)
        writerOpener = CardOpener(root: root)
        let settings = stager.settings
        pool = BlockingQueue(capacity: settings.chunks)
        queue = BlockingQueue(capacity: settings.chunks + 4)
        for _ in 0..<settings.chunks { pool.put(Chunk(size: settings.chunkSize)) }
    }

    var isStopped: Bool { fatal.withLock { $0 != nil } }

    /// The run stopped on an error, or was cancelled: the reader reads no further.
    var readerShouldStop: Bool { stager.isCancelled.load(ordering: .relaxed) || isStopped }

    func stop(_ error: IngestError) {
        fatal.withLock { if $0 == nil { $0 = error } }
    }

    func run(files: some Sequence<ScannedFile>, report: @escaping @Sendable (StageOutcome) -> Void) throws(IngestError) {
        let writer = Joinable("ingest-writer") { [self] in write(report: report) }
        read(files)
        writer.join()
        if let error = fatal.withLock({ $0 }) { throw error }
    }

    // MARK: Reader: open, read, hash; runs on the calling thread.

    private func read(_ files: some Sequence<ScannedFile>) {
        let hasher = FingerprintHasher()
        for file in files {
            if readerShouldStop { break }
            switch readOne(file, hasher: hasher) {
            case .copied(let copied, let digest, let checksums):
                queue.put(.end(copied, digest, checksums))
            case .abandoned:
                queue.put(.abandon)
            case .failed(let failure):
                queue.put(.abort(file, failure))
                // One file that cannot be read is that file's error; the run stops only when
                // the card itself is gone. (An I/O error is what a card gone gives too: EIO,
                // ENOMEM, ENODEV…; a missing or refused file is never the card.)
                if case .ioError(let cause) = failure.kind, let evidence = presence.check() {
                    stop(.volumeLost(volume: volumeName, cause: cause, evidence: evidence))
                }
            }
        }
        readerOpener.reset()
        queue.put(.finish)
    }

    /// The failure of a file of `size` bytes that the staging file system could not hold
    /// even empty, above the reserve, or nil. Checked before a byte is read: a 16 TiB sparse
    /// file would otherwise be read whole (its holes as zeros) for a copy that cannot be.
    /// A reserve that leaves no room at all is not the file's fault: then every file goes
    /// on to the writer's space check, which stops the run and names the reserve.
    private func neverFits(_ size: Int64) -> StageFailure? {
        let reserve = stager.settings.reserve
        // `capacity - reserve`: both are the station's own, 0 or more; no sum with the size.
        guard stagingCapacity > reserve, size > stagingCapacity - reserve else { return nil }
        return StageFailure(
            kind: .largerThanStaging(size: size, stagingPath: stager.area.root, capacity: stagingCapacity, reserve: reserve))
    }

    /// When the reader asks the page cache whether a file is warm; the reader's alone.
    private var cacheSense = CacheSense()

    /// How often the reader drops what it has read from the page cache (a file it found cold).
    private static let sourceDropStride: Int64 = 8 << 20

    private enum ReadResult {
        /// Read to the end; the file as it was read, its fingerprint and its parts' checksums.
        case copied(ScannedFile, Fingerprint, PartChecksums?)
        case failed(StageFailure)
        case abandoned
    }

    /// Reads one file to its end, hashing it, and hands its chunks to the writer.
    ///
    /// A file whose first chunk is all in the page cache already (a folder another program
    /// has just written) is warm: it is read through the cache and its pages are left there,
    /// someone else's. Any other file is cold: read direct where the run asks for it, else
    /// through the cache, dropping what was read. The choice is made once, at the open,
    /// because that is the one moment the cache speaks only of others: once this reader has
    /// read a chunk, the kernel's read-ahead has cached the next ones, so asking again per
    /// chunk would find the file warm because it is being read. So a file cached in part is
    /// judged by its head: the cache evicts the pages least recently used first, for a file
    /// written front to back its front, so a cached head means a cached file, and a file whose
    /// head is gone is one the cache was giving up already. One call a file, whatever its size,
    /// and on a card found cold one call in 16 files (``CacheSense``).
    private func readOne(_ scanned: ScannedFile, hasher: FingerprintHasher) -> ReadResult {
        let display = scanned.path.display
        let (source, before): (FileDescriptor, Glibc.stat)
        do {
            (source, before) = try readerOpener.open(scanned.path, flags: [.readOnly, .nonBlocking])
        } catch {
            return .failed(.opening(error))
        }
        stager.filesOpened.add(1, ordering: .relaxed)
        var file = scanned
        do throws(SystemError) {
            guard before.isRegularFile else { return .failed(StageFailure(kind: .vanished)) }
            if let inode = scanned.inode, UInt64(before.st_ino) != inode {
                return .failed(StageFailure(kind: .replacedSinceScan))
            }
            file.size = Int64(before.st_size)
            file.mtime = before.mtimeNanoseconds
            if let tooLarge = neverFits(file.size) { return .failed(tooLarge) }
            let head = min(file.size, Int64(stager.settings.chunkSize))
            let isWarm = cacheSense.isWarm { source.isInPageCache(firstBytes: head) }
            var isDirect = !isWarm && stager.settings.directReads && source.preferDirectIO()
            if !isDirect { _ = posix_fadvise(source.raw, 0, 0, POSIX_FADV_SEQUENTIAL) }
            hasher.reset()
            var checksummer = stager.settings.partChecksums.flatMap {
                PartChecksummer(fileSize: file.size, preferredPartSize: $0.partSize, singlePutThreshold: $0.singlePutThreshold)
            }
            let growing = growingCopy(of: file, cutAt: checksummer?.partSize)
            queue.put(.begin(file, growing))
            var checksummed = 0
            var total: Int64 = 0
            var dropped: Int64 = 0
            while true {
                let chunk = pool.take()
                // No more than the rest of the file and a byte: a small file's direct read
                // then asks the disk for its own blocks, not a whole chunk's, and comes back
                // short, which ends it in one read.
                let wanted = Stager.readLength(left: file.size - total, chunk: chunk.storage.count)
                do throws(SystemError) {
                    chunk.count = try source.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: chunk.storage[..<wanted]), at: total, isDirect: &isDirect,
                        path: display)
                } catch {
                    pool.put(chunk)  // the pool is the memory bound: a chunk lost here is never found again
                    throw error
                }
                if chunk.count == 0 {
                    pool.put(chunk)
                    break
                }
                hasher.update(chunk.bytes)
                checksummer?.update(chunk.bytes)
                if let growing, let finished = checksummer?.finished, finished.count > checksummed {
                    for crc in finished[checksummed...] { growing.checksummed(crc) }
                    checksummed = finished.count
                }
                total += Int64(chunk.count)
                if !isDirect, !isWarm, total - dropped >= Self.sourceDropStride {
                    // Read and hashed: the card's pages need not crowd the page cache.
                    source.dropFromCache(offset: dropped, length: total - dropped)
                    dropped = total
                }
                stager.bytesRead.add(Int64(chunk.count), ordering: .relaxed)
                let full = chunk.count == wanted
                queue.put(.chunk(chunk))
                if !full || readerShouldStop { break }
            }
            if readerShouldStop { return .abandoned }
            let after = try source.stat()
            guard total == file.size, Int64(after.st_size) == file.size, after.mtimeNanoseconds == file.mtime else {
                return .failed(StageFailure(kind: .changedWhileCopying))
            }
            let checksums = checksummer?.finish()
            if let growing, let all = checksums?.crc32c, all.count > checksummed {
                for crc in all[checksummed...] { growing.checksummed(crc) }
            }
            return .copied(file, hasher.finalize(), checksums)
        } catch {
            // A bad sector of this file, or the card gone: ext4 reports a vanished device as
            // EIO or ENOMEM, others as ENXIO or ENODEV. `read(_:)` asks the card which.
            return .failed(StageFailure(kind: .ioError(error)))
        }
    }

    /// The copy of `file` the streams read as it grows, when they take it: a file cut into
    /// parts at `partSize`, the cut its parts' CRC32Cs are computed at.
    private func growingCopy(of file: ScannedFile, cutAt partSize: Int64?) -> GrowingCopy? {
        guard let streams = stager.streams, let partSize, file.size > 0, streams.partSize(toStream: file) == partSize else {
            return nil
        }
        let copy = GrowingCopy(file: file, partSize: partSize)
        streams.stream(copy)
        return copy
    }

    // MARK: Writer: partial file, write, then publish in batches; runs on its own thread.

    private struct Partial {
        var file: FileDescriptor
        var path: String
        /// What the file held before (a spare's old copy): cut off when the copy is shorter.
        var stale: Int64
        /// Written with direct I/O, past the page cache (see ``append(_:to:)``).
        var isDirect: Bool
        var written: Int64 = 0
        /// Writeback has been started up to here…
        var writebackStarted: Int64 = 0
        /// …and finished, with the pages dropped, up to here.
        var dropped: Int64 = 0
        /// Read by an upload as it is written.
        var growing: GrowingCopy?
    }

    /// A copy written in full, waiting for its batch to be made durable and published.
    private struct Written {
        var partial: Partial
        var file: ScannedFile
        var fingerprint: Fingerprint
        var checksums: PartChecksums?
    }

    /// Kick off writeback every this many bytes, so dirty pages never pile up.
    private static let writebackStride: Int64 = 8 << 20
    /// Copies become durable in batches: one `syncfs` for the data of a batch and one for
    /// its new names, instead of two `fsync`s per file (which made a card of small files
    /// several times slower than `cp`). A batch is published when the reader has nothing more
    /// ready, or when it reaches its size in files (see `write(report:)`) or `batchBytes`.
    private static let batchFiles = 64
    private static let batchBytes: Int64 = 256 << 20
    /// How long a batch waits for more copies once the reader has none ready. Without it, a
    /// card of small files read at card speed left the writer ahead of the reader at almost
    /// every file, and published batches of two or three: a `syncfs` per few copies, a
    /// visible share of the CPU time of a card of small files. A copy's upload starts this
    /// much later at most.
    private static let batchGathering: Duration = .milliseconds(10)

    private func write(report: @Sendable (StageOutcome) -> Void) {
        var partial: Partial?
        var failedCurrent = false
        var batch: [Written] = []
        var batchBytes: Int64 = 0
        // Batches start at one file and double up to `batchFiles`: the uploader gets its
        // first files at once, not after 64 copies (it sat idle for that long when direct
        // reads let the reader keep the queue full), and a long card still costs few syncs.
        var batchLimit = 1
        // When the batch's first copy was written: it waits no longer than `batchGathering`.
        var batchStart = ContinuousClock.now

        func publishBatch() {
            guard !batch.isEmpty else { return }
            do throws(IngestError) {
                for outcome in try publish(batch) { report(outcome) }
            } catch {
                stop(error)
                for written in batch { unlink(written.partial.path) }
            }
            batch.removeAll(keepingCapacity: true)
            batchBytes = 0
            batchLimit = min(2 * batchLimit, Self.batchFiles)
        }

        loop: while true {
            if !batch.isEmpty, batch.count >= batchLimit || batchBytes >= Self.batchBytes
                || !queue.waitForItem(until: batchStart + Self.batchGathering)
            {
                publishBatch()
            }
            switch queue.take() {
            case .begin(let file, let growing):
                failedCurrent = false
                do throws(IngestError) { partial = try open(for: file, growing: growing) } catch {
                    growing?.ended(.failed)
                    stop(error)
                    failedCurrent = true
                }
            case .chunk(let chunk):
                if var current = partial, !failedCurrent {
                    do throws(IngestError) {
                        try append(chunk, to: &current)
                        partial = current
                    } catch {
                        stop(error)
                        failedCurrent = true
                        discard(&partial)
                    }
                }
                pool.put(chunk)
            case .end(let file, let fingerprint, let checksums):
                guard !failedCurrent, let current = partial else { continue }
                partial = nil
                current.growing?.ended(.complete(fingerprint))
                if batch.isEmpty { batchStart = .now }
                batch.append(Written(partial: current, file: file, fingerprint: fingerprint, checksums: checksums))
                batchBytes += current.written
            case .abort(let file, let failure):
                discard(&partial)
                report(.failed(file, failure))
            case .abandon:
                discard(&partial)
            case .finish:
                discard(&partial)
                publishBatch()
                break loop
            }
        }
    }

    private func discard(_ partial: inout Partial?) {
        if let current = partial {
            unlink(current.path)
            current.growing?.ended(.failed)
        }
        partial = nil
    }

    private func open(for file: ScannedFile, growing: GrowingCopy?) throws(IngestError) -> Partial {
        let area = stager.area
        try makeRoom(for: file.size)
        var partial: Partial
        do {
            let (fd, path, stale) = try area.createPartial()
            // Direct writes (see DirectIO.swift) where the staging file system takes them, but
            // for a small copy: one buffered write, read back from memory by its upload.
            partial = Partial(file: fd, path: path, stale: stale, isDirect: file.size > smallCopyLimit && fd.preferDirectIO())
        } catch {
            throw stagingError(error)
        }
        // Reserve the blocks now: running out of space shows at once, not mid-file. File
        // systems without fallocate (EOPNOTSUPP) are written the ordinary way; a small copy
        // is written in one go, whose failure shows as soon.
        if file.size > smallCopyLimit, ingest_fallocate(partial.file.raw, 0, file.size) != 0, SystemError.last("fallocate").isOutOfSpace {
            unlink(partial.path)
            throw .stagingFull(stagingPath: area.root, needed: file.size, available: 0, reserve: stager.settings.reserve)
        }
        if let growing {
            // A name of the stream's own: the partial's goes at publication, or with a failure.
            let streamPath = String(partial.path.dropLast(".partial".count)) + "-stream.partial"
            if link(partial.path, streamPath) == 0 {
                growing.attach(path: streamPath)
                partial.growing = growing
            } else {
                growing.ended(.failed)
            }
        }
        return partial
    }

    /// The staging file system's free space when last asked, and what was copied since.
    private var room = (available: Int64(0), spent: Int64(0), copies: Int.max)
    /// Free space is asked again after this many copies, or bytes, at the latest: other
    /// programs write to the disk too, and the reserve is what covers them meanwhile.
    private static let roomCheckCopies = 64
    private static let roomCheckBytes: Int64 = 64 << 20

    /// Throws ``IngestError/stagingFull(stagingPath:needed:available:reserve:)`` unless a
    /// copy of `size` bytes leaves the reserve free. The file system is asked (`statvfs`)
    /// every ``roomCheckCopies`` copies or ``roomCheckBytes`` bytes, not for every copy, and
    /// always before the disk is called full, after the spare files gave their blocks back.
    private func makeRoom(for size: Int64) throws(IngestError) {
        let area = stager.area
        let reserve = stager.settings.reserve
        // Compared without a sum: the size is the card's to say, and `size + reserve` of a
        // hostile file system's file could overflow (every operand is 0 or more).
        func fits() -> Bool { size <= room.available - reserve - room.spent }
        func ask() throws(IngestError) {
            do { room = (try area.availableBytes(), 0, 0) } catch { throw .stagingUnwritable(error) }
        }
        if room.copies >= Self.roomCheckCopies || room.spent >= Self.roomCheckBytes || !fits() { try ask() }
        if !fits(), area.emptySpares() > 0 { try ask() }
        guard fits() else {
            throw .stagingFull(
                stagingPath: area.root, needed: size, available: max(0, room.available - reserve), reserve: reserve)
        }
        room.spent += size
        room.copies += 1
    }

    /// Writes a chunk. With direct I/O the chunk goes from its (aligned) buffer to the disk:
    /// no page-cache page is allocated, filled and dropped for it, which on a virtual machine
    /// whose host takes back idle guest memory is most of what a buffered write costs
    /// (measured on our CI machine, see DirectIO.swift). The file's
    /// unaligned tail, and any write the file system refuses direct, go through the cache.
    private func append(_ chunk: Chunk, to partial: inout Partial) throws(IngestError) {
        let wasDirect = partial.isDirect
        do { try partial.file.write(chunk.bytes, at: partial.written, isDirect: &partial.isDirect, path: partial.path) } catch {
            throw stagingError(error)
        }
        partial.written += Int64(chunk.count)
        partial.growing?.wrote(upTo: partial.written)
        if !wasDirect { streamWriteback(&partial) }
    }

    /// Buffered writes stream: every stride, writeback of the new stride starts and the
    /// stride before it, written back by now, leaves the page cache. A copy of any size
    /// holds at most two strides of dirty pages, and the disk, not memory, sets the pace.
    private func streamWriteback(_ partial: inout Partial) {
        guard partial.written - partial.writebackStarted >= Self.writebackStride else { return }
        let file = partial.file
        if partial.writebackStarted > partial.dropped,
            ingest_wait_writeback(file.raw, partial.dropped, partial.writebackStarted - partial.dropped) == 0
        {
            file.dropFromCache(offset: partial.dropped, length: partial.writebackStarted - partial.dropped)
            partial.dropped = partial.writebackStarted
        }
        _ = ingest_start_writeback(file.raw, partial.writebackStarted, partial.written - partial.writebackStarted)
        partial.writebackStarted = partial.written
    }

    /// Makes a batch of written copies durable and gives each its content address: sync
    /// the data, link each copy to its name, sync the names. Only then is a copy staged.
    /// A batch of one large copy (read alone: the reader was on it for a while) syncs only
    /// its own data and name.
    private func publish(_ batch: [Written]) throws(IngestError) -> [StageOutcome] {
        let area = stager.area
        var isNew: [Bool] = []
        let lone = batch.count == 1 && batch[0].partial.written >= Self.writebackStride ? batch.first : nil
        do {
            for written in batch {
                try StagingArea.cut(written.partial.file, to: written.partial.written, stale: written.partial.stale, path: written.partial.path)
            }
            if let lone { try area.sync(copy: lone.partial.file, path: lone.partial.path) } else { try area.sync() }
            for written in batch {
                // On disk now: its pages need not stay in memory (verify drops them itself), but
                // for a small copy's, which its upload reads shortly.
                if written.partial.written > smallCopyLimit { written.partial.file.dropFromCache() }
                try written.partial.file.close()
                isNew.append(try area.link(partial: written.partial.path, as: written.fingerprint))
            }
            if isNew.contains(true) {
                if let lone { try area.syncName(of: lone.fingerprint) } else { try area.sync() }
            }
        } catch {
            throw stagingError(error)
        }
        for written in batch { unlink(written.partial.path) }
        return zip(batch, isNew).map { written, isNew in
            var verified = false
            if stager.settings.verify != .off {
                if let mismatch = verify(written.file, fingerprint: written.fingerprint) { return .failed(written.file, mismatch) }
                verified = true
            }
            return .staged(
                StagedFile(
                    file: written.file, fingerprint: written.fingerprint, deduplicated: !isNew, verified: verified,
                    partChecksums: written.checksums))
        }
    }

    /// Re-reads the staged copy (and the source, with `.both`) and compares fingerprints.
    private func verify(_ file: ScannedFile, fingerprint: Fingerprint) -> StageFailure? {
        let stagedPath = stager.area.path(for: fingerprint)
        let staged = Result { () throws(SystemError) in
            try fingerprintOfFile(FileDescriptor(path: stagedPath, flags: .readOnly), path: stagedPath)
        }
        switch staged {
        case .failure(let error): return StageFailure(kind: .ioError(error))
        case .success(let found) where found != fingerprint:
            // A staged copy that does not match its name must not stay under that name.
            unlink(stagedPath)
            return StageFailure(kind: .verificationMismatch(expected: fingerprint, found: found, of: "the staged copy"))
        default: break
        }
        guard stager.settings.verify == .both else { return nil }
        let source: FileDescriptor
        do { source = try writerOpener.open(file.path, flags: .readOnly).file } catch { return .opening(error) }
        switch Result(catching: { () throws(SystemError) in try fingerprintOfFile(source, path: file.path.display) }) {
        case .failure(let error): return StageFailure(kind: .ioError(error))
        case .success(let found) where found != fingerprint:
            return StageFailure(kind: .verificationMismatch(expected: fingerprint, found: found, of: "the source"))
        default: return nil
        }
    }

    /// The writer's own buffer for read-backs (taking a chunk from the pool could deadlock
    /// against a reader waiting for the pool).
    private lazy var verifyBuffer = AlignedBuffer(size: 1 << 20)

    /// Hashes a whole file, from the disk (direct reads, or the cache dropped first);
    /// writer thread only.
    private func fingerprintOfFile(_ fd: FileDescriptor, path: String) throws(SystemError) -> Fingerprint {
        fd.dropFromCache()
        return try Fingerprint.of(FileRangeReader(wholeFile: fd, path: path, buffer: verifyBuffer)).0
    }

    private func stagingError(_ error: SystemError) -> IngestError {
        if error.isOutOfSpace {
            return .stagingFull(stagingPath: stager.area.root, needed: 0, available: 0, reserve: stager.settings.reserve)
        }
        return .stagingUnwritable(error)
    }
}
