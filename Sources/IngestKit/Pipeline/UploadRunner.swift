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
    /// What waits in the queue: the upload's id, and its record only where that may be taken
    /// as is (``Job/planned``); otherwise the record is read from the journal when the
    /// upload starts (another process may have moved it on meanwhile).
    struct Job: Sendable {
        var id: String
        var resumed: Bool
        var checksums: PartChecksums?
        /// The journal says the object is in the bucket: look before believing it.
        var confirming = false
        /// A single `PutObject` this run planned and read from the journal a page ago, nothing
        /// sent yet: started from this record, without reading it again (a read transaction
        /// and a row a file). Had another process sent it meanwhile, the conditional write
        /// (`If-None-Match`, or the `HEAD` before it) finds the object there and it counts
        /// as already there.
        var planned: UploadRecord?
    }

    private let service: UploadService
    private let sink: any EventSink
    /// Files uploading at once, this run's own.
    private let files: TransferLimiter
    /// Open, draining, finished; stopped or not; the totals (``UploadRunMachine``).
    private let machine = Mutex(UploadRunMachine())
    /// Raised by ``stop()``: running uploads send no new part.
    private let stopping = StopFlag()
    /// What is to run: submitted jobs, and the card's uploads read from the journal.
    private let queue: Mutex<UploadQueue>
    /// Takes jobs off the queue as file slots free up; ends when the queue is finished.
    private let worker = Mutex<Task<Void, Never>?>(nil)
    /// Staged copies deleted as their objects verify, when none is kept (retention 0): at
    /// once, while other uploads run, rather than in one long sweep after the last, so a
    /// long card's copies never all hold the staging space at once.
    private let releases: StagedCopyReleases?
    /// Copies (``UploadRecord/isCopy``) waiting for their content's upload, which this run
    /// is running, to end: by that upload's id.
    private let waitingForContent = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    private var journal: Journal { service.journal }
    /// The staging area whose copies this runner lets go: a stager feeding it writes its
    /// copies into the spares they leave (``StagingArea/retire(_:size:)``).
    public var staging: StagingArea { service.staging }
    private var settings: UploadSettings { service.settings }
    private var logger: Logger { service.logger }

    /// A run's uploads, reporting to `sink`: made by ``UploadService/runner(sink:)``.
    /// `pageSize`: how many of a card's uploads are read from the journal at once.
    init(service: UploadService, sink: any EventSink, pageSize: Int = 256) {
        self.service = service
        self.sink = sink
        queue = Mutex(UploadQueue(pageSize: pageSize))
        files = TransferLimiter(maxRequests: service.settings.filesInFlight, maxBytes: .max)
        releases = service.settings.stagingRetention == .zero
            ? StagedCopyReleases(journal: service.journal, area: service.staging) : nil
        let files = self.files
        // The task holds the runner until `finish()` ends the queue.
        let task = Task { [self] in
            // Discarding: each upload's task is freed as it ends, not kept for a result
            // nobody reads (which held memory for every file of the card until the end).
            await withDiscardingTaskGroup { group in
                while let job = await nextJob() {
                    await files.acquire(0)
                    group.addTask {
                        let slot = FileSlot(files)
                        await self.run(job, slot: slot)
                        await slot.release()
                    }
                }
            }
        }
        worker.withLock { $0 = task }
    }

    /// Takes the uploads planned for `volume`'s files from the journal, a page at a time
    /// (``Journal/pendingUploadPage(ofVolume:after:limit:)``): those an earlier run left
    /// pending first, resumed, then those planned from now on, as ``planned(_:)`` tells of
    /// them. Once, before anything of the card is planned.
    ///
    /// **The journal is the queue.** The card run commits its claims to the journal
    /// (``Journal/claim(_:volumeKey:at:)``), then only wakes the queue (``planned(_:)``);
    /// the worker reads the same rows back (``nextJob()``), in the journal's order. It is a
    /// round trip on purpose:
    /// - an upload never starts before its row is durable, so a kill at any point leaves
    ///   it pending for the next run, never sent and unknown;
    /// - the queue holds a page of the card, not the card: 100,000 files copied far ahead
    ///   of their uploads cost one page of memory, the rest waits on disk;
    /// - the uploads an earlier run left pending and the ones planned now come through the
    ///   same door, in one order, each taken once (``UploadRunMachine/submit(_:)``);
    /// - a row another process moved on meanwhile is started from what the journal says
    ///   now, not from a copy in memory (only a ``Job/planned`` record, untouched, is
    ///   taken as read a page ago).
    public func follow(volume: String) async throws(JournalError) {
        let start = try await journal.lastUploadPosition()
        queue.withLock { $0.follow(volume: volume, plannedAfter: start) }
    }

    /// Uploads of the followed volume were planned (``Journal/claim(_:volumeKey:at:)``):
    /// they are in the journal, the queue reads them from there (the journal is the queue:
    /// ``follow(volume:)``). Only announced and counted here, never queued from `records`.
    public func planned(_ records: [UploadRecord]) {
        guard !records.isEmpty else { return }
        for record in records { sink.emit(.upload(.queued(record))) }
        queue.withLock { $0.journalGrew() }?.resume()
    }

    /// Queues an upload; an upload already queued or running in this run is not queued twice
    /// (two files with one content share one upload). `checksums`: its parts' CRC32Cs, when
    /// the stager computed them as it read the card.
    public func submit(_ record: UploadRecord, resumed: Bool, checksums: PartChecksums? = nil) {
        enqueue(Job(id: record.id, resumed: resumed, checksums: checksums), announcing: record)
    }

    /// A file whose content the journal says the bucket holds (content dedupe): the object
    /// is looked at first, and only its size and fingerprint make it count as there; a missing
    /// object is uploaded again, and a key now holding other bytes sends the content to its
    /// alternative key.
    public func confirmInBucket(_ record: UploadRecord) {
        enqueue(Job(id: record.id, resumed: false, checksums: nil, confirming: true), announcing: record)
    }

    private func enqueue(_ job: Job, announcing record: UploadRecord) {
        guard machine.withLock({ $0.submit(job.id) }) else { return }
        sink.emit(.upload(.queued(record)))
        queue.withLock { $0.submit(job) }?.resume()
    }

    /// The next job to run, reading the next page of the followed volume's uploads when the
    /// submitted ones are done (the journal is the queue: ``follow(volume:)``); nil once the
    /// run is finished and nothing is left.
    private func nextJob() async -> Job? {
        while true {
            switch queue.withLock({ $0.take() }) {
            case .job(let job):
                return job
            case .end:
                return nil
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if let ready = queue.withLock({ $0.wait(continuation) }) { ready.resume() }
                }
            case let .read(volume, position, limit):
                let page: [(position: Int64, record: UploadRecord)]
                do { page = try await journal.pendingUploadPage(ofVolume: volume, after: position, limit: limit) } catch {
                    logger.warning(
                        "could not read the upload queue from the journal: the rest stays pending for ingest resume",
                        metadata: ["error": "\(error)"])
                    queue.withLock { $0.unfollow() }
                    continue
                }
                var jobs: [Job] = []
                for (position, record) in page {
                    // Planned before this run: resumed, and announced only now.
                    let earlier = queue.withLock { $0.plannedBeforeRun(position) }
                    guard machine.withLock({ $0.submit(record.id) }) else { continue }
                    if earlier { sink.emit(.upload(.queued(record))) }
                    // Without the card's CRC32Cs (a file staged by an earlier run, planned only
                    // now), the staged copy is checked against its fingerprint first, as on a
                    // resume, and the checksums come from that read. With them, a copy this run
                    // staged is not read again, even when its parts went out as it was copied
                    // (planned in phase `uploading`): the server checks every part against them.
                    let checksums = record.partChecksums
                    let uncheckedCopy = record.checksum == .crc32c && checksums == nil
                    let resumed = earlier || uncheckedCopy || (record.phase != .created && checksums == nil)
                    let untouched = !resumed && record.phase == .created && record.partSize == nil && record.uploadID == nil
                    jobs.append(Job(id: record.id, resumed: resumed, checksums: checksums, planned: untouched ? record : nil))
                }
                queue.withLock { $0.read(jobs, through: page.last?.position, full: page.count == limit) }
            }
        }
    }

    /// Sends the parts of the large files `planner`'s card is staging as they are copied
    /// (``PartStreamer``); it stops with this run.
    func partStreamer(planner: UploadPlanner) -> PartStreamer {
        PartStreamer(planner: planner, service: service, stop: stopping, sink: sink)
    }

    /// Asks the uploads to stop now (a shutdown): none starts any more, and the transfers on
    /// the wire are cut (``CurlTransport/cut()``: under a rate cap a part may have minutes
    /// left to send); what the server acknowledged before is journalled. Everything left
    /// stays pending in the journal, counted as ``UploadTotals/interrupted``. Any thread.
    public func stop() {
        machine.withLock { $0.stop() }
        stopping.raise()
        service.destinations.cutTransfers()
    }

    /// Submits nothing more, waits for every queued upload, then deletes the staged copies
    /// retention allows and gives the spares held meanwhile back to `.spare/`. Once per
    /// runner: the run that made it finishes it.
    public func finish() async -> (UploadTotals, UploadError?) {
        machine.withLock { $0.drain() }
        queue.withLock { $0.finish() }?.resume()
        await worker.withLock { $0 }?.value
        await releases?.flush()
        staging.shelveHeldSpares()
        let removed = await removeStagedCopies() + (releases?.count ?? 0)
        return machine.withLock { machine in
            machine.removedStagedCopies(removed)
            return machine.finish()
        }
    }

    private func run(_ job: Job, slot: FileSlot) async {
        guard machine.withLock({ $0.start() }) else {
            machine.withLock { $0.release(job.id) }
            return
        }
        let ending = await upload(job, slot: slot)
        machine.withLock {
            $0.ended(ending)
            $0.release(job.id)
        }
        for copy in waitingForContent.withLock({ $0.removeValue(forKey: job.id) }) ?? [] { copy.resume() }
    }

    /// Returns once the upload `id` is not queued or running in this run. A content's upload
    /// is taken from the queue, and holds a file slot, before any copy of it (it was planned
    /// first), so a copy waiting here never waits for a slot it holds.
    private func untilEnded(_ id: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Looked at under the waits' lock: an upload that ends after the look resumes this
            // continuation; one that ended before it lets it go on at once.
            let waiting = waitingForContent.withLock { waits in
                guard machine.withLock({ $0.isActive(id) }) else { return false }
                waits[id, default: []].append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    private func upload(_ job: Job, slot: FileSlot) async -> UploadRunMachine.Ending {
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
        if let planned = job.planned {
            current = (planned, [])
        } else {
            do { current = try await journal.upload(id: job.id) } catch {
                return .failed(.journal(error), started: true)
            }
        }
        guard case (var fresh, let parts)? = current, fresh.isPending || (job.confirming && fresh.phase == .completed) else {
            return .leftAlone
        }
        let destination: ReadyDestination
        switch await service.destinations.client(for: fresh.target) {
        case .success(let ready): destination = ready
        case .failure(let error): return .failed(error, started: false)
        }
        if !destination.keepsChecksums, fresh.checksum == .crc32c, !fresh.isCopy, fresh.phase == .created {
            // A CRC32C this server neither checks nor reports proves nothing: MD5 it checks. A
            // single PUT keeps nothing of its digest before its completion; a multipart upload
            // journals the change, since its parts must all go with one algorithm.
            if (try? PartPlan.recorded(fileSize: fresh.size, partSize: fresh.partSize))?.isSinglePut == true {
                fresh.checksum = .md5
            } else {
                do { fresh = try await journal.useDigest(.md5, forUnstartedUpload: fresh.id) ?? fresh } catch {
                    return .failed(.journal(error), started: true)
                }
            }
        }
        let uploader = ObjectUploader(
            record: fresh, client: destination.client, journal: journal, stagedPath: stagedPath(fresh), limiter: service.limiter,
            settings: settings, sink: sink, hooks: service.hooks, stop: stopping, releases: releases,
            conditionalWrites: destination.conditionalWrites, verified: slot.release)
        let result: UploadResult
        if fresh.isCopy {
            switch await content(of: fresh) {
            case .success(let source): result = await UploadRun.copy(uploader, from: source)
            case .failure(let error): result = await uploader.conclude(.failed(error))
            }
        } else {
            let confirming = job.confirming && !fresh.isPending
            result = await UploadRun.upload(
                uploader, parts: parts, resumed: job.resumed, checksums: job.checksums, confirming: confirming)
        }
        switch result {
        case .uploaded(let alreadyThere):
            if fresh.isCopy, !alreadyThere { return .copied }
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

    /// The verified upload a copy is made from: once this run's attempt at it ended, if it
    /// has one, or another process's (two cards of the same photos ingested at once); a
    /// content that is not verified then fails the copy for this run, naming why.
    private func content(of copy: UploadRecord) async -> Result<UploadRecord, UploadError> {
        var source: UploadRecord?
        do {
            source = try await journal.contentUpload(of: copy)
            if let pending = source, pending.isPending {
                if machine.withLock({ $0.isActive(pending.id) }) {
                    await untilEnded(pending.id)
                } else {
                    await untilOtherProcessEnds(pending.id)
                }
                source = try await journal.contentUpload(of: copy)
            }
        } catch {
            return .failure(.journal(error))
        }
        guard let source else {
            return .failure(UploadError(
                exitStatus: .partial, scope: .object,
                message: "\(copy.key) is a copy of content \(copy.fingerprint), whose upload is gone from the journal "
                    + "(its staged copy was found wrong): the card's next run stages that file again, then this one is copied."))
        }
        guard source.phase == .completed else {
            let why = source.lastError.map { ": \($0)" } ?? ""
            return .failure(UploadError(
                exitStatus: .partial, scope: .object,
                message: "\(copy.key) is to be copied from \(source.key), whose upload \(source.id) is not verified yet\(why); "
                    + "the file stays staged until that upload ends (ingest resume)."))
        }
        return .success(source)
    }

    /// Returns once no other process holds the upload `id`'s lock (at once when none does,
    /// or the lock cannot be taken at all: the copy then finds its content pending), or this
    /// run is asked to stop.
    private func untilOtherProcessEnds(_ id: String) async {
        while !stopping.isRaised {
            let held: VolumeLock?
            do { held = try service.stateDirectory.lockUpload(id) } catch { return }
            if let held {
                held.release()
                return
            }
            try? await Task.sleep(for: .milliseconds(250))
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

/// One file's place among the files in flight, given back once: when its object verified
/// (before the completion is journalled), or when its upload ends otherwise.
private final class FileSlot: Sendable {
    private let files: TransferLimiter
    private let given = Atomic<Bool>(false)

    init(_ files: TransferLimiter) { self.files = files }

    @Sendable func release() async {
        guard !given.exchange(true, ordering: .relaxed) else { return }
        await files.release(0)
    }
}
