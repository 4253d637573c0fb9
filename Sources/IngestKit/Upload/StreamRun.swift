import Foundation
import Logging

/// One large file's parts sent while the stager still copies it: ``UploadStateMachine``'s
/// streaming phase decides, this performs, as ``UploadRun`` does for an upload. It reads the
/// parts from the ``GrowingCopy`` as it grows, sends each with the CRC32C the stager computed
/// from the card's bytes, journals the stream (``StreamRecord``) before any part is sent and
/// each part the server acknowledges, and holds what it sent for the file's claim, which
/// adopts it as the content's upload; the runner finishes it from the journal.
///
/// A kill at any point leaves the stream in the journal with its lock free: the next process
/// adopts it as its file's upload if the file was staged, and aborts it otherwise
/// (``UploadService/recover(sink:)``). A kill between `CreateMultipartUpload` and the
/// stream's journal write leaves an upload no journal knows: the next upload to that key
/// finds it and takes it over (``ObjectUploader/handover(behind:)``), and `ingest rescan`
/// sweeps any other (`rescan.orphan_upload_age`).
struct StreamRun: Sendable {
    /// What a stream uses of its process.
    struct Context: Sendable {
        let store: any ObjectStore
        let journal: Journal
        let limiter: TransferLimiter
        let stop: StopFlag
        let sink: any EventSink
        let hooks: FaultHooks
        let logger: Logger
        /// Bodies go with their SHA-256 rather than `UNSIGNED-PAYLOAD` (``PayloadHash``).
        let signPayloads: Bool
        /// Parts sent at once (`upload.parts_in_flight`).
        let partsInFlight: Int

        init(
            store: any ObjectStore, journal: Journal, limiter: TransferLimiter, stop: StopFlag, sink: any EventSink,
            hooks: FaultHooks, logger: Logger = Logger(label: "ingest.stream"), signPayloads: Bool, partsInFlight: Int
        ) {
            self.store = store
            self.journal = journal
            self.limiter = limiter
            self.stop = stop
            self.sink = sink
            self.hooks = hooks
            self.logger = logger
            self.signPayloads = signPayloads
            self.partsInFlight = partsInFlight
        }
    }

    /// What a part's task brings back: acknowledged and journalled, or not (the normal path
    /// sends it once the file is staged).
    private enum PartAnswer: Sendable {
        case acknowledged(uploadID: String, number: Int, etag: String, digest: String)
        case notAcknowledged(uploadID: String, number: Int)
    }

    let object: StreamedObject
    /// The file on the card.
    let file: ScannedFile
    private let volumeKey: String
    private let streamID: Int64
    private let context: Context
    private var machine: UploadStateMachine
    /// The stream is in the journal.
    private var journalled = false

    /// Streams `copy` to `object` as stream `streamID` (whose lock the caller holds) of
    /// volume `volumeKey`, until its copy ended and its parts were answered. Returns the
    /// run, holding the stream for its claim (``holdsStream``) or ended; nil when the copy
    /// is not cut as `object` is.
    static func stream(
        _ copy: GrowingCopy, as object: StreamedObject, streamID: Int64, volumeKey: String, context: Context
    ) async -> StreamRun? {
        guard let plan = try? PartPlan.recorded(fileSize: copy.file.size, partSize: object.partSize),
            !plan.isSinglePut, plan.partCount == copy.partCount
        else { return nil }
        var run = StreamRun(
            object: object, file: copy.file, volumeKey: volumeKey, streamID: streamID, context: context,
            machine: UploadStateMachine(
                streaming: String(streamID), file: copy.file.path.display, plan: plan,
                configuration: .init(partsInFlight: context.partsInFlight)))
        await run.drive(copy)
        return run
    }

    private init(
        object: StreamedObject, file: ScannedFile, volumeKey: String, streamID: Int64, context: Context,
        machine: UploadStateMachine
    ) {
        self.object = object
        self.file = file
        self.volumeKey = volumeKey
        self.streamID = streamID
        self.context = context
        self.machine = machine
    }

    /// The copy is complete and the stream waits for its file's claim (or was handed to it).
    var holdsStream: Bool { machine.holdsStream }

    /// The file's claim, with the content staged and the cut of its checksums: the parts
    /// acknowledged when the staged file is what was streamed, for the journal to adopt;
    /// otherwise the stream is aborted and nil returned.
    mutating func handOff(fingerprint: Fingerprint, partSize: Int64?) async -> StreamedParts? {
        let actions = machine.claimed(fingerprint: fingerprint, partSize: partSize)
        if case let .handOff(uploadID, parts)? = actions.first {
            return StreamedParts(uploadID: uploadID, headers: object.headers, parts: parts, streamID: streamID)
        }
        context.logger.debug(
            "aborting a streamed upload", metadata: ["key": "\(object.key)", "reason": "the staged file is not what was streamed"])
        await perform(actions)
        return nil
    }

    /// Gives the stream up: its upload is aborted on the server, then forgotten by the
    /// journal. A stream whose abort fails stays in the journal, and the next process to
    /// recover streams aborts it.
    mutating func abort(because reason: String) async {
        guard machine.holdsStream else { return }
        context.logger.debug("aborting a streamed upload", metadata: ["key": "\(object.key)", "reason": "\(reason)"])
        await perform(machine.abortRequested())
    }

    // MARK: the stream

    private mutating func drive(_ copy: GrowingCopy) async {
        // The parts the copy holds, until sent: their name, range and CRC32C.
        var ready: [Int: GrowingCopy.Part] = [:]
        await withTaskGroup(of: PartAnswer.self) { group in
            var actions = machine.startStreaming()
            while true {
                while !actions.isEmpty {
                    switch actions.removeFirst() {
                    case .waitForPart(let number):
                        if context.stop.isRaised || Task.isCancelled {
                            actions += machine.stopped()
                        } else if let part = await copy.part(number) {
                            ready[number] = part
                            actions += machine.staged(upTo: part.offset + part.length)
                        } else {
                            actions += machine.copyFailed()
                        }
                    case let .streamParts(uploadID, numbers):
                        for number in numbers {
                            guard let part = ready.removeValue(forKey: number) else {
                                preconditionFailure("StreamRun: part \(number) sent before the copy held it")
                            }
                            let (run, context) = (self, context)
                            group.addTask { await run.send(part, number: number, uploadID: uploadID, context: context) }
                        }
                    case .waitForCopyEnd:
                        switch await copy.end() {
                        case .complete(let fingerprint): actions += machine.copyComplete(fingerprint: fingerprint)
                        case .failed: actions += machine.copyFailed()
                        }
                    case let action:
                        actions += await perform(action)
                    }
                }
                // The parts on the wire end, and are journalled, whatever happens meanwhile.
                guard let answer = await group.next() else { return }
                switch answer {
                case let .acknowledged(uploadID, number, etag, digest):
                    actions = machine.partAcknowledged(uploadID: uploadID, number: number, etag: etag, digest: digest)
                case let .notAcknowledged(uploadID, number):
                    actions = machine.partFailed(uploadID: uploadID, number: number, decision: .fail(.notRetryable))
                }
            }
        }
    }

    /// Performs actions that are no wait and no part, each answer before what was queued.
    private mutating func perform(_ actions: [UploadStateMachine.Action]) async {
        var queue = actions
        while !queue.isEmpty {
            let next = queue.removeFirst()
            queue = await perform(next) + queue
        }
    }

    private mutating func perform(_ action: UploadStateMachine.Action) async -> [UploadStateMachine.Action] {
        let (store, key) = (context.store, object.key)
        switch action {
        case .lookAtKey:
            do {
                guard let head = try await store.headObject(key: key) else { return machine.keyFree() }
                return machine.keyTaken(size: head.size, fingerprint: head.metadata[ObjectLabelKeys.fingerprint])
            } catch {
                return machine.requestFailed(.fail(.notRetryable))
            }
        case .createUpload:
            // An upload of the key in progress (another station with the same card): the file
            // goes the ordinary way once staged, which waits for it or takes it over; a stream
            // cannot, since the parts it would keep are checked against the staged copy.
            // Looked for again once created: of two stations that began at once, the one behind
            // gives its stream up before sending a part.
            if let found = await store.uploadAhead(of: nil, key: key) { return machine.uploadFound(uploadID: found.uploadID) }
            do {
                let uploadID = try await store.createMultipartUpload(
                    key: key, size: file.size, headers: object.headers + PartDigestAlgorithm.crc32c.createMultipartUploadHeaders)
                if let found = await store.uploadAhead(of: uploadID, key: key) {
                    try? await store.abortMultipartUpload(key: key, uploadID: uploadID)
                    return machine.uploadFound(uploadID: found.uploadID)
                }
                return machine.uploadCreated(uploadID: uploadID)
            } catch {
                context.logger.info("could not start streaming a file's parts", metadata: ["key": "\(key)", "error": "\(error)"])
                return machine.requestFailed(.fail(.notRetryable))
            }
        case .beginStream(let uploadID):
            let record = StreamRecord(
                id: streamID, volumeKey: volumeKey, path: file.path, size: file.size, mtime: file.mtime,
                target: object.target, key: key, uploadID: uploadID, partSize: object.partSize, headers: object.headers)
            do { try await context.journal.beginStream(record) } catch {
                context.logger.warning(
                    "could not journal a stream: the file is uploaded once staged", metadata: ["error": "\(error)"])
                return machine.ownerFailed()
            }
            journalled = true
            context.sink.emit(.upload(.streamStarted(key: key, path: file.path, size: file.size)))
            return machine.streamBegun()
        case .abort(let uploadID):
            context.sink.emit(.upload(.streamAborted(key: key, path: file.path)))
            do {
                try await store.abortMultipartUpload(key: key, uploadID: uploadID)
                return machine.abortConfirmed()
            } catch {
                context.logger.notice(
                    "could not abort a streamed upload: the next run will", metadata: ["key": "\(key)", "error": "\(error)"])
                return machine.requestFailed(.fail(.notRetryable))
            }
        case .finish(.aborted):
            if journalled { try? await context.journal.endStream(streamID) }
            return []
        case .finish, .awaitClaim, .handOff:
            return []
        case .putObject, .listParts, .sendParts, .cancelParts, .persist, .complete, .discard, .verify,
            .startAgain, .checkStagedCopy, .restage, .waitForPart, .streamParts, .waitForCopyEnd:
            preconditionFailure("StreamRun: \(action) is no stream's")
        }
    }

    /// Sends one part from the growing copy, with the CRC32C the stager computed from the
    /// card's bytes (the server checks the card's bytes, as for any upload), within the
    /// process's bytes in flight, and journals it once the server acknowledged it.
    private func send(_ part: GrowingCopy.Part, number: Int, uploadID: String, context: Context) async -> PartAnswer {
        let digest = PartDigest(crc32c: part.crc32c)
        let range = (offset: part.offset, length: part.length)
        guard
            case .success(let payloadHash) = await ObjectUploader.bodyHash(
                path: part.path, range: range, signed: context.signPayloads || context.store.bodiesCrossPlainHTTP)
        else { return .notAcknowledged(uploadID: uploadID, number: number) }
        let (key, partCount) = (object.key, machine.plan.partCount)
        return await context.limiter.withPermit(part.length) { () async -> PartAnswer in
            guard !context.stop.isRaised else { return .notAcknowledged(uploadID: uploadID, number: number) }
            let acknowledged: UploadStateMachine.AcknowledgedPart
            do {
                let etag = try await context.store.uploadPart(
                    key: key, uploadID: uploadID, partNumber: number, offset: part.offset,
                    body: .file(path: part.path, offset: part.offset, length: part.length), payloadHash: payloadHash,
                    headers: digest.headers)
                acknowledged = .init(number: number, etag: etag, size: part.length, digest: digest.journalText)
            } catch {
                context.logger.info(
                    "a streamed part failed: the upload sends it once the file is staged",
                    metadata: ["key": "\(key)", "part": "\(number)", "error": "\(error)"])
                return .notAcknowledged(uploadID: uploadID, number: number)
            }
            do { try await context.journal.noteStreamedPart(acknowledged, ofStream: streamID) } catch {
                context.logger.warning("could not journal a streamed part", metadata: ["key": "\(key)", "error": "\(error)"])
                return .notAcknowledged(uploadID: uploadID, number: number)
            }
            context.hooks.partJournalled()
            context.sink.emit(.upload(.partStreamed(
                key: key, path: file.path, number: number, partCount: partCount, bytes: part.length)))
            return .acknowledged(uploadID: uploadID, number: number, etag: acknowledged.etag, digest: digest.journalText)
        }
    }
}
