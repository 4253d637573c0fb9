import Synchronization

// Direct I/O (O_DIRECT): reads and writes go between the device and the caller's buffer, past
// the page cache. ingest writes a staged copy once and reads it once (to send it), so the
// cache gains it nothing, and costs it most of its CPU on virtual machines like our CI's,
// whose host takes back guest memory that sat free: every fresh page-cache page costs a
// fault to fill. Measured there, direct reads and writes in 1 MiB blocks cost a small part
// of the CPU time of going through the cache, at the same wall time (docs/benchmarks.md).
// (The card is read direct only by runs that upload: see StageSettings.directReads.) Every
// user falls back to the cache where the file system refuses direct I/O, at the `fcntl`
// (ramfs; tmpfs before Linux 6.6) or at a read or write (some FUSE file systems).
//
// A file already in the page cache is the exception (``FileDescriptor/isInPageCache(firstBytes:)``):
// a folder another program has just written, say. Reading it direct would fetch from the
// disk what memory already holds, and dropping it would take another program's cache away.

/// The size up to which a staged copy, or a range of one, goes through the page cache even
/// where direct I/O is to be had. Direct I/O saves the cost of page-cache pages, which is
/// per byte; a small file pays per call instead: the `fcntl` that turns it on, a direct write
/// of its aligned part, an `fcntl` to turn it off, a buffered write of its unaligned tail,
/// and, to send it, a direct read from the disk of what was just written. Through the cache
/// a small copy is one write, and its upload, close behind, reads it from memory.
let smallCopyLimit: Int64 = 64 << 10

/// Memory aligned for direct I/O (`O_DIRECT`): 4096 bytes satisfies every local file system.
final class AlignedBuffer: @unchecked Sendable {
    static let alignment = 4096
    let storage: UnsafeMutableRawBufferPointer

    init(size: Int) { storage = .allocate(byteCount: size, alignment: Self.alignment) }
    deinit { storage.deallocate() }
}

/// Buffers of one size, handed out and taken back, so that the memory reads land in is
/// reused rather than freshly allocated for every request. Any thread.
final class AlignedBufferPool: Sendable {
    let bufferSize: Int
    private let idle = Mutex<[AlignedBuffer]>([])
    private let made = Atomic<Int>(0)

    init(bufferSize: Int) {
        precondition(bufferSize > 0 && bufferSize % AlignedBuffer.alignment == 0, "buffer size \(bufferSize) is not aligned")
        self.bufferSize = bufferSize
    }

    /// Buffers given back and not taken again, and buffers made: the same once every
    /// buffer taken has been given back.
    var idleCount: Int { idle.withLock { $0.count } }
    var madeCount: Int { made.load(ordering: .relaxed) }

    func take() -> AlignedBuffer {
        if let buffer = idle.withLock({ $0.popLast() }) { return buffer }
        made.add(1, ordering: .relaxed)
        return AlignedBuffer(size: bufferSize)
    }
    /// Takes `buffer` back; one of another size (a small body's own) is let go.
    func giveBack(_ buffer: AlignedBuffer) {
        guard buffer.storage.count == bufferSize else { return }
        idle.withLock { $0.append(buffer) }
    }
}

extension FileDescriptor {
    /// Turns direct I/O on for this file where its file system allows it; says whether it did.
    func preferDirectIO() -> Bool { (try? setDirectIO(true)) != nil }

    /// Reads at `offset` until `buffer` is full or the file ends; returns the bytes read.
    /// While `isDirect`, the buffer, offset and size must be aligned (``AlignedBuffer``); a
    /// read the file system refuses as direct turns direct I/O off for good (`isDirect`
    /// false) and goes on through the page cache. A direct read that comes back short at an
    /// unaligned place has met the file's end (a regular file's reads are short only there):
    /// it is not asked again there, which the file system would refuse as direct, costing a
    /// small file a second read and the switch to the page cache.
    func read(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, isDirect: inout Bool, path: String?
    ) throws(SystemError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let count: Int
            do {
                count = try readOnce(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: offset + Int64(filled), path: path)
            } catch where error.errno == .invalidArgument && isDirect {
                // Refused as direct, also after a short direct read left the next one unaligned.
                try turnOffDirectIO(&isDirect, path: path)
                continue
            }
            if count == 0 { break }
            filled += count
            if isDirect, (Int(offset) + filled) % AlignedBuffer.alignment != 0 { break }
        }
        return filled
    }

    /// Writes all of `bytes` at `offset`. While `isDirect`, the aligned front of `bytes` goes
    /// straight to the device (its address and `offset` must be aligned); an unaligned rest
    /// (a file's tail) or a write refused as direct turns direct I/O off for good (`isDirect`
    /// false) and goes through the page cache.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, isDirect: inout Bool, path: String) throws(SystemError) {
        var written = 0
        if isDirect {
            let aligned = bytes.count / AlignedBuffer.alignment * AlignedBuffer.alignment
            while written < aligned {
                let count: Int
                do {
                    count = try writeOnce(UnsafeRawBufferPointer(rebasing: bytes[written..<aligned]), at: offset + Int64(written), path: path)
                } catch where error.errno == .invalidArgument {
                    break  // refused as direct: the rest goes through the cache
                }
                if count == 0 { break }
                written += count
            }
            if written < bytes.count { try turnOffDirectIO(&isDirect, path: path) }
        }
        try write(UnsafeRawBufferPointer(rebasing: bytes[written...]), at: offset + Int64(written), path: path)
    }

    private func turnOffDirectIO(_ isDirect: inout Bool, path: String?) throws(SystemError) {
        try setDirectIO(false, path: path)
        isDirect = false
    }
}

/// When one reader asks the page cache about the files it opens (``FileDescriptor/isInPageCache(firstBytes:)``).
///
/// A card just inserted is cold from its first file to its last, and asking (`mmap`,
/// `mincore`, `munmap`) is a visible share of the CPU time of a card of small files, to
/// learn the same thing for every file. So after ``coldBeforeSampling`` files
/// found cold in a row, only one file in ``sampleEvery`` is asked, and the others are taken
/// for cold; one found warm brings back the question for every file. A folder another
/// program is writing is warm from its first file and is asked about all of them. A warm
/// file behind a long cold run is, at worst, read as a cold one (from the disk rather than
/// the cache, with the same bytes; or through the cache and dropped from it), and no more
/// than 15 in a row.
struct CacheSense {
    /// Cold files in a row after which the question becomes a sample.
    static let coldBeforeSampling = 64
    /// One file asked in this many, while sampling.
    static let sampleEvery = 16

    private var coldInARow = 0
    private var notAsked = 0

    /// Whether the file is warm: `ask()`'s answer, or false for a file not asked.
    mutating func isWarm(_ ask: () -> Bool) -> Bool {
        if coldInARow >= Self.coldBeforeSampling {
            notAsked += 1
            guard notAsked >= Self.sampleEvery else { return false }
            notAsked = 0
        }
        let warm = ask()
        coldInARow = warm ? 0 : coldInARow + 1
        return warm
    }
}
