import Foundation
import Logging
import Synchronization

/// The object a file being staged becomes when its parts go out as it is read
/// (``UploadPlanner/streamedObject(for:)``).
public struct StreamedObject: Sendable, Equatable {
    public var target: S3Destination
    public var key: String
    /// Its labels without the fingerprint (which goes in a tag), its tags, its content type.
    public var headers: [SigV4Header]
    public var partSize: Int64
    public var partCount: Int
}

/// Sends the parts of large files while the stager still copies them, so that on a card of
/// large files (a 4 GiB video) the upload ends about when the card's last byte is read,
/// instead of starting then. What it sends becomes the file's upload when the file is staged
/// and claimed; until then it is a stream (``StreamRecord``), journalled as it goes.
///
/// A stream, for a file the planner can describe before its fingerprint is known
/// (``UploadPlanner/streamedObject(for:)``):
/// 1. looks at the key (`HeadObject`): anything there, and the file is uploaded the
///    ordinary way once staged, which decides between its content and the other;
/// 2. takes the lock of a new stream number, creates the multipart upload with every label
///    but the fingerprint, and journals the stream before any part is sent;
/// 3. sends each part as soon as the copy holds it, with the CRC32C the stager computed
///    from the card's bytes (the server checks the card's bytes, as for any upload), at
///    most `upload.parts_in_flight` at once, within the process's bytes in flight, and
///    journals each part the server acknowledges;
/// 4. once the copy is complete, waits for the file's claim (``handOff(_:)``) with the
///    parts acknowledged (every one, unless a part gave up or the run is stopping): the
///    journal adopts the stream as the content's upload, and the runner sends what is
///    missing, completes it (`If-None-Match: *`), verifies it and tags it with its
///    fingerprint; if the bucket already holds or plans this content, the stream is aborted.
///
/// A copy that fails aborts the stream's upload: the file was not staged, and the card's
/// next run copies it again. A process killed or cut off mid-stream leaves the stream in the
/// journal with its lock free: the next process to start uploads adopts it as its file's
/// upload if the file was staged, and aborts it otherwise (``UploadService/recover(sink:)``).
/// A kill between `CreateMultipartUpload` and the stream's journal write leaves an upload no
/// journal knows: the next upload to that key aborts it once it completes
/// (``ObjectStore/abortUploads(key:known:)``), and `ingest rescan` sweeps any other
/// (`rescan.orphan_upload_age`).
///
/// At most ``maxStreams`` files stream at once, each holding a checksum per part: its
/// memory does not grow with the card.
public final class PartStreamer: CopyStreams {
    /// Files streamed at once: the one being read, and the one before it waiting for its claim.
    static let maxStreams = 2

    /// What a finished stream hands to the claim.
    private enum Outcome: Sendable {
        /// The copy is complete, the content's fingerprint known; the parts acknowledged
        /// (all of them, unless a part gave up or the run is stopping). `lock` is the
        /// stream's, held until the claim has adopted it or it is aborted.
        case sent(object: StreamedObject, client: any ObjectStore, parts: StreamedParts, fingerprint: Fingerprint, lock: VolumeLock)
        /// Nothing to adopt; the file goes the ordinary way.
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

    init(planner: UploadPlanner, service: UploadService, stop: StopFlag, sink: any EventSink) {
        self.planner = planner
        self.service = service
        self.stop = stop
        self.sink = sink
    }

    private var settings: UploadSettings { service.settings }
    private var logger: Logger { service.logger }

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
        switch outcome {
        case let .sent(object, client, parts, fingerprint, lock):
            guard fingerprint == staged.fingerprint, object.partSize == staged.partChecksums?.partSize else {
                await abort(parts, key: object.key, of: staged.file.path, client: client, because: "the staged file is not what was streamed")
                return nil
            }
            return HandedOff(parts: parts, lock: lock)
        case .notStreamed:
            return nil
        }
    }

    /// A file whose copy failed: its stream, if any, is aborted.
    func drop(_ path: CardPath) async {
        guard let stream = take(path) else { return }
        if case let .sent(object, client, parts, _, _) = await stream.task.value {
            await abort(parts, key: object.key, of: path, client: client, because: "the file was not staged")
        }
    }

    /// The claim did not adopt the stream of `claim`'s file (the content is uploaded or
    /// planned already): its upload is aborted.
    func abandon(_ claim: UploadClaim) async {
        guard let parts = claim.streamed else { return }
        guard case .success(let ready) = await service.destinations.client(for: claim.target) else {
            // The destination stopped: the orphan sweep aborts the upload.
            sink.emit(.upload(.streamAborted(key: claim.key, path: claim.path)))
            return
        }
        await abort(
            parts, key: claim.key, of: claim.path, client: ready.client,
            because: "the journal did not adopt it: the content is uploaded or planned already")
    }

    /// The run is over: streams whose file never came to its claim are aborted.
    func finish() async {
        let left = streams.withLock { streams in
            defer { streams.removeAll() }
            return streams
        }
        for stream in left {
            stream.task.cancel()
            if case let .sent(object, client, parts, _, _) = await stream.task.value {
                await abort(parts, key: object.key, of: stream.path, client: client, because: "the run ended before the file was staged")
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

    private func send(_ copy: GrowingCopy) async -> Outcome {
        guard let object = planner.streamedObject(for: copy.file), object.partSize == copy.partSize,
            object.partCount == copy.partCount,
            case .success(let ready) = await service.destinations.client(for: object.target), ready.conditionalWrites
        else { return .notStreamed }
        let client = ready.client
        do {
            // A key that holds anything is for the ordinary way to decide on, once staged.
            guard try await client.headObject(key: object.key) == nil else { return .notStreamed }
        } catch { return .notStreamed }
        // The stream's number is locked before it is journalled, so that no other process
        // ever finds it in the journal with its lock free while this one streams.
        let id = Int64.random(in: 1...(Int64.max >> 1))
        guard let lock = try? service.stateDirectory.lockStream(id) else { return .notStreamed }
        let uploadID: String
        do {
            uploadID = try await client.createMultipartUpload(
                key: object.key, headers: object.headers + PartDigestAlgorithm.crc32c.createMultipartUploadHeaders)
        } catch {
            logger.info("could not start streaming a file's parts", metadata: ["key": "\(object.key)", "error": "\(error)"])
            return .notStreamed
        }
        var streamed = StreamedParts(uploadID: uploadID, headers: object.headers, parts: [], streamID: id)
        let record = StreamRecord(
            id: id, volumeKey: planner.volume.key, path: copy.file.path, size: copy.file.size, mtime: copy.file.mtime,
            target: object.target, key: object.key, uploadID: uploadID, partSize: object.partSize, headers: object.headers)
        do { try await service.journal.beginStream(record) } catch {
            logger.warning("could not journal a stream: the file is uploaded once staged", metadata: ["error": "\(error)"])
            streamed.streamID = nil
            await abort(streamed, key: object.key, of: copy.file.path, client: client, because: "the journal refused it")
            return .notStreamed
        }
        sink.emit(.upload(.streamStarted(key: object.key, path: copy.file.path, size: copy.file.size)))
        streamed.parts = await sendParts(of: copy, object: object, stream: id, uploadID: uploadID, client: client)
        guard case .complete(let fingerprint) = await copy.end() else {
            await abort(streamed, key: object.key, of: copy.file.path, client: client, because: "the copy failed")
            return .notStreamed
        }
        // The parts not acknowledged (one gave up, the run is stopping) are the upload's to
        // send once the claim adopts it: what the server acknowledged is never sent again.
        return .sent(object: object, client: client, parts: streamed, fingerprint: fingerprint, lock: lock)
    }

    /// Sends every part as the copy holds it, a window of them at once, until the copy
    /// fails, a part gives up, or the run is stopping: returns the parts acknowledged, in
    /// order.
    private func sendParts(
        of copy: GrowingCopy, object: StreamedObject, stream: Int64, uploadID: String, client: any ObjectStore
    ) async -> [UploadStateMachine.AcknowledgedPart] {
        let window = max(1, settings.partsInFlight)
        return await withTaskGroup(of: UploadStateMachine.AcknowledgedPart?.self) { group in
            var acknowledged: [UploadStateMachine.AcknowledgedPart] = []
            var next = 1
            var inFlight = 0
            var failed = false
            while true {
                while !failed, next <= object.partCount, inFlight < window {
                    guard !stop.isRaised, !Task.isCancelled, let part = await copy.part(next) else {
                        failed = true
                        break
                    }
                    let number = next
                    group.addTask {
                        await self.send(part, number: number, of: copy, object: object, stream: stream, uploadID: uploadID, client: client)
                    }
                    next += 1
                    inFlight += 1
                }
                // The parts on the wire end and are journalled whatever happens meanwhile.
                guard let answer = await group.next() else { break }
                inFlight -= 1
                if let part = answer { acknowledged.append(part) } else { failed = true }
            }
            return acknowledged.sorted { $0.number < $1.number }
        }
    }

    private func send(
        _ part: GrowingCopy.Part, number: Int, of copy: GrowingCopy, object: StreamedObject, stream: Int64, uploadID: String,
        client: any ObjectStore
    ) async -> UploadStateMachine.AcknowledgedPart? {
        let digest = PartDigest(crc32c: part.crc32c)
        guard
            case .success(let payloadHash) = await ObjectUploader.bodyHash(
                path: part.path, range: (part.offset, part.length), signed: settings.signPayloads || client.bodiesCrossPlainHTTP)
        else { return nil }
        return await service.limiter.withPermit(part.length) { () async -> UploadStateMachine.AcknowledgedPart? in
            guard !stop.isRaised else { return nil }
            let acknowledged: UploadStateMachine.AcknowledgedPart
            do {
                let etag = try await client.uploadPart(
                    key: object.key, uploadID: uploadID, partNumber: number,
                    body: .file(path: part.path, offset: part.offset, length: part.length), payloadHash: payloadHash,
                    headers: digest.headers)
                acknowledged = .init(number: number, etag: etag, size: part.length, digest: digest.journalText)
            } catch {
                logger.info(
                    "a streamed part failed: the upload sends it once the file is staged",
                    metadata: ["key": "\(object.key)", "part": "\(number)", "error": "\(error)"])
                return nil
            }
            do { try await service.journal.noteStreamedPart(acknowledged, ofStream: stream) } catch {
                logger.warning("could not journal a streamed part", metadata: ["key": "\(object.key)", "error": "\(error)"])
                return nil
            }
            service.hooks.partJournalled()
            sink.emit(.upload(.partStreamed(
                key: object.key, path: copy.file.path, number: number, partCount: object.partCount, bytes: part.length)))
            return acknowledged
        }
    }

    /// Gives up the stream `parts` at `key`, of the file at `path`: its upload is aborted on
    /// the server, then the stream leaves the journal. A stream whose abort fails stays in
    /// the journal, and the next process to recover streams aborts it.
    private func abort(_ parts: StreamedParts, key: String, of path: CardPath, client: any ObjectStore, because reason: String) async {
        logger.debug("aborting a streamed upload", metadata: ["key": "\(key)", "reason": "\(reason)"])
        sink.emit(.upload(.streamAborted(key: key, path: path)))
        do { try await client.abortMultipartUpload(key: key, uploadID: parts.uploadID) } catch {
            logger.notice(
                "could not abort a streamed upload: the next run will", metadata: ["key": "\(key)", "error": "\(error)"])
            return
        }
        if let stream = parts.streamID { try? await service.journal.endStream(stream) }
    }
}
