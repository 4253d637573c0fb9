import Glibc

/// Reads one byte range of a file front to back (a request body, a staged copy being
/// checked): in aligned blocks of its buffer's size, with direct I/O where the file system
/// takes it (see DirectIO.swift), so the bytes go from the device into one reused buffer and
/// not through the page cache.
///
/// One thread at a time.
final class FileRangeReader {
    let path: String
    private let file: FileDescriptor
    private let start: Int64
    private let end: Int64
    private let buffer: AlignedBuffer
    private var position: Int64
    /// The file's bytes `bufferStart ..< bufferStart + bufferCount` are in `buffer`.
    private var bufferStart: Int64 = 0
    private var bufferCount = 0
    /// Reads bypass the page cache.
    private(set) var isDirect: Bool

    /// Opens `path` to read `length` bytes from `offset`, into `buffer` (whose size is the
    /// size of every read from the file).
    convenience init(path: String, offset: Int64, length: Int64, buffer: AlignedBuffer) throws(SystemError) {
        try self.init(file: FileDescriptor(path: path, flags: O_RDONLY), path: path, offset: offset, length: length, buffer: buffer)
    }

    /// Reads the whole of `file`, as long as it is now (`path` names it in errors).
    convenience init(wholeFile file: FileDescriptor, path: String, buffer: AlignedBuffer) throws(SystemError) {
        try self.init(file: file, path: path, offset: 0, length: Int64(file.stat().st_size), buffer: buffer)
    }

    /// Reads from `file`, already open (`path` names it in errors).
    init(file: FileDescriptor, path: String, offset: Int64, length: Int64, buffer: AlignedBuffer) {
        self.file = file
        isDirect = file.preferDirectIO()
        if !isDirect { _ = posix_fadvise(file.raw, off_t(offset), off_t(length), POSIX_FADV_SEQUENTIAL) }
        self.path = path
        self.buffer = buffer
        start = offset
        end = offset + length
        position = offset
    }

    /// Copies the range's next bytes into `destination`, as many as fit; 0 at the range's
    /// end. A file that ends before the range does is an error (EIO).
    func read(into destination: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        var copied = 0
        while copied < destination.count, position < end {
            let bytes = try buffered()
            let count = min(bytes.count, destination.count - copied)
            (destination.baseAddress! + copied).copyMemory(from: bytes.baseAddress!, byteCount: count)
            copied += count
            position += Int64(count)
        }
        return copied
    }

    /// The range's next bytes, read in place: valid until the next call, empty at the
    /// range's end. A file that ends before the range does is an error (EIO).
    func next() throws(SystemError) -> UnsafeRawBufferPointer {
        guard position < end else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let bytes = try buffered()
        position += Int64(bytes.count)
        return bytes
    }

    /// Moves to `offset` bytes from the range's start (to send the body again).
    func seek(to offset: Int64) {
        precondition(offset >= 0 && offset <= end - start, "seek outside the range")
        position = start + offset
    }

    /// The bytes from `position` on that are in the buffer (at least one, before the end),
    /// reading the next block first when none are.
    private func buffered() throws(SystemError) -> UnsafeRawBufferPointer {
        if position < bufferStart || position >= bufferStart + Int64(bufferCount) { try fill() }
        let from = Int(position - bufferStart)
        let to = Int(min(bufferStart + Int64(bufferCount), end) - bufferStart)
        return UnsafeRawBufferPointer(rebasing: buffer.storage[from..<to])
    }

    /// Reads the aligned block that holds `position`, no further than the range needs.
    private func fill() throws(SystemError) {
        // Through the page cache, what was read leaves it: it is read once.
        if !isDirect, bufferCount > 0 { file.dropFromCache(offset: bufferStart, length: Int64(bufferCount)) }
        let alignment = Int64(AlignedBuffer.alignment)
        let blockStart = position / alignment * alignment
        let alignedEnd = (end + alignment - 1) / alignment * alignment
        let want = Int(min(Int64(buffer.storage.count), alignedEnd - blockStart))
        let block = UnsafeMutableRawBufferPointer(rebasing: buffer.storage[..<want])
        let count = try file.read(into: block, at: blockStart, isDirect: &isDirect, path: path)
        bufferStart = blockStart
        bufferCount = count
        // Nothing at `position`: the file is shorter than it was when the range was planned.
        guard blockStart + Int64(count) > position else { throw SystemError(call: "pread", errno: EIO, path: path) }
    }
}
