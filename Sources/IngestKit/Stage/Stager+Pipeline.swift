// One run of the stager: the reader and the writer threads, and the state they share. The
// reader's code is in Stager+Reader.swift, the writer's in Stager+Writer.swift; the state
// each keeps across files is here, where a class's stored properties must be.

import Synchronization

extension Stager {
    /// One run's reader and writer, and the state they share.
    final class Pipeline: @unchecked Sendable {
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

        // The reader's own.
        /// When the reader asks the page cache whether a file is warm; the reader's alone.
        var cacheSense = CacheSense()

        // The writer's own.
        /// The staging file system's free space when last asked, and what was copied since.
        var room = (available: Int64(0), spent: Int64(0), copies: Int.max)
        /// The writer's own buffer for read-backs (taking a chunk from the pool could deadlock
        /// against a reader waiting for the pool).
        lazy var verifyBuffer = AlignedBuffer(size: 1 << 20)
    }
}
