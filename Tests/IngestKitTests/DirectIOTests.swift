import Foundation
import Glibc
import Testing

@testable import IngestKit

/// Direct I/O where the file system takes it (the test directory, on disk), the page cache
/// where it refuses it (ramfs): the same bytes either way.
@Suite struct DirectIOTests {
    /// Reads the whole range through `reader`, `step` bytes per call.
    static func readAll(_ reader: FileRangeReader, step: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: step)
        while true {
            let count = try piece.withUnsafeMutableBytes { try reader.read(into: $0) }
            if count == 0 { return bytes }
            bytes += piece[..<count]
        }
    }

    /// Every kind of range, read in pieces of several sizes, through 8 KiB blocks.
    func readsEveryRangeByteForByte(in directory: TemporaryDirectory, direct: Bool) throws {
        let content = randomBytes(50_000)
        let path = try directory.write("staged", content)
        // Aligned and not, within one block and across several, the whole file, one byte, nothing.
        let ranges = [(0, 50_000), (5000, 20_000), (8192, 8192), (4095, 4098), (49_999, 1), (12_345, 0)]
        for (offset, length) in ranges {
            for step in [1000, 8192, 65_536] {
                let reader = try FileRangeReader(
                    path: path, offset: Int64(offset), length: Int64(length), buffer: AlignedBuffer(size: 8192))
                #expect(try Self.readAll(reader, step: step) == Array(content[offset..<offset + length]), "\(offset)+\(length) by \(step)")
                #expect(reader.isDirect == direct)
            }
            // In place, block by block.
            let reader = try FileRangeReader(path: path, offset: Int64(offset), length: Int64(length), buffer: AlignedBuffer(size: 8192))
            var inPlace: [UInt8] = []
            while case let bytes = try reader.next(), !bytes.isEmpty { inPlace += bytes }
            #expect(inPlace == Array(content[offset..<offset + length]), "\(offset)+\(length) in place")
        }
    }

    @Test func aRangeReadsByteForByteWhereverItStartsAndEnds() throws {
        try readsEveryRangeByteForByte(in: TemporaryDirectory(), direct: true)
    }

    @Test(needsRoot) func aRangeOnAFileSystemWithoutDirectIOReadsThroughTheCache() throws {
        let ramfs = try RamfsDirectory()
        try readsEveryRangeByteForByte(in: ramfs.directory, direct: false)
    }

    @Test func seekingBackSendsTheSameBytesAgain() throws {
        let directory = TemporaryDirectory()
        let content = randomBytes(40_000)
        let path = try directory.write("staged", content)
        let reader = try FileRangeReader(path: path, offset: 3000, length: 30_000, buffer: AlignedBuffer(size: 4096))
        let first = try Self.readAll(reader, step: 7000)
        reader.seek(to: 0)
        #expect(try Self.readAll(reader, step: 5000) == first)
        reader.seek(to: 29_000)
        #expect(try Self.readAll(reader, step: 5000) == Array(content[32_000..<33_000]))
    }

    @Test func aFileShorterThanItsRangeIsAReadError() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("staged", randomBytes(10_000))
        let reader = try FileRangeReader(path: path, offset: 0, length: 12_000, buffer: AlignedBuffer(size: 4096))
        #expect {
            _ = try Self.readAll(reader, step: 4096)
        } throws: { error in
            (error as? SystemError)?.errno == EIO
        }
    }

    /// Writes 3 whole blocks and a tail through one aligned buffer, then reads it all back
    /// in one read that runs past the end of the file.
    func writesAndReadsBack(in directory: TemporaryDirectory, direct: Bool) throws {
        let path = directory.path + "/copy"
        var file = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
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

        file = try FileDescriptor(path: path, flags: O_RDONLY)
        isDirect = file.preferDirectIO()
        let back = AlignedBuffer(size: 4 * 8192)
        let count = try file.read(into: back.storage, at: 0, isDirect: &isDirect, path: path)
        #expect(count == content.count)
        #expect(Array(back.storage[..<count]) == content)
    }

    @Test func alignedWritesGoDirectAndAFilesTailThroughTheCache() throws {
        try writesAndReadsBack(in: TemporaryDirectory(), direct: true)
    }

    @Test(needsRoot) func writesWhereDirectIOIsRefusedGoThroughTheCache() throws {
        let ramfs = try RamfsDirectory()
        try writesAndReadsBack(in: ramfs.directory, direct: false)
    }

    @Test func theBufferPoolHandsBackWhatItWasGiven() {
        let pool = AlignedBufferPool(bufferSize: 8192)
        let first = pool.take()
        #expect(Int(bitPattern: first.storage.baseAddress) % AlignedBuffer.alignment == 0)
        pool.giveBack(first)
        #expect(pool.take() === first)
        #expect(pool.take() !== first)
    }
}
