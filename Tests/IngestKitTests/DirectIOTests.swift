import CSystemShims
import Foundation
import Glibc
import Testing

@testable import IngestKit

/// Direct I/O where the file system takes it (the test directory, on disk), the page cache
/// where it refuses it (ramfs): the same bytes either way.
@Suite struct DirectIOTests {
    /// Every kind of range, read block by block in place, through 8 KiB blocks; direct where
    /// `direct` and the range is larger than a small copy (``smallCopyLimit``), through the
    /// cache otherwise.
    func readsEveryRangeByteForByte(in directory: TemporaryDirectory, direct: Bool) throws {
        let content = randomBytes(200_000)
        let path = try directory.write("staged", content)
        for (offset, length) in Self.ranges {
            let reader = try FileRangeReader(path: path, offset: Int64(offset), length: Int64(length), buffer: AlignedBuffer(size: 8192))
            #expect(reader.range.isDirect == (direct && Int64(length) > smallCopyLimit), "\(offset)+\(length)")
            var bytes: [UInt8] = []
            while case let block = try reader.next(), !block.isEmpty { bytes += block }
            #expect(bytes == Array(content[offset..<offset + length]), "\(offset)+\(length)")
        }
    }

    /// Aligned and not, within one 8 KiB block and across several, the whole 200,000-byte
    /// file, one byte, nothing; larger than a small copy (read direct) and not.
    static let ranges = [
        (0, 200_000), (5000, 120_000), (8192, 81_920), (4095, 70_001),
        (5000, 20_000), (8192, 8192), (4095, 4098), (199_999, 1), (12_345, 0),
    ]

    @Test func aRangeReadsByteForByteWhereverItStartsAndEnds() throws {
        try readsEveryRangeByteForByte(in: TemporaryDirectory(), direct: true)
    }

    @Test(needsRoot) func aRangeOnAFileSystemWithoutDirectIOReadsThroughTheCache() throws {
        let ramfs = try RamfsDirectory()
        try readsEveryRangeByteForByte(in: ramfs.directory, direct: false)
    }

    @Test func aFileShorterThanItsRangeIsAReadError() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("staged", randomBytes(10_000))
        let reader = try FileRangeReader(path: path, offset: 0, length: 12_000, buffer: AlignedBuffer(size: 4096))
        #expect {
            while try !reader.next().isEmpty {}
        } throws: { error in
            (error as? SystemError)?.errno == .ioError
        }
    }

    /// Writes 3 whole blocks and a tail through one aligned buffer, then reads it all back
    /// in one read that runs past the end of the file.
    func writesAndReadsBack(in directory: TemporaryDirectory, direct: Bool) throws {
        let path = directory.path + "/copy"
        var file = try FileDescriptor(path: path, flags: [.writeOnly, .create, .exclusive], mode: 0o600)
        var isDirect = file.preferDirectIO()
        #expect(isDirect == direct)
        let content = randomBytes(3 * 8192 + 1000)
        let buffer = AlignedBuffer(size: 8192)
        var offset = 0
        while offset < content.count {
            let count = min(8192, content.count - offset)
            content[offset..<offset + count].withUnsafeBytes { buffer.storage.copyMemory(from: $0) }
            try file.write(UnsafeRawBufferPointer(rebasing: buffer.storage[..<count]), at: Int64(offset), isDirect: &isDirect, path: path)
            // Direct until the tail, which is not a whole number of blocks.
            #expect(isDirect == (direct && offset + count < content.count))
            offset += count
        }
        try file.close()
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == content)

        file = try FileDescriptor(path: path, flags: .readOnly)
        isDirect = file.preferDirectIO()
        let back = AlignedBuffer(size: 4 * 8192)
        let count = try file.read(into: back.storage, at: 0, isDirect: &isDirect, path: path)
        #expect(count == content.count)
        #expect(Array(back.storage[..<count]) == content)
        // The read came back short at the unaligned end of the file and stopped there: not
        // asked again at an unaligned offset, which would have turned direct I/O off.
        #expect(isDirect == direct)
    }

    @Test func alignedWritesGoDirectAndAFilesTailThroughTheCache() throws {
        try writesAndReadsBack(in: TemporaryDirectory(), direct: true)
    }

    @Test(needsRoot) func writesWhereDirectIOIsRefusedGoThroughTheCache() throws {
        let ramfs = try RamfsDirectory()
        try writesAndReadsBack(in: ramfs.directory, direct: false)
    }

    /// A file's head is in the page cache: not once its pages are dropped, yes once it is
    /// read, and not while one page of it is missing.
    @Test func aFilesHeadIsCachedOnlyWhileEveryPageOfItIsInThePageCache() throws {
        let size = 64 * 4096 + 100
        let directory = TemporaryDirectory()
        let path = try directory.write("source", randomBytes(size))
        let file = try FileDescriptor(path: path, flags: .readOnly)
        func isCached(_ length: Int) -> Int32 { ingest_mincore_cached(file.raw, Int64(length)) }
        #expect(fsync(file.raw) == 0, "written pages are dropped only once clean")
        file.dropFromCache()
        #expect(isCached(8192) == 0)
        #expect(!file.isInPageCache(firstBytes: 8192))

        let buffer = AlignedBuffer(size: size + 4096)
        #expect(try file.read(into: buffer.storage, at: 0) == size)
        #expect(isCached(size) == 1)
        #expect(file.isInPageCache(firstBytes: Int64(size)))

        file.dropFromCache(offset: 40 * 4096, length: 4096)
        #expect(isCached(40 * 4096) == 1, "the pages before the one dropped")
        #expect(isCached(size) == 0)
        #expect(!file.isInPageCache(firstBytes: Int64(size)))
        #expect(!file.isInPageCache(firstBytes: 0), "an empty file has nothing to keep")
    }

    @Test func theBufferPoolHandsBackWhatItWasGiven() {
        let pool = AlignedBufferPool(bufferSize: 8192)
        let first = pool.take()
        #expect(Int(bitPattern: first.storage.baseAddress) % AlignedBuffer.alignment == 0)
        pool.giveBack(first)
        #expect(pool.idleCount == 1)
        #expect(pool.take() === first)
        #expect(pool.take() !== first)
        #expect(pool.madeCount == 2)
    }
}
