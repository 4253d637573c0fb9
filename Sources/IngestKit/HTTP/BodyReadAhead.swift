import Synchronization

/// Reads request bodies from disk ahead of libcurl, on threads of its own, so that the
/// transport's thread never waits for the disk: while it waits, no transfer on it sends a
/// byte or takes its answer. (Measured with the reads on that thread: the disk held it for
/// a good part of an upload, while the cores had time to spare.)
///
/// Each body has two blocks: libcurl sends from one while a reader thread fills the other;
/// a body one block holds (a small file) has one.
/// A body whose next block is not read yet says so (``FileBody/Chunk/notReady``); the
/// transport pauses that transfer, and `wake` tells it when a block has arrived.
final class BodyReadAhead: Sendable {
    /// Two per body in flight. Measured on the benchmark upload: as fast as larger blocks,
    /// in less memory.
    static let defaultBlockSize = 256 << 10

    let blocks: AlignedBufferPool
    /// Bodies with a block to fill; nil tells a reader thread to stop.
    let queue = BlockingQueue<FileBody?>(capacity: .max)
    let wake: @Sendable () -> Void
    private let readers: [Joinable]

    /// Starts `threads` reader threads, reading blocks of `blockSize` bytes; `wake` is called
    /// (on one of them) when a body that had nothing to send has a block or an error.
    init(threads: Int, blockSize: Int = defaultBlockSize, wake: @escaping @Sendable () -> Void) {
        blocks = AlignedBufferPool(bufferSize: blockSize)
        self.wake = wake
        readers = (0..<threads).map { [queue] _ in
            Joinable("ingest-prefetch") {
                while let body = queue.take() { body.fill() }
            }
        }
    }

    /// Opens `length` bytes of `path` from `offset` and starts reading them.
    func open(path: String, offset: Int64, length: Int64) throws(SystemError) -> FileBody {
        let body = FileBody(range: try FileRange(path: path, offset: offset, length: length), readAhead: self)
        body.startFilling()
        return body
    }

    /// Stops the reader threads once the bodies queued before have been seen to, and waits
    /// for them: after this, `wake` is never called again.
    func stop() {
        for _ in readers { queue.put(nil) }
        for reader in readers { reader.join() }
    }
}

/// One request body read ahead by a ``BodyReadAhead``.
///
/// `read`, `rewind` and `close` belong to the transport's thread; fills run on the reader
/// threads, one at a time per body. Every buffer goes back to the pool: at `close`, or when
/// the fill in flight at `close` ends.
final class FileBody: @unchecked Sendable {
    /// What a read gave.
    enum Chunk {
        /// This many bytes were copied.
        case bytes(Int)
        /// The body has been read to its end.
        case end
        /// The next block is still being read: ask again after ``BodyReadAhead/wake``.
        case notReady
        /// The next block could not be read.
        case failed(SystemError)
    }

    /// A filled block: the body's bytes `offset ..< offset + count` are in `buffer` from
    /// `from` on.
    private struct Block {
        let buffer: AlignedBuffer
        let from: Int
        let count: Int
    }

    /// What the transport's thread and the reader threads share.
    private struct Shared {
        /// Filled blocks, in order.
        var ready: [Block] = []
        /// Buffers waiting to be filled.
        var idle: [AlignedBuffer]
        /// Where the next fill starts, from the body's start.
        var fillOffset: Int64 = 0
        /// The body is queued or being filled.
        var filling = false
        /// Counts rewinds: a fill begun before the last one is stale.
        var generation = 0
        var error: SystemError?
        /// The transport found nothing to send and waits for `wake`.
        var waiting = false
        var closed = false

        /// There is something to read and a buffer to read it into.
        func canFill(_ length: Int64) -> Bool { !closed && error == nil && fillOffset < length && !idle.isEmpty }

        /// Marks the body as filling when it should be and is not yet: true when the caller
        /// must queue it.
        mutating func startFilling(_ length: Int64) -> Bool {
            guard !filling, canFill(length) else { return false }
            filling = true
            return true
        }
    }

    private let range: FileRange
    private let readAhead: BodyReadAhead
    private let shared: Mutex<Shared>
    /// The block being sent and how much of it has gone; the transport's thread only.
    private var current: Block?
    private var sentOfCurrent = 0
    /// Where the next byte to send is, from the body's start; the transport's thread only.
    private var offset: Int64 = 0

    fileprivate init(range: FileRange, readAhead: BodyReadAhead) {
        self.range = range
        self.readAhead = readAhead
        // A body one block holds needs no second one to read into while it is sent, nor a
        // whole block: a 20 kB file's upload holds 20 KiB, so many go at once in little memory.
        let pages = range.pageSpan
        let pool = readAhead.blocks
        let idle = pages < Int64(pool.bufferSize) ? [AlignedBuffer(size: Int(pages))]
            : (0..<(pages == Int64(pool.bufferSize) ? 1 : 2)).map { _ in pool.take() }
        shared = Mutex(Shared(idle: idle))
    }

    fileprivate func startFilling() {
        if shared.withLock({ $0.startFilling(range.length) }) { readAhead.queue.put(self) }
    }

    /// Copies the body's next bytes into `destination`, as many as are read and fit.
    func read(into destination: UnsafeMutableRawBufferPointer) -> Chunk {
        var copied = 0
        while copied < destination.count, offset < range.length {
            if current == nil || sentOfCurrent == current!.count {
                switch nextBlock() {
                case .success(let block?):
                    current = block
                    sentOfCurrent = 0
                case .success(nil): return copied > 0 ? .bytes(copied) : .notReady
                case .failure(let error): return copied > 0 ? .bytes(copied) : .failed(error)
                }
            }
            let block = current!
            let count = min(block.count - sentOfCurrent, destination.count - copied)
            (destination.baseAddress! + copied).copyMemory(
                from: block.buffer.storage.baseAddress! + block.from + sentOfCurrent, byteCount: count)
            sentOfCurrent += count
            copied += count
            offset += Int64(count)
        }
        return copied > 0 ? .bytes(copied) : .end
    }

    /// The transport may unpause: a block or an error is waiting for `read`.
    var isReady: Bool { shared.withLock { !$0.ready.isEmpty || $0.error != nil } }

    /// Hands the spent block back to be filled again and takes the next filled one: nil
    /// when it is still being read (the next fill to end calls `wake`).
    private func nextBlock() -> Result<Block?, SystemError> {
        let spent = current?.buffer
        current = nil
        let (next, schedule): (Result<Block?, SystemError>, Bool) = shared.withLock { shared in
            if let spent { shared.idle.append(spent) }
            let schedule = shared.startFilling(range.length)
            if !shared.ready.isEmpty { return (.success(shared.ready.removeFirst()), schedule) }
            if let error = shared.error { return (.failure(error), schedule) }
            shared.waiting = true
            return (.success(nil), schedule)
        }
        if schedule { readAhead.queue.put(self) }
        return next
    }

    /// Goes back to `offset` bytes from the body's start (libcurl rewinds to send the body
    /// again). Blocks read or being read are dropped; a read error is forgotten.
    func rewind(to offset: Int64) {
        precondition(offset >= 0 && offset <= range.length, "rewind outside the body")
        let spent = current?.buffer
        current = nil
        self.offset = offset
        let schedule = shared.withLock { shared in
            if let spent { shared.idle.append(spent) }
            shared.idle += shared.ready.map(\.buffer)
            shared.ready = []
            shared.generation += 1
            shared.fillOffset = offset
            shared.error = nil
            return shared.startFilling(range.length)
        }
        if schedule { readAhead.queue.put(self) }
    }

    /// The transfer is over: the buffers go back to the pool (the one a fill in flight
    /// holds, when that fill ends).
    func close() {
        var buffers = current.map { [$0.buffer] } ?? []
        current = nil
        shared.withLock { shared in
            shared.closed = true
            buffers += shared.idle + shared.ready.map(\.buffer)
            shared.idle = []
            shared.ready = []
        }
        for buffer in buffers { readAhead.blocks.giveBack(buffer) }
    }

    /// What a reader thread does with a body it takes from the queue: reads the next block
    /// into an idle buffer, then queues the body again while there is more to read and a
    /// buffer to read it into.
    func fill() {
        let job: (buffer: AlignedBuffer, offset: Int64, generation: Int)? = shared.withLock { shared in
            guard shared.canFill(range.length) else {
                shared.filling = false
                return nil
            }
            return (shared.idle.removeLast(), shared.fillOffset, shared.generation)
        }
        guard let job else { return }
        let read = Result { () throws(SystemError) in try range.read(blockAt: job.offset, into: job.buffer) }
        let (wake, again) = shared.withLock { shared -> (Bool, Bool) in
            if shared.closed {
                shared.filling = false
                readAhead.blocks.giveBack(job.buffer)
                return (false, false)
            }
            switch read {
            case _ where job.generation != shared.generation: shared.idle.append(job.buffer)  // rewound meanwhile
            case .success(let bytes):
                let from = UnsafeRawPointer(job.buffer.storage.baseAddress!).distance(to: bytes.baseAddress!)
                shared.ready.append(Block(buffer: job.buffer, from: from, count: bytes.count))
                shared.fillOffset += Int64(bytes.count)
            case .failure(let error):
                shared.error = error
                shared.idle.append(job.buffer)
            }
            let wake = shared.waiting && (!shared.ready.isEmpty || shared.error != nil)
            if wake { shared.waiting = false }
            let again = shared.canFill(range.length)
            if !again { shared.filling = false }
            return (wake, again)
        }
        if wake { readAhead.wake() }
        if again { readAhead.queue.put(self) }
    }
}
