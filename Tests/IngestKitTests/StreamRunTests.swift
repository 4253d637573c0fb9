import Foundation
import Synchronization
import Testing

@testable import IngestKit

/// The streamed path driven through a ``ScriptedStore``: a large file's parts sent from its
/// growing copy (``StreamRun``), journalled as a stream, handed to the file's claim or adopted
/// by the next process after a kill, and finished by the ordinary upload (``UploadRun``),
/// with the store's scripted failures at the points the fault suite cuts a streaming run:
/// a kill, a power cut (the server took a part whose answer never came back) and a network
/// cut while streaming, and another writer first.
@Suite struct StreamRunTests {
    static let key = "station/2026-06-01/DJI-1a2b3c4d/DCIM/DJI_0003.MP4"
    static let partSize: Int64 = 5 << 20

    /// A file of 12 MiB (three parts) being staged, a journal that knows its card, a store.
    struct Bench {
        let card: CardFixture
        let bytes: [UInt8]
        let fingerprint: Fingerprint
        /// The stream's name of the copy (and, once staged, the staged copy).
        let path: String
        let file: ScannedFile
        let stop = StopFlag()
        var store: ScriptedStore { card.store }
        var journal: Journal { card.journal }
        var volume: VolumeIdentity { card.volume }
        static let target = CardFixture.target
        static let headers = CardFixture.labels

        init(size: Int = 12 << 20) async throws {
            card = try await CardFixture()
            bytes = randomBytes(size)
            path = try card.directory.write("staged", bytes)
            fingerprint = try Fingerprint.ofFile(at: path).0
            file = ScannedFile(path: CardPath("DCIM/DJI_0003.MP4"), size: Int64(size), mtime: 1)
        }

        var plan: PartPlan { get throws { try PartPlan.recorded(fileSize: file.size, partSize: StreamRunTests.partSize) } }

        /// The copy as the stager leaves it: written through part `parts` (every part by
        /// default) with each part's CRC32C from the card's bytes, then ended complete, or
        /// failed when cut short.
        func copy(writtenThrough parts: Int? = nil) throws -> GrowingCopy {
            let copy = GrowingCopy(file: file, partSize: StreamRunTests.partSize)
            copy.attach(path: path)
            let plan = try plan
            for number in 1...(parts ?? plan.partCount) {
                let range = plan.range(ofPart: number)
                copy.wrote(upTo: range.offset + range.length)
                copy.checksummed(crc32c(ofPart: number))
            }
            copy.ended(parts == nil ? .complete(fingerprint) : .failed)
            return copy
        }

        func crc32c(ofPart number: Int) -> UInt32 {
            guard let range = try? plan.range(ofPart: number) else { return 0 }
            return bytes[Int(range.offset)..<Int(range.offset + range.length)].withUnsafeBytes { CRC32C.update(0, $0) }
        }

        /// Streams the copy with `partsInFlight` parts at once, reporting to `sink`.
        func stream(_ copy: GrowingCopy, partsInFlight: Int = 2, sink: any EventSink = DiscardingSink()) async -> StreamRun? {
            let context = StreamRun.Context(
                store: store, journal: journal, limiter: TransferLimiter(maxRequests: 4, maxBytes: 1 << 30), stop: stop,
                sink: sink, hooks: FaultHooks(), signPayloads: false, partsInFlight: partsInFlight)
            let object = StreamedObject(
                target: Self.target, key: StreamRunTests.key, headers: Self.headers, partSize: StreamRunTests.partSize,
                partCount: copy.partCount)
            return await StreamRun.stream(copy, as: object, streamID: 42, volumeKey: volume.key, context: context)
        }

        /// The file staged as it was streamed.
        func staged() async throws { try await card.recordStaged(file, fingerprint: fingerprint) }

        /// The file's claim in this process, adopting `parts` as the card run does.
        func claim(adopting parts: StreamedParts?) async throws -> UploadRecord {
            var claim = UploadClaim(
                path: file.path, fingerprint: fingerprint, size: file.size, target: Self.target, key: StreamRunTests.key,
                headers: Self.headers + [SigV4Header("x-amz-meta-xxh128", fingerprint.hex)], partSize: StreamRunTests.partSize)
            claim.streamed = parts
            guard case .planned(let record) = try await journal.claim([claim], volumeKey: volume.key).first else {
                throw CocoaError(.featureUnsupported)
            }
            return record
        }

        /// What the next process does after a kill: adopts the journal's stream as its
        /// staged file's upload (``UploadService/recover(sink:)``).
        func adoptAfterKill() async throws -> UploadRecord {
            let streams = try await journal.adoptableStreams()
            let stream = try #require(streams.first)
            let claim = try #require(stream.claim())
            guard case .planned(let record) = try await journal.claim([claim], volumeKey: volume.key).first else {
                throw CocoaError(.featureUnsupported)
            }
            return record
        }

        /// The runner's upload of `record` from the journal, as a process takes it up.
        func upload(_ record: UploadRecord) async throws -> UploadResult {
            let current = try #require(try await journal.upload(id: record.id)).0
            return try await card.upload(
                record.id, from: path, partSize: StreamRunTests.partSize, resumed: current.phase != .created, checksums: nil)
        }

        /// The object is in the bucket, byte for byte, with its fingerprint in its tag.
        var landed: Bool {
            guard let object = store.objects[StreamRunTests.key] else { return false }
            return object.bytes == bytes && object.tags[ObjectLabelKeys.fingerprint] == fingerprint.hex
        }
    }

    @Test func aStreamedFileIsHandedToItsClaimAndCompletedWithoutSendingAPartAgain() async throws {
        let bench = try await Bench()
        var run = try #require(await bench.stream(try bench.copy()))
        #expect(run.holdsStream)
        let journalled = try #require(try await bench.journal.adoptableStreams().first)
        #expect(journalled.parts.map(\.number) == [1, 2, 3], "each acknowledged part journalled")
        #expect(journalled.parts[0].digest == PartDigest(crc32c: bench.crc32c(ofPart: 1)).journalText, "the stager's CRC32C")

        let parts = try #require(await run.handOff(fingerprint: bench.fingerprint, partSize: StreamRunTests.partSize))
        try await bench.staged()
        let record = try await bench.claim(adopting: parts)
        #expect(try await bench.journal.adoptableStreams().isEmpty, "the claim adopted the stream")

        #expect(try await bench.upload(record) == .uploaded(alreadyThere: false))
        #expect(bench.landed)
        #expect(bench.store.calls(.uploadPart) == 3, "three parts, each sent once, while the card was read")
        #expect(bench.store.calls(.create) == 1)
    }

    @Test func killedWhileStreamingTheNextProcessAdoptsTheStreamAndSendsOnlyWhatTheJournalLacks() async throws {
        let bench = try await Bench()
        // A network cut: part 3 never reaches the server; the stream stops sending.
        bench.store.script(.uploadPart, call: 3, .before(ScriptedStore.connectionReset()))
        let run = try #require(await bench.stream(try bench.copy()))
        #expect(run.holdsStream)
        #expect(try await bench.journal.adoptableStreams().first?.parts.map(\.number) == [1, 2])

        // kill -9 before the claim: the stream stays in the journal, the file was staged.
        try await bench.staged()
        let record = try await bench.adoptAfterKill()
        #expect(record.phase == .uploading)

        #expect(try await bench.upload(record) == .uploaded(alreadyThere: false))
        #expect(bench.landed)
        #expect(bench.store.partsSent.sorted() == [1, 2, 3], "only part 3 was sent again")
        #expect(bench.store.openUploads.isEmpty)
    }

    @Test func aPartTheServerTookWhoseAnswerWasLostIsProvedOursAfterAPowerCutAndNotSentAgain() async throws {
        let bench = try await Bench()
        // The server stores part 2; its answer is lost, so the stream never journals it. One
        // part at a time, so that the second call is part 2's.
        bench.store.script(.uploadPart, call: 2, .after(ScriptedStore.connectionReset()))
        let run = try #require(await bench.stream(try bench.copy(), partsInFlight: 1))
        #expect(run.holdsStream)
        #expect(try await bench.journal.adoptableStreams().first?.parts.contains { $0.number == 2 } == false)

        try await bench.staged()
        let record = try await bench.adoptAfterKill()
        #expect(try await bench.upload(record) == .uploaded(alreadyThere: false))
        #expect(bench.landed)
        #expect(bench.store.partsSent.sorted() == [1, 2, 3], "part 2 adopted from ListParts by its MD5, not sent again")
    }

    @Test func aNetworkCutBeforeTheFirstPartLeavesAStreamWithNoPartsWhichTheUploadSendsWhole() async throws {
        let bench = try await Bench()
        bench.store.script(.uploadPart, call: 1, .before(ScriptedStore.connectionReset()))
        var run = try #require(await bench.stream(try bench.copy(), partsInFlight: 1))
        let parts = try #require(await run.handOff(fingerprint: bench.fingerprint, partSize: StreamRunTests.partSize))
        #expect(parts.parts.isEmpty)
        try await bench.staged()
        let record = try await bench.claim(adopting: parts)

        #expect(try await bench.upload(record) == .uploaded(alreadyThere: false))
        #expect(bench.landed)
        #expect(bench.store.calls(.create) == 1, "the stream's upload is the one completed")
    }

    @Test func anotherWritersObjectAtTheKeyBeforeTheStreamMeansNoStream() async throws {
        let bench = try await Bench()
        bench.store.script(.head, call: 1, .anotherWriter(key: StreamRunTests.key, bytes: randomBytes(100), metadata: [:]))
        let run = try #require(await bench.stream(try bench.copy()))
        #expect(!run.holdsStream, "the ordinary way decides once the file is staged")
        #expect(bench.store.calls(.create) == 0)
        #expect(try await bench.journal.adoptableStreams().isEmpty)
    }

    @Test func aCreateThatNeverReachedTheServerOrWhoseAnswerWasLostStreamsNothing() async throws {
        let before = try await Bench()
        before.store.script(.create, .before(ScriptedStore.connectionReset()))
        #expect(await before.stream(try before.copy())?.holdsStream == false)
        #expect(before.store.openUploads.isEmpty)

        let lost = try await Bench()
        lost.store.script(.create, .after(ScriptedStore.connectionReset()))
        #expect(await lost.stream(try lost.copy())?.holdsStream == false)
        #expect(lost.store.openUploads.count == 1, "an upload no journal knows: the next upload to the key or the sweep ends it")
        #expect(try await lost.journal.adoptableStreams().isEmpty)
        #expect(lost.store.calls(.uploadPart) == 0)
    }

    @Test func aCopyThatFailsAbortsTheStreamAndTheJournalForgetsIt() async throws {
        let bench = try await Bench()
        let run = try #require(await bench.stream(try bench.copy(writtenThrough: 1)))
        #expect(!run.holdsStream)
        #expect(bench.store.calls(.abort) == 1)
        #expect(bench.store.openUploads.isEmpty)
        #expect(try await bench.journal.adoptableStreams().isEmpty)
    }

    @Test func aStreamWhoseStagedFileIsOtherContentIsAbortedAndForgotten() async throws {
        let bench = try await Bench()
        var run = try #require(await bench.stream(try bench.copy()))
        #expect(await run.handOff(fingerprint: Fingerprint(high: 1, low: 1), partSize: StreamRunTests.partSize) == nil)
        #expect(bench.store.openUploads.isEmpty)
        #expect(try await bench.journal.adoptableStreams().isEmpty)
    }

    @Test func anAbortThatFailsLeavesTheStreamForTheNextProcessToRecover() async throws {
        let bench = try await Bench()
        var run = try #require(await bench.stream(try bench.copy()))
        bench.store.script(.abort, .before(ScriptedStore.connectionReset()))
        await run.abort(because: "the run ended before the file was staged")
        #expect(bench.store.openUploads.count == 1)
        #expect(try await bench.journal.adoptableStreams().count == 1)
    }

    @Test func aStopMidStreamSendsNoMorePartsAndTheUploadSendsTheRest() async throws {
        let bench = try await Bench()
        // Stopped as soon as the first part is acknowledged, one part in flight at a time.
        let sink = StopOnFirstStreamedPart(stop: bench.stop)
        var run = try #require(await bench.stream(try bench.copy(), partsInFlight: 1, sink: sink))
        #expect(bench.store.calls(.uploadPart) == 1)
        let parts = try #require(await run.handOff(fingerprint: bench.fingerprint, partSize: StreamRunTests.partSize))
        #expect(parts.parts.map(\.number) == [1])

        try await bench.staged()
        #expect(try await bench.upload(try await bench.claim(adopting: parts)) == .uploaded(alreadyThere: false))
        #expect(bench.landed)
        #expect(bench.store.partsSent.sorted() == [1, 2, 3])
    }
}

/// Raises the stop flag when the first streamed part is reported.
private struct StopOnFirstStreamedPart: EventSink {
    let stop: StopFlag

    func emit(_ event: IngestEvent) {
        if case .upload(.partStreamed) = event { stop.raise() }
    }
}
