import Foundation
import Logging
import Synchronization

/// The stager's ``CopyStreams``: sends the parts of large files while the stager still copies
/// them, so that on a card of large files (a 4 GiB video) the upload ends about when the
/// card's last byte is read, instead of starting then. Each stream is a ``StreamRun``: the
/// streaming phase of ``UploadStateMachine`` decides what is sent, aborted or handed over,
/// and the run performs it; this type only starts the streams, keeps them for their files'
/// claims, and feeds them the pipeline's word (the claim, a failed copy, the run's end).
///
/// A stream is for a file the planner can describe before its fingerprint is known
/// (``UploadPlanner/streamedObject(for:)``), to a destination that honours conditional
/// writes. What it sent becomes the file's upload when the file is staged and claimed
/// (``handOff(_:)``): the journal adopts the stream as the content's upload, and the runner
/// sends what is missing, completes it (`If-None-Match: *`), verifies it and tags it with
/// its fingerprint; if the bucket already holds or plans this content, the stream is
/// aborted (``abandon(_:)``), as it is when the copy fails (``drop(_:)``) or the run ends
/// before its file's claim (``finish()``).
///
/// At most ``maxStreams`` files stream at once, each holding a checksum per part: its
/// memory does not grow with the card.
public final class PartStreamer: CopyStreams {
    /// Files streamed at once: the one being read, and the one before it waiting for its claim.
    static let maxStreams = 2

    /// What a stream's task ends with.
    private enum Outcome: Sendable {
        /// The stream's run, holding the stream for its claim, or ended; `lock` is the
        /// stream's, held until the claim has adopted it or it is aborted.
        case ran(StreamRun, lock: VolumeLock)
        /// Nothing streamed; the file goes the ordinary way.
        case notStreamed
    }

    private struct Stream {
        let path: CardPath
        let task: Task<Outcome, Never>
    }

    private let planner: UploadPlanner
    private let service: UploadService
    private let stop: StopFlag
    private let sink: any EventSink
    private let streams = Mutex<[Stream]>([])
    /// Streams handed to their claims, by upload id, until a claim that does not adopt its
    /// stream gives it back to be aborted (``abandon(_:)``) or the run ends.
    private let handedOff = Mutex<[String: StreamRun]>([:])

    init(planner: UploadPlanner, service: UploadService, stop: StopFlag, sink: any EventSink) {
        self.planner = planner
        self.service = service
        self.stop = stop
        self.sink = sink
    }

    // MARK: the stager's side (its reader thread)

    public func partSize(toStream file: ScannedFile) -> Int64? {
        guard !stop.isRaised, streams.withLock({ $0.count < Self.maxStreams }) else { return nil }
        return planner.streamedObject(for: file)?.partSize
    }

    public func stream(_ copy: GrowingCopy) {
        let task = Task { [self] in
            defer { copy.close() }
            return await send(copy)
        }
        streams.withLock { $0.append(Stream(path: copy.file.path, task: task)) }
    }

    // MARK: the pipeline's side

    /// Whether the file at `path` is being streamed (its claim then waits for
    /// ``handOff(_:)``).
    func isStreaming(_ path: CardPath) -> Bool {
        streams.withLock { streams in streams.contains { $0.path == path } }
    }

    /// A stream handed to its file's claim: its parts, and its lock, which the claim holds
    /// until it has committed (no other process may adopt the stream meanwhile).
    struct HandedOff: Sendable {
        let parts: StreamedParts
        let lock: VolumeLock
    }

    /// The parts sent of `staged`'s file, for its claim, once the copy is complete; nil when
    /// it was not streamed or the stream failed. Its upload is aborted if the claim does not
    /// adopt it (``abandon(_:)``). The stream counts against ``maxStreams`` until then.
    func handOff(_ staged: StagedFile) async -> HandedOff? {
        guard let task = streams.withLock({ streams in streams.first { $0.path == staged.file.path }?.task }) else {
            return nil
        }
        let outcome = await task.value
        guard take(staged.file.path) != nil else { return nil }  // the run ended meanwhile
        guard case .ran(var run, let lock) = outcome, run.holdsStream else { return nil }
        guard let parts = await run.handOff(fingerprint: staged.fingerprint, partSize: staged.partChecksums?.partSize) else {
            return nil
        }
        handedOff.withLock { $0[parts.uploadID] = run }
        return HandedOff(parts: parts, lock: lock)
    }

    /// A file whose copy failed: its stream, if any, is aborted.
    func drop(_ path: CardPath) async {
        guard let stream = take(path) else { return }
        if case .ran(var run, _) = await stream.task.value { await run.abort(because: "the file was not staged") }
    }

    /// The claim did not adopt the stream of `claim`'s file (the content is uploaded or
    /// planned already): its upload is aborted.
    func abandon(_ claim: UploadClaim) async {
        guard let parts = claim.streamed, var run = handedOff.withLock({ $0.removeValue(forKey: parts.uploadID) }) else { return }
        await run.abort(because: "the journal did not adopt it: the content is uploaded or planned already")
    }

    /// The run is over: streams whose file never came to its claim are aborted.
    func finish() async {
        let left = streams.withLock { streams in
            defer { streams.removeAll() }
            return streams
        }
        // Handed off and not given back: adopted by their claims.
        handedOff.withLock { $0.removeAll() }
        for stream in left {
            stream.task.cancel()
            if case .ran(var run, _) = await stream.task.value {
                await run.abort(because: "the run ended before the file was staged")
            }
        }
    }

    private func take(_ path: CardPath) -> Stream? {
        streams.withLock { streams in
            guard let index = streams.firstIndex(where: { $0.path == path }) else { return nil }
            return streams.remove(at: index)
        }
    }

    // MARK: one stream

    /// Starts the stream of `copy` where it can go: the planner describes its object, cut as
    /// the copy is, to a destination that honours conditional writes and keeps the CRC32Cs
    /// a stream's parts are proven by. The stream's number is
    /// locked before it is journalled, so that no other process ever finds it in the journal
    /// with its lock free while this one streams.
    private func send(_ copy: GrowingCopy) async -> Outcome {
        guard let object = planner.streamedObject(for: copy.file), object.partSize == copy.partSize,
            object.partCount == copy.partCount,
            case .success(let ready) = await service.destinations.client(for: object.target), ready.conditionalWrites,
            ready.keepsChecksums
        else { return .notStreamed }
        let id = Int64.random(in: 1...(Int64.max >> 1))
        guard let lock = try? service.stateDirectory.lockStream(id) else { return .notStreamed }
        let context = StreamRun.Context(
            store: ready.client, journal: service.journal, limiter: service.limiter, stop: stop, sink: sink,
            hooks: service.hooks, logger: service.logger, signPayloads: service.settings.signPayloads,
            partsInFlight: service.settings.partsInFlight)
        guard let run = await StreamRun.stream(copy, as: object, streamID: id, volumeKey: planner.volume.key, context: context),
            run.holdsStream
        else { return .notStreamed }
        return .ran(run, lock: lock)
    }
}
