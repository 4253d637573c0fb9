/// One byte range of a file (a request body, a staged copy being checked), read in aligned
/// blocks with direct I/O where the file system takes it (see DirectIO.swift): the bytes go
/// from the device into the caller's buffer and not through the page cache.
///
/// One read at a time (from any thread, one after the other).
final class FileRange: @unchecked Sendable {
    let path: String
    let length: Int64
    private let file: FileDescriptor
    private let start: Int64
    /// Reads bypass the page cache.
    private(set) var isDirect: Bool

    /// Opens `path` to read `length` bytes from `offset`.
    convenience init(path: String, offset: Int64, length: Int64) throws(SystemError) {
        try self.init(file: FileDescriptor(path: path, flags: .readOnly), path: path, offset: offset, length: length)
    }

    /// The range of `file`, already open (`path` names it in errors).
    init(file: FileDescriptor, path: String, offset: Int64, length: Int64) {
        precondition(offset >= 0 && length >= 0, "a byte range needs offset >= 0 and length >= 0, got \(offset), \(length)")
        self.file = file
        self.path = path
        start = offset
        self.length = length
        // A small range is read through the cache, which is where a small copy is.
        isDirect = length > smallCopyLimit && file.preferDirectIO()
        if !isDirect { file.adviseSequential(offset: offset, length: length) }
    }

    /// The bytes of the whole aligned pages the range lies in (one page at least): what one
    /// buffer needs to read it all at once.
    var pageSpan: Int64 {
        let alignment = Int64(AlignedBuffer.alignment)
        let first = start / alignment * alignment
        return max(alignment, (start + length + alignment - 1) / alignment * alignment - first)
    }

    /// Reads the aligned block that holds the range's byte `offset` (counted from the
    /// range's start) into `buffer`, no further than the range needs, and returns the
    /// range's bytes from `offset` on that the block holds: at least one, none only at the
    /// range's end. A file that ends before the range does is an error (EIO).
    func read(blockAt offset: Int64, into buffer: AlignedBuffer) throws(SystemError) -> UnsafeRawBufferPointer {
        precondition(offset >= 0 && offset <= length, "offset \(offset) outside a range of \(length) bytes")
        let position = start + offset
        let end = start + length
        guard position < end else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let alignment = Int64(AlignedBuffer.alignment)
        let blockStart = position / alignment * alignment
        let alignedEnd = (end + alignment - 1) / alignment * alignment
        let want = Int(min(Int64(buffer.storage.count), alignedEnd - blockStart))
        let block = UnsafeMutableRawBufferPointer(rebasing: buffer.storage[..<want])
        let count = try file.read(into: block, at: blockStart, isDirect: &isDirect, path: path)
        // Through the page cache, what was read leaves it: it is read once.
        if !isDirect { file.dropFromCache(offset: blockStart, length: Int64(count)) }
        // Nothing at `position`: the file is shorter than it was when the range was planned.
        guard blockStart + Int64(count) > position else { throw SystemError(call: "pread", errno: .ioError, path: path) }
        let from = Int(position - blockStart)
        let to = Int(min(blockStart + Int64(count), end) - blockStart)
        return UnsafeRawBufferPointer(rebasing: buffer.storage[from..<to])
    }
}

/// Reads a ``FileRange`` front to back into one reused buffer, whose size is the size of
/// every read from the file.
///
/// One thread at a time.
final class FileRangeReader {
    let range: FileRange
    private let buffer: AlignedBuffer
    /// Where the next block starts, from the range's start.
    private var offset: Int64 = 0

    init(_ range: FileRange, buffer: AlignedBuffer) {
        self.range = range
        self.buffer = buffer
    }

    /// Opens `path` to read `length` bytes from `offset`, into `buffer`.
    convenience init(path: String, offset: Int64, length: Int64, buffer: AlignedBuffer) throws(SystemError) {
        try self.init(FileRange(path: path, offset: offset, length: length), buffer: buffer)
    }

    /// Reads the whole of `file`, as long as it is now (`path` names it in errors).
    convenience init(wholeFile file: FileDescriptor, path: String, buffer: AlignedBuffer) throws(SystemError) {
        try self.init(FileRange(file: file, path: path, offset: 0, length: Int64(file.stat().st_size)), buffer: buffer)
    }

    /// The range's next bytes, read in place: valid until the next call, empty at the
    /// range's end. A file that ends before the range does is an error (EIO).
    func next() throws(SystemError) -> UnsafeRawBufferPointer {
        let bytes = try range.read(blockAt: offset, into: buffer)
        offset += Int64(bytes.count)
        return bytes
    }
}
