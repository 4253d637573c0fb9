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
/// instead of starting then. What it sends becomes the file's upload only when the file is
/// staged and claimed; until then it is a multipart upload only this process knows.
///
/// A stream, for a file the planner can describe before its fingerprint is known
/// (``UploadPlanner/streamedObject(for:)``):
/// 1. looks at the key (`HeadObject`): anything there, and the file is uploaded the
///    ordinary way once staged, which decides between its content and the other;
/// 2. creates the multipart upload, with every label but the fingerprint;
/// 3. sends each part as soon as the copy holds it, with the CRC32C the stager computed
///    from the card's bytes (the server checks the card's bytes, as for any upload), at
///    most `upload.parts_in_flight` at once, within the process's bytes in flight;
/// 4. when the copy is complete and every part acknowledged, waits for the file's claim
///    (``handOff(_:)``): the journal adopts the upload as the content's, and the runner
///    completes it (`If-None-Match: *`), verifies it and tags it with its fingerprint; if
///    the bucket already holds or plans this content, the stream is aborted.
///
/// Any failure (the copy failed, a request gave up, the run stopped, the destination does
/// not honour conditional writes) aborts the stream's upload and leaves the file to the
/// ordinary way: streaming only ever saves time. A process killed mid-stream leaves a
/// multipart upload no journal knows, as a kill between `CreateMultipartUpload` and its
/// journal write always could: the next upload to that key aborts it once it completes
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
        /// Every part acknowledged, the content's fingerprint known.
        case sent(object: StreamedObject, client: S3Client, parts: StreamedParts, fingerprint: Fingerprint)
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

    /// The parts sent of `staged`'s file, for its claim, once all are acknowledged; nil when
    /// it was not streamed or the stream failed. Its upload is aborted if the claim does not
    /// adopt it (``abandon(_:)``). The stream counts against ``maxStreams`` until then.
    func handOff(_ staged: StagedFile) async -> StreamedParts? {
        guard let task = streams.withLock({ streams in streams.first { $0.path == staged.file.path }?.task }) else {
            return nil
        }
        let outcome = await task.value
        guard take(staged.file.path) != nil else { return nil }  // the run ended meanwhile
        switch outcome {
        case let .sent(object, client, parts, fingerprint):
            guard fingerprint == staged.fingerprint, object.partSize == staged.partChecksums?.partSize else {
                await abort(object.key, parts.uploadID, of: staged.file.path, client: client, because: "the staged file is not what was streamed")
                return nil
            }
            return parts
        case .notStreamed:
            return nil
        }
    }

    /// A file whose copy failed: its stream, if any, is aborted.
    func drop(_ path: CardPath) async {
        guard let stream = take(path) else { return }
        if case let .sent(object, client, parts, _) = await stream.task.value {
            await abort(object.key, parts.uploadID, of: path, client: client, because: "the file was not staged")
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
            claim.key, parts.uploadID, of: claim.path, client: ready.client,
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
            if case let .sent(object, client, parts, _) = await stream.task.value {
                await abort(object.key, parts.uploadID, of: stream.path, client: client, because: "the run ended before the file was staged")
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
        let uploadID: String
        do {
            uploadID = try await client.createMultipartUpload(
                key: object.key, headers: object.headers + PartDigestAlgorithm.crc32c.createMultipartUploadHeaders)
        } catch {
            logger.info("could not start streaming a file's parts", metadata: ["key": "\(object.key)", "error": "\(error)"])
            return .notStreamed
        }
        sink.emit(.upload(.streamStarted(key: object.key, path: copy.file.path, size: copy.file.size)))
        guard let parts = await sendParts(of: copy, object: object, uploadID: uploadID, client: client),
            case .complete(let fingerprint) = await copy.end()
        else {
            await abort(object.key, uploadID, of: copy.file.path, client: client, because: "the copy or a part failed")
            return .notStreamed
        }
        return .sent(
            object: object, client: client, parts: StreamedParts(uploadID: uploadID, headers: object.headers, parts: parts),
            fingerprint: fingerprint)
    }

    /// Sends every part as the copy holds it, a window of them at once; nil when the copy
    /// failed, a part gave up, or the run is stopping.
    private func sendParts(
        of copy: GrowingCopy, object: StreamedObject, uploadID: String, client: S3Client
    ) async -> [UploadStateMachine.AcknowledgedPart]? {
        let window = max(1, settings.partsInFlight)
        return await withTaskGroup(of: UploadStateMachine.AcknowledgedPart?.self) { group in
            var acknowledged: [UploadStateMachine.AcknowledgedPart] = []
            var next = 1
            var failed = false
            while !failed, acknowledged.count < object.partCount {
                while next <= object.partCount, next - 1 - acknowledged.count < window {
                    guard !stop.isRaised, !Task.isCancelled, let part = await copy.part(next) else {
                        failed = true
                        break
                    }
                    let number = next
                    group.addTask { await self.send(part, number: number, of: copy, object: object, uploadID: uploadID, client: client) }
                    next += 1
                }
                if failed { break }
                guard let answer = await group.next(), let part = answer else {
                    failed = true
                    break
                }
                acknowledged.append(part)
            }
            group.cancelAll()
            return failed ? nil : acknowledged.sorted { $0.number < $1.number }
        }
    }

    private func send(
        _ part: GrowingCopy.Part, number: Int, of copy: GrowingCopy, object: StreamedObject, uploadID: String, client: S3Client
    ) async -> UploadStateMachine.AcknowledgedPart? {
        let digest = PartDigest(crc32c: part.crc32c)
        guard
            case .success(let payloadHash) = await ObjectUploader.bodyHash(
                path: part.path, range: (part.offset, part.length), signed: settings.signPayloads || client.bodiesCrossPlainHTTP)
        else { return nil }
        return await service.limiter.withPermit(part.length) { () async -> UploadStateMachine.AcknowledgedPart? in
            guard !stop.isRaised else { return nil }
            do {
                let etag = try await client.uploadPart(
                    key: object.key, uploadID: uploadID, partNumber: number,
                    body: .file(path: part.path, offset: part.offset, length: part.length), payloadHash: payloadHash,
                    headers: digest.headers)
                service.hooks.partJournalled()
                sink.emit(.upload(.partStreamed(
                    key: object.key, path: copy.file.path, number: number, partCount: object.partCount, bytes: part.length)))
                return UploadStateMachine.AcknowledgedPart(number: number, etag: etag, size: part.length, digest: digest.journalText)
            } catch {
                logger.info(
                    "a streamed part failed: the file is uploaded once staged",
                    metadata: ["key": "\(object.key)", "part": "\(number)", "error": "\(error)"])
                return nil
            }
        }
    }

    /// Gives up the streamed upload `uploadID` at `key`, of the file at `path`.
    private func abort(_ key: String, _ uploadID: String, of path: CardPath, client: S3Client, because reason: String) async {
        logger.debug("aborting a streamed upload", metadata: ["key": "\(key)", "reason": "\(reason)"])
        sink.emit(.upload(.streamAborted(key: key, path: path)))
        do { try await client.abortMultipartUpload(key: key, uploadID: uploadID) } catch {
            logger.notice(
                "could not abort a streamed upload: the orphan sweep will", metadata: ["key": "\(key)", "error": "\(error)"])
        }
    }
}
