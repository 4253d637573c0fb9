import Synchronization

/// How far the whole job is: the card's files copied into staging, and their bytes in the
/// bucket, counting each part as the server acknowledges it (a 4 GiB clip moves as its parts
/// land, not only when its last one verifies), with the rate of each and when the last object
/// should be verified.
///
/// One per command, fed every event of the job (``ProgressTap``): a card's ingest, the
/// uploads `ingest resume` takes up, each step of a rescan. Read a few times a second by what
/// shows it (``ProgressReports``): the terminal line, the `progress` NDJSON events, systemd's
/// `STATUS=`.
///
/// Bytes to upload count from the moment an upload is queued; while the card is still being
/// copied, the bytes not copied yet are expected to follow. Bytes acknowledged are those the
/// bucket holds of them: parts acknowledged, the parts a resumed upload had acknowledged
/// already, objects completed and objects found there already. Bytes uploaded add what this
/// process has on the wire and the server has not acknowledged yet (``WireMeter``, taken
/// back when a transfer fails): a part under a rate cap moves the figure as it goes, not
/// only when its last byte is answered. The upload rate counts only what this process
/// sent, so that a resumed upload's parts or an object found in the bucket never make it leap.
///
/// Events come from every upload at once and take one short lock each: one per file or part,
/// never per byte (the bytes being copied are read from the stager's own atomic counter). The
/// one table is that of the uploads running, at most `[upload] files_in_flight` of them: what
/// their parts already counted, so that a completion counts the rest of an object once.
public final class JobProgress: Sendable {
    private struct State {
        var filesToCopy = 0
        var bytesToCopy: Int64 = 0
        /// Files staged or failed, and their sizes.
        var filesSettled = 0
        var bytesSettled: Int64 = 0
        /// Files not reached when copying ended early (card pulled, staging full, a stop).
        var filesAbandoned = 0
        var bytesAbandoned: Int64 = 0
        /// The stager copying now, whose counter moves byte by byte; what earlier ones read.
        var stager: Stager?
        var bytesReadBefore: Int64 = 0

        var objectsToUpload = 0
        var bytesToUpload: Int64 = 0
        var objectsUploaded = 0
        var bytesUploaded: Int64 = 0
        /// Uploads that will not finish in this job (failed, aborted, left for later), and
        /// the bytes of them not uploaded.
        var objectsDropped = 0
        var bytesDropped: Int64 = 0
        /// Bytes this process sent and the server acknowledged: what the rate measures.
        var bytesSent: Int64 = 0
        /// What each running upload counted so far, by its id.
        var credited: [String: Int64] = [:]
        /// Files whose parts go out as they are copied, by key: their size, counted as to
        /// upload, and what their parts counted, until their upload is queued (and takes
        /// both over) or their stream is aborted (and gives both back).
        var streamed: [String: (size: Int64, credited: Int64)] = [:]

        var copyRate = RateWindow()
        var sendRate = RateWindow()
        /// The last card's verdict, once its run ended (``RunSummary/safeToErase``).
        var verdict: String?

        var bytesRead: Int64 { bytesReadBefore + (stager?.bytesRead.load(ordering: .relaxed) ?? 0) }
        var filesLeftToCopy: Int { max(filesToCopy - filesSettled - filesAbandoned, 0) }
        var bytesLeftToCopy: Int64 { max(bytesToCopy - bytesSettled - bytesAbandoned, 0) }

        mutating func endCopying() {
            if let stager { bytesReadBefore += stager.bytesRead.load(ordering: .relaxed) }
            stager = nil
            filesAbandoned += filesLeftToCopy
            bytesAbandoned += bytesLeftToCopy
        }

        /// Counts `bytes` more of upload `id` as in the bucket, never past its size.
        mutating func credit(_ bytes: Int64, to record: UploadRecord) -> Int64 {
            let before = credited[record.id] ?? 0
            let counted = min(max(bytes, 0), max(record.size - before, 0))
            credited[record.id] = before + counted
            bytesUploaded += counted
            return counted
        }

        /// The upload ended: the rest of it is in the bucket (`uploaded`) or will not be in this job.
        mutating func end(_ record: UploadRecord, uploaded: Bool, sent: Bool) {
            let rest = max(record.size - (credited.removeValue(forKey: record.id) ?? 0), 0)
            if uploaded {
                objectsUploaded += 1
                bytesUploaded += rest
                if sent { bytesSent += rest }
            } else {
                objectsDropped += 1
                bytesDropped += rest
            }
        }
    }

    /// Whether the job uploads what it copies (false for `--no-upload`).
    public let uploads: Bool
    /// The payload bytes the job's transport has on the wire: give it to the transport.
    public let wire: WireMeter
    /// When the job's clock starts: when it is made, or when ``begin(at:)`` says.
    private let started: Mutex<ContinuousClock.Instant>
    private let state = Mutex(State())

    public init(uploads: Bool, wire: WireMeter = WireMeter(), now: ContinuousClock.Instant = .now) {
        self.uploads = uploads
        self.wire = wire
        started = Mutex(now)
    }

    /// Starts the job's clock at `now`: a run that checks its destination before it reads a
    /// card (``ProgressReports/start()``) times the card, as its summary does.
    public func begin(at now: ContinuousClock.Instant) {
        started.withLock { $0 = now }
    }

    /// The last card's verdict, for systemd's last `STATUS=`; nil before a card's run ended.
    public var verdict: String? { state.withLock { $0.verdict } }

    /// Takes in one event of the job.
    public func record(_ event: IngestEvent) {
        state.withLock { state in
            switch event {
            case .scanned(let totals):
                state.filesToCopy += totals.toStage
                state.bytesToCopy += totals.toStageBytes
            case .stagingStarted(let stager):
                if let earlier = state.stager { state.bytesReadBefore += earlier.bytesRead.load(ordering: .relaxed) }
                state.stager = stager
            case .staged(let staged):
                state.filesSettled += 1
                state.bytesSettled += staged.file.size
            case let .failed(file, failure):
                // A staged file no object can be made of was counted as staged already.
                if case .notUploadable = failure.kind { break }
                state.filesSettled += 1
                state.bytesSettled += file.size
            case .stagingEnded:
                state.endCopying()
            case .upload(let upload):
                record(upload, in: &state)
            case .finished(let summary):
                // The card's run is over, its uploads awaited: what did not end is left for later.
                if let safe = summary.safeToErase {
                    state.verdict = safe ? "card safe to erase" : "card NOT safe to erase: \(summary.notSafeBecause.first ?? "")"
                }
                if let signal = summary.stopSignal {
                    state.verdict = (state.verdict.map { $0 + "; " } ?? "")
                        + "stopped by \(System.signalName(signal)) (exit status \(summary.processStatus))"
                }
                state.endCopying()
                state.objectsDropped = state.objectsToUpload - state.objectsUploaded
                state.bytesDropped = state.bytesToUpload - state.bytesUploaded
                state.credited.removeAll()
                state.streamed.removeAll()
            case .volume, .skipped, .notice:
                break
            }
        }
    }

    private func record(_ event: UploadEvent, in state: inout State) {
        switch event {
        case .queued(let record):
            if let streamed = state.streamed.removeValue(forKey: record.key) {
                state.bytesToUpload += record.size - streamed.size
                state.credited[record.id, default: 0] += streamed.credited
            } else {
                state.objectsToUpload += 1
                state.bytesToUpload += record.size
            }
        case let .streamStarted(key, _, size):
            state.objectsToUpload += 1
            state.bytesToUpload += size
            state.streamed[key] = (size, 0)
        case let .resuming(record, acknowledgedBytes):
            _ = state.credit(acknowledgedBytes, to: record)
        case let .partUploaded(record, _, _, bytes):
            state.bytesSent += state.credit(bytes, to: record)
        case let .partStreamed(key, _, _, _, bytes):
            state.bytesSent += bytes
            if let streamed = state.streamed[key] {
                state.bytesUploaded += bytes
                state.streamed[key] = (streamed.size, streamed.credited + bytes)
            }
        case .streamAborted(let key, _):
            if let streamed = state.streamed.removeValue(forKey: key) {
                state.objectsToUpload -= 1
                state.bytesToUpload -= streamed.size
                state.bytesUploaded -= streamed.credited
            }
        case let .completed(record, alreadyThere):
            // A single PutObject's body is sent whole; a multipart upload's parts were counted.
            state.end(record, uploaded: true, sent: !alreadyThere && record.partSize == nil && !record.isCopy)
        case .failed(let record, _), .aborted(let record):
            state.end(record, uploaded: false, sent: false)
        case .keyTaken(let record, _, _, _):
            // Starts again at another key: what its parts counted is to be sent again.
            state.bytesUploaded -= state.credited.updateValue(0, forKey: record.id) ?? 0
        case .preparing, .initiating, .reconciling, .waitingForUpload, .takingOver, .completing, .refreshingCredentials,
            .quarantined,
            .conditionalWritesNotHonoured, .checksumsNotKept, .recovered, .newDestination, .foreignGateway:
            break
        }
    }

    /// The numbers now, with the rates over the last half minute.
    public func snapshot(now: ContinuousClock.Instant = .now) -> ProgressSnapshot {
        state.withLock { state in
            let bytesRead = state.bytesRead
            // Each rate is watched from when its work could begin: the time spent scanning the
            // card before copying, or before the first upload was queued, is no slowness.
            if state.filesToCopy > 0 { state.copyRate.add(bytesRead, at: now) }
            // Sent: what the server acknowledged of this process's bodies, and what is on the
            // wire beyond it (read once: the transport's thread moves it meanwhile).
            let sent = max(state.bytesSent, wire.onWire)
            if state.objectsToUpload > 0 { state.sendRate.add(sent, at: now) }
            var snapshot = ProgressSnapshot(seconds: (now - started.withLock { $0 }).inSeconds)
            snapshot.filesToCopy = state.filesToCopy
            snapshot.filesCopied = state.filesSettled
            snapshot.bytesToCopy = state.bytesToCopy
            snapshot.bytesCopied = bytesRead
            snapshot.copying = state.filesLeftToCopy > 0
            snapshot.copyRate = snapshot.copying ? state.copyRate.rate(bytesRead, at: now) : nil
            if uploads {
                // The files not copied yet are expected to be uploaded too (a file is queued
                // before it counts as copied, so none is missed in between).
                let expected = state.bytesLeftToCopy
                let toUpload = max(state.bytesToUpload - state.bytesDropped, state.bytesUploaded) + expected
                snapshot.upload = ProgressSnapshot.Upload(
                    objectsToUpload: state.objectsToUpload - state.objectsDropped, objectsUploaded: state.objectsUploaded,
                    bytesToUpload: toUpload,
                    bytesUploaded: min(state.bytesUploaded + sent - state.bytesSent, toUpload),
                    bytesAcknowledged: state.bytesUploaded, rate: state.sendRate.rate(sent, at: now))
            }
            return snapshot
        }
    }
}

/// Feeds every event of a job to its ``JobProgress`` on the way to the job's reporter.
public struct ProgressTap: EventSink {
    public let progress: JobProgress
    let next: any EventSink

    public init(progress: JobProgress, next: any EventSink) {
        self.progress = progress
        self.next = next
    }

    public func emit(_ event: IngestEvent) {
        progress.record(event)
        next.emit(event)
    }
}
