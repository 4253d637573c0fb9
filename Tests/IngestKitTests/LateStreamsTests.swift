import Foundation
import Synchronization
import Testing

@testable import IngestKit

/// A stager started before its run knew where large files stream asks, for each large file,
/// and waits until the run says.
@Suite struct LateStreamsTests {
    /// Streams every file at one part size, counting the copies handed over.
    final class Streams: CopyStreams, Sendable {
        let handed = Atomic<Int>(0)
        func partSize(toStream file: ScannedFile) -> Int64? { 8 << 20 }
        func stream(_ copy: GrowingCopy) { handed.add(1, ordering: .relaxed) }
    }

    let file = ScannedFile(path: CardPath("DCIM/BIG.MP4"), size: 1 << 30, mtime: 0)

    @Test func theReaderWaitsForTheRunToSettleTheStreamsThenUsesThem() async throws {
        let late = LateStreams(), streams = Streams()
        let answer = Mutex<Int64??>(nil)
        let file = file
        Thread {
            let size = late.partSize(toStream: file)
            answer.withLock { $0 = .some(size) }
        }.start()
        try await Task.sleep(for: .milliseconds(100))
        #expect(answer.withLock { $0 } == nil, "waits until settled")

        late.settle(streams)
        for _ in 0..<500 where answer.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(answer.withLock { $0 } == .some(8 << 20))
        late.stream(GrowingCopy(file: file, partSize: 8 << 20))
        #expect(streams.handed.load(ordering: .relaxed) == 1)
    }

    /// A run that stops, or uploads nothing, settles them with none: files are copied the
    /// ordinary way, and a later settle changes nothing.
    @Test func streamsSettledWithNoneStreamNothingAndOnlyTheFirstSettleCounts() {
        let late = LateStreams(), streams = Streams()
        late.settle(nil)
        late.settle(streams)
        #expect(late.partSize(toStream: file) == nil)
    }
}
