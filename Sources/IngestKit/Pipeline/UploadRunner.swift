import Foundation
import Logging
import Synchronization

/// Runs uploads as they are submitted, a bounded number of files at once, while the rest of
/// the pipeline goes on (staging submits each file as soon as it is journalled).
///
/// Before the first upload to a destination the bucket is asked for (`HeadBucket`): a
/// mistyped bucket, refused credentials or an unreachable endpoint then fail once, clearly,
/// instead of once per file. A failure that concerns the destination stops every upload to
/// it that has not started; uploads already running finish or fail on their own. Whatever
/// is not uploaded stays in the journal for `ingest resume`.
public final class UploadRunner: Sendable {
    /// What waits in the queue: the upload's id, not its record, which is read from the
    /// journal when the upload starts (it may have moved on meanwhile anyway). A card of
    /// 100,000 small files stages far ahead of its uploads; queued whole records (key,
    /// labels, headers) held hundreds of MiB.
    private struct Job: Sendable {
        var id: String
        var resumed: Bool
        var checksums: PartChecksums?
        /// The journal says the object is in the bucket: look before believing it.
        var confirming = false
    }

    private let service: UploadService
    private let sink: any EventSink
    /// Files uploading at once, this run's own.
    private let files: TransferLimiter
    /// Open, draining, finished; stopped or not; the totals (``UploadRunMachine``).
    private let machine = Mutex(UploadRunMachine())
    /// Raised by ``stop()``: running uploads send no new part.
    private let stopping = StopFlag()
    private let queue: AsyncStream<Job>.Continuation
    /// Takes jobs off the queue as file slots free up; ends when the queue is finished.
    private let worker = Mutex<Task<Void, Never>?>(nil)
    /// Staged copies deleted as their objects verify, when none is kept (retention 0): at
    /// once, while other uploads run, rather than in one long sweep after the last, so a
    /// long card's copies never all hold the staging space at once.
    private let releases: StagedCopyReleases?

    private var journal: Journal { service.journal }
    private var settings: UploadSettings { service.settings }
    private var logger: Logger { service.logger }

    /// A run's uploads, reporting to `sink`: made by ``UploadService/runner(sink:)``.
    init(service: UploadService, sink: any EventSink) {
        self.service = service
        self.sink = sink
        files = TransferLimiter(maxRequests: service.settings.filesInFlight, maxBytes: .max)
        releases = service.settings.stagingRetention == .zero
            ? StagedCopyReleases(journal: service.journal, area: service.staging) : nil
        let jobs: AsyncStream<Job>
        (jobs, queue) = AsyncStream.makeStream(of: Job.self)
        let files = self.files
        // The task holds the runner until `finish()` ends the queue.
        let task = Task { [self] in
            // Discarding: each upload's task is freed as it ends, not kept for a result
            // nobody reads (which held memory for every file of the card until the end).
            await withDiscardingTaskGroup { group in
                for await job in jobs {
                    await files.acquire(0)
                    group.addTask {
                        await self.run(job)
                        await files.release(0)
                    }
                }
            }
        }
        worker.withLock { $0 = task }
    }

    /// Queues an upload; an upload already queued by this run is not queued twice (two files
    /// with one content share one upload). `checksums`: its parts' CRC32Cs, when the stager
    /// computed them as it read the card.
    public func submit(_ record: UploadRecord, resumed: Bool, checksums: PartChecksums? = nil) {
        if machine.withLock({ $0.submit(record.id) }) {
            sink.emit(.upload(.queued(record)))
            queue.yield(Job(id: record.id, resumed: resumed, checksums: checksums))
        }
    }

    /// A file whose content the journal says the bucket holds (content dedupe): the object
    /// is looked at first, and only its size and fingerprint make it count as there; a missing
    /// object is uploaded again, and a key now holding other bytes sends the content to its
    /// alternative key.
    public func confirmInBucket(_ record: UploadRecord) {
        if machine.withLock({ $0.submit(record.id) }) {
            sink.emit(.upload(.queued(record)))
            queue.yield(Job(id: record.id, resumed: false, checksums: nil, confirming: true))
        }
    }

    /// Asks the uploads to stop for now (a shutdown): none starts any more, and each running
    /// one sends no new part; the parts on the wire end and are journalled. Everything left
    /// stays pending in the journal, counted as ``UploadTotals/interrupted``. Any thread.
    public func stop() {
        machine.withLock { $0.stop() }
        stopping.raise()
    }

    /// Submits nothing more, waits for every queued upload, then deletes the staged copies
    /// retention allows. Once per runner: the run that made it finishes it.
    public func finish() async -> (UploadTotals, UploadError?) {
        machine.withLock { $0.drain() }
        queue.finish()
        await worker.withLock { $0 }?.value
        await releases?.flush()
        let removed = await removeStagedCopies() + (releases?.count ?? 0)
        return machine.withLock { machine in
            machine.removedStagedCopies(removed)
            return machine.finish()
        }
    }

    private func run(_ job: Job) async {
        guard machine.withLock({ $0.start() }) else { return }
        let ending = await upload(job)
        machine.withLock { $0.ended(ending) }
    }

    private func upload(_ job: Job) async -> UploadRunMachine.Ending {
        let uploadLock: VolumeLock
        do {
            guard let held = try service.stateDirectory.lockUpload(job.id) else {
                logger.notice("upload is being run by another ingest process", metadata: ["upload": "\(job.id)"])
                return .leftAlone
            }
            uploadLock = held
        } catch {
            return .failed(UploadError(exitStatus: error.exitStatus, scope: .destination, message: error.description), started: false)
        }
        defer { uploadLock.release() }
        // Another process may have moved it on since it was queued: start from the journal's word.
        let current: (UploadRecord, [UploadPartRecord])?
        do { current = try await journal.upload(id: job.id) } catch {
            return .failed(.journal(error), started: true)
        }
        guard let (fresh, parts) = current, fresh.isPending || (job.confirming && fresh.phase == .completed) else {
            return .leftAlone
        }
        let destination: ReadyDestination
        switch await service.destinations.client(for: fresh.target) {
        case .success(let ready): destination = ready
        case .failure(let error): return .failed(error, started: false)
        }
        let uploader = ObjectUploader(
            record: fresh, client: destination.client, journal: journal, stagedPath: stagedPath(fresh), limiter: service.limiter,
            settings: settings, sink: sink, hooks: service.hooks, stop: stopping, releases: releases,
            conditionalWrites: destination.conditionalWrites)
        let confirming = job.confirming && !fresh.isPending
        switch await uploader.run(parts: parts, resumed: job.resumed, checksums: job.checksums, confirming: confirming) {
        case .uploaded(let alreadyThere):
            return .uploaded(alreadyThere: alreadyThere, bytes: fresh.size)
        case .failed(let error):
            logger.warning("upload failed", metadata: ["upload": "\(fresh.id)", "key": "\(fresh.key)", "error": "\(error)"])
            if error.scope == .destination { await service.destinations.stop(fresh.target, because: error) }
            return .failed(error, started: true)
        case .aborted:
            return .aborted
        case .interrupted:
            return .interrupted
        }
    }

    private func stagedPath(_ record: UploadRecord) -> String {
        record.contentFingerprint.map(service.staging.path(for:)) ?? service.staging.root + "/" + record.fingerprint
    }

    /// Deletes staged copies whose objects verified longer ago than the retention.
    private func removeStagedCopies() async -> Int {
        do {
            return try await service.staging.removeVerifiedCopies(journal: journal, retention: settings.stagingRetention)
        } catch {
            logger.warning("could not clean the staging area", metadata: ["error": "\(error)"])
            return 0
        }
    }
}

/// A destination checked and ready: its client, and whether it honours conditional writes.
struct ReadyDestination: Sendable {
    let client: S3Client
    let conditionalWrites: Bool
}

/// One S3 client per destination, each checked once (`HeadBucket`, then whether it honours
/// `If-None-Match`) before its first upload, and stopped for good after a failure that
/// concerns the whole destination.
actor Destinations {
    private let credentials: CredentialsProvider
    private let transport: CurlTransport
    private let sink: any EventSink
    private let logger: Logger
    private let probeKey: String
    private var ready: [S3Destination: Task<Result<ReadyDestination, UploadError>, Never>] = [:]
    private var stopped: [S3Destination: UploadError] = [:]

    init(credentials: CredentialsProvider, transport: CurlTransport, sink: any EventSink, logger: Logger, probeKey: String) {
        self.credentials = credentials
        self.transport = transport
        self.sink = sink
        self.logger = logger
        self.probeKey = probeKey
    }

    func client(for target: S3Destination) async -> Result<ReadyDestination, UploadError> {
        if let error = stopped[target] { return .failure(error) }
        let task: Task<Result<ReadyDestination, UploadError>, Never>
        if let existing = ready[target] {
            task = existing
        } else {
            let (credentials, transport, sink, logger, probeKey) = (
                self.credentials, self.transport, self.sink, self.logger, self.probeKey
            )
            task = Task {
                await Self.connect(
                    target, credentials: credentials, transport: transport, sink: sink, logger: logger, probeKey: probeKey)
            }
            ready[target] = task
        }
        let result = await task.value
        if case .failure(let error) = result { stopped[target] = error }
        return result
    }

    func stop(_ target: S3Destination, because error: UploadError) {
        if stopped[target] == nil { stopped[target] = error }
    }

    static func connect(
        _ target: S3Destination, credentials: CredentialsProvider, transport: CurlTransport, sink: any EventSink,
        logger: Logger, probeKey: String
    ) async -> Result<ReadyDestination, UploadError> {
        let client: S3Client
        do {
            client = try S3Client(destination: target, credentials: credentials, transport: transport, logger: logger)
        } catch {
            return .failure(UploadError(exitStatus: .config, scope: .destination, message: "\(error)"))
        }
        do {
            guard try await client.bucketExists() else { return .failure(.missingBucket(target)) }
        } catch {
            return .failure(UploadError(error, what: "HeadBucket \(target.bucket)", target: target))
        }
        switch await client.probeConditionalWrites(key: probeKey) {
        case .honoured:
            return .success(ReadyDestination(client: client, conditionalWrites: true))
        case .notHonoured(let reason):
            logger.warning("conditional writes not honoured", metadata: ["bucket": "\(target.bucket)", "reason": "\(reason)"])
            sink.emit(.upload(.conditionalWritesNotHonoured(target, reason: reason)))
            return .success(ReadyDestination(client: client, conditionalWrites: false))
        }
    }
}
