/// An open directory read a bounded chunk of names at a time, so that a directory of
/// millions of entries costs the memory of one chunk, not of its whole listing.
///
/// A class because it owns a ``DirectoryReader`` (and the descriptor inside it), closed once,
/// when the last reference goes.
final class DirectoryStream {
    /// At most this many names per chunk: the largest camera folder (DCF numbers files
    /// 0001 to 9999) is one chunk, so its files are visited in byte order of their names.
    static let chunkNames = 10_000
    /// And at most about this many bytes of names per chunk: 10,000 names of 255 bytes
    /// would hold 2.5 MB for each directory level of a walk.
    static let chunkBytes = 512 << 10

    private let reader: DirectoryReader

    /// Takes ownership of `descriptor`, an open directory: it is closed with the stream, or
    /// at once if the stream cannot be made.
    init(adopting descriptor: FileDescriptor) throws(SystemError) {
        reader = try DirectoryReader(adopting: descriptor)
    }

    /// The descriptor, for `fstatat` and `openat` relative to this directory.
    var descriptor: FileDescriptor { reader.descriptor }

    /// The next names of the directory (never `.` or `..`), sorted by their bytes; an
    /// empty chunk when the listing is over.
    func nextChunk() throws(SystemError) -> NameChunk {
        var chunk = NameChunk()
        while chunk.count < Self.chunkNames, chunk.byteCount < Self.chunkBytes {
            let listed: Void? = try reader.nextEntry { name, _ in
                if name.elementsEqual([UInt8(ascii: ".")]) || name.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                    return
                }
                chunk.append(name)
            }
            if listed == nil { break }  // the end of the listing
        }
        chunk.sort()
        return chunk
    }
}

/// Names held in one buffer with the range of each, not one array per name: a chunk of
/// short names costs their bytes plus two integers each.
struct NameChunk {
    private var bytes: [UInt8] = []
    private var ranges: [Range<Int>] = []

    var count: Int { ranges.count }
    var byteCount: Int { bytes.count }
    var isEmpty: Bool { ranges.isEmpty }

    subscript(index: Int) -> ArraySlice<UInt8> { bytes[ranges[index]] }

    mutating func append(_ name: some Collection<UInt8>) {
        let start = bytes.count
        bytes.append(contentsOf: name)
        ranges.append(start..<bytes.count)
    }

    /// Orders the names by their bytes, so runs over the same directory repeat.
    mutating func sort() {
        ranges.sort { [bytes] a, b in bytes[a].lexicographicallyPrecedes(bytes[b]) }
    }
}
