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
        let answered = Atomic<Bool>(false)
        let file = file
        let reader = Task {
            await onDedicatedThread("test-card-read") {
                defer { answered.store(true, ordering: .releasing) }
                return late.partSize(toStream: file)
            }
        }
        #expect(await eventually { threadIsAsleep(named: "test-card-read") || answered.load(ordering: .acquiring) })
        let early = answered.load(ordering: .acquiring)
        #expect(!early, "waits until settled")

        late.settle(streams)
        #expect(await reader.value == 8 << 20)
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
