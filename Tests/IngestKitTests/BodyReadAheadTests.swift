import Dispatch
import Glibc
import Synchronization
import Testing

@testable import IngestKit

/// Request bodies read ahead on threads of their own, in 8 KiB blocks: the same bytes as the
/// file whatever the range and however they are asked for, a pause that ends with a wake,
/// rewinds at any moment, and every buffer back in the pool.
@Suite struct BodyReadAheadTests {
    /// The wakes a read-ahead gave, to wait for one.
    final class Wakes: Sendable {
        private let signal = DispatchSemaphore(value: 0)
        private let counted = Atomic<Int>(0)
        var count: Int { counted.load(ordering: .relaxed) }

        func wake() {
            counted.add(1, ordering: .relaxed)
            signal.signal()
        }

        func wait() -> Bool { signal.wait(timeout: .now() + 10) == .success }
    }

    /// A staged file of random bytes, and a read-ahead in 8 KiB blocks with the wakes it gives.
    struct Fixture {
        let directory: TemporaryDirectory
        let content: [UInt8]
        let path: String
        let readAhead: BodyReadAhead
        let wakes = Wakes()

        init(size: Int, threads: Int, in directory: TemporaryDirectory = TemporaryDirectory()) throws {
            self.directory = directory
            content = randomBytes(size)
            path = try directory.write("staged", content)
            readAhead = BodyReadAhead(threads: threads, blockSize: 8192, wake: { [wakes] in wakes.wake() })
        }
    }

    /// Reads `count` bytes of `body` (to its end when nil), `step` at a time, as the transport
    /// does: after `notReady`, again once woken.
    static func read(_ body: FileBody, step: Int, count: Int? = nil, wakes: Wakes) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: step)
        while count.map({ bytes.count < $0 }) ?? true {
            let want = min(step, (count ?? .max) - bytes.count)
            switch piece.withUnsafeMutableBytes({ body.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want])) }) {
            case .bytes(let got): bytes += piece[..<got]
            case .end: return bytes
            case .notReady: try #require(wakes.wait(), "no wake within 10 s")
            case .failed(let error): throw error
            }
        }
        return bytes
    }

    func readsEveryRangeByteForByte(in directory: TemporaryDirectory) throws {
        let fixture = try Fixture(size: 200_000, threads: 2, in: directory)
        let (content, readAhead, wakes) = (fixture.content, fixture.readAhead, fixture.wakes)
        for (offset, length) in DirectIOTests.ranges {
            for step in [1000, 8192, 65_536] {
                let body = try readAhead.open(path: fixture.path, offset: Int64(offset), length: Int64(length))
                #expect(try Self.read(body, step: step, wakes: wakes) == Array(content[offset..<offset + length]), "\(offset)+\(length) by \(step)")
                body.close()
            }
        }
        readAhead.stop()
        #expect(readAhead.blocks.idleCount == readAhead.blocks.madeCount)
    }

    @Test func aBodyArrivesByteForByteWhereverItsRangeStartsAndEnds() throws {
        try readsEveryRangeByteForByte(in: TemporaryDirectory())
    }

    @Test(needsRoot) func aBodyOnAFileSystemWithoutDirectIOArrivesToo() throws {
        let ramfs = try RamfsDirectory()
        try readsEveryRangeByteForByte(in: ramfs.directory)
    }

    /// With no reader thread, the test fills blocks by hand: a read before the first fill
    /// is not ready, and the fill that ends the wait wakes the transport, once.
    @Test func aBodyNotReadYetIsNotReadyUntilItsBlockArrivesWhichWakesTheTransport() throws {
        let fixture = try Fixture(size: 20_000, threads: 0)
        let (content, readAhead, wakes) = (fixture.content, fixture.readAhead, fixture.wakes)
        let body = try readAhead.open(path: fixture.path, offset: 0, length: 20_000)
        var piece = [UInt8](repeating: 0, count: 20_000)
        let read = { () -> FileBody.Chunk in piece.withUnsafeMutableBytes { body.read(into: $0) } }

        guard case .notReady = read() else { Issue.record("a read before any fill had bytes"); return }
        #expect(wakes.count == 0)
        try #require(readAhead.queue.take() === body)
        body.fill()  // the first block, and the body queued again for the second
        #expect(wakes.count == 1)
        try #require(readAhead.queue.take() === body)
        body.fill()  // nobody waits: no wake
        #expect(wakes.count == 1)
        #expect(readAhead.queue.isEmpty, "no idle buffer left to fill")

        guard case .bytes(16_384) = read() else { Issue.record("two filled blocks were not sent in one read"); return }
        #expect(piece[..<16_384] == content[..<16_384])
        // Both blocks were handed back; the last one is read on request.
        guard case .notReady = read() else { Issue.record("the third block was there before its fill"); return }
        try #require(readAhead.queue.take() === body)
        body.fill()
        #expect(wakes.count == 2)
        guard case .bytes(3616) = read() else { Issue.record("the last block did not follow its fill"); return }
        #expect(piece[..<3616] == content[16_384...])
        guard case .end = read() else { Issue.record("no end after the last byte"); return }
        body.close()
        #expect(readAhead.blocks.idleCount == 2)
    }

    /// Rewinds at random points, with blocks ready, being read or not asked for: what comes
    /// after each is the file from the point rewound to.
    /// A body one block holds takes one block from the pool, a larger one two: so twice as
    /// many small bodies fit the memory that bounds the transfers (``TransferLimiter``).
    @Test func aBodyThatFitsOneBlockHoldsOneAndALargerOneTwo() throws {
        let fixture = try Fixture(size: 50_000, threads: 1)
        let readAhead = fixture.readAhead
        // Smaller than a block: a buffer of its own pages, the pool's blocks left alone.
        let tiny = try readAhead.open(path: fixture.path, offset: 100, length: 3000)
        #expect(try Self.read(tiny, step: 1000, wakes: fixture.wakes) == Array(fixture.content[100..<3100]))
        tiny.close()
        #expect(readAhead.blocks.madeCount == 0)
        #expect(readAhead.blocks.idleCount == 0, "its buffer is let go, not pooled")
        let small = try readAhead.open(path: fixture.path, offset: 0, length: 8192)
        #expect(readAhead.blocks.madeCount == 1)
        #expect(try Self.read(small, step: 1000, wakes: fixture.wakes) == Array(fixture.content[..<8192]))
        small.close()
        let large = try readAhead.open(path: fixture.path, offset: 0, length: 8193)
        #expect(readAhead.blocks.madeCount == 2)
        #expect(try Self.read(large, step: 1000, wakes: fixture.wakes) == Array(fixture.content[..<8193]))
        large.close()
        readAhead.stop()
        #expect(readAhead.blocks.idleCount == readAhead.blocks.madeCount)
    }

    @Test func rewindingSendsTheSameBytesAgainWhateverIsInFlight() throws {
        let fixture = try Fixture(size: 300_000, threads: 2)
        let (content, readAhead, wakes) = (fixture.content, fixture.readAhead, fixture.wakes)
        let (offset, length) = (1234, 250_000)
        let body = try readAhead.open(path: fixture.path, offset: Int64(offset), length: Int64(length))
        var position = 0
        for round in 0..<300 {
            let count = Int.random(in: 0...min(40_000, length - position))
            let bytes = try Self.read(body, step: 5000, count: count, wakes: wakes)
            #expect(bytes == Array(content[offset + position..<offset + position + count]), "round \(round) from \(position)")
            position = Int.random(in: 0...length)
            body.rewind(to: Int64(position))
        }
        #expect(try Self.read(body, step: 65_536, wakes: wakes) == Array(content[offset + position..<offset + length]))
        body.close()
        readAhead.stop()
        #expect(readAhead.blocks.idleCount == readAhead.blocks.madeCount)
    }

    @Test func aFileShorterThanItsRangeFailsWithEIOAndARewindRetriesIt() throws {
        let fixture = try Fixture(size: 30_000, threads: 2)
        let (content, readAhead, wakes) = (fixture.content, fixture.readAhead, fixture.wakes)
        let body = try readAhead.open(path: fixture.path, offset: 0, length: 40_000)
        #expect {
            _ = try Self.read(body, step: 8192, wakes: wakes)
        } throws: { error in
            (error as? SystemError)?.errno == .ioError
        }
        body.rewind(to: 25_000)
        #expect(try Self.read(body, step: 8192, count: 5000, wakes: wakes) == Array(content[25_000...]))
        body.close()
        readAhead.stop()
    }

    /// Bodies closed at random points, most with a block being read: once the reader
    /// threads stop, every buffer the pool made is back in it.
    @Test func closingABodyGivesEveryBufferBackEvenWithAFillInFlight() throws {
        let fixture = try Fixture(size: 200_000, threads: 2)
        let (readAhead, wakes) = (fixture.readAhead, fixture.wakes)
        for _ in 0..<200 {
            let body = try readAhead.open(path: fixture.path, offset: 0, length: 200_000)
            _ = try Self.read(body, step: 4096, count: Int.random(in: 0...100_000), wakes: wakes)
            body.close()
        }
        readAhead.stop()
        #expect(readAhead.blocks.madeCount >= 2)
        #expect(readAhead.blocks.idleCount == readAhead.blocks.madeCount)
    }
}
