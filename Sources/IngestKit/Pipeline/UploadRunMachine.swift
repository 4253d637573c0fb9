/// The life of one run of uploads (an ``UploadRunner``), written as the upload state machine
/// is: the runner tells it what happened, it says what to do, and it holds no thread, task or
/// lock of its own, so every transition is tested without them.
///
/// A run is **open** while its pipeline submits uploads, **draining** once it is finished
/// (nothing more is submitted; what is queued and running ends), then **finished**, when its
/// totals and the failure that decides its exit status are read once. A stop request (a
/// shutdown) may come in either of the first two: from then on no queued upload starts (each
/// counts as interrupted) while the running ones end on their own.
///
/// The failure that decides the run's status is the first one that concerns a destination
/// (every later upload there would fail the same way), else the first failure of one object,
/// an integrity failure overriding any other.
///
/// Impossible events trap, naming the event and the phase: a submission after the run was
/// finished, a second finish, an upload ending that never started.
struct UploadRunMachine: Sendable {
    enum Phase: Sendable, Equatable {
        case open(stopped: Bool)
        case draining(stopped: Bool)
        case finished
    }

    /// How one upload of the run ended, as far as the run's totals and status go.
    enum Ending: Sendable, Equatable {
        /// Verified in the bucket: sent now (`bytes`), or found there.
        case uploaded(alreadyThere: Bool, bytes: Int64)
        /// Verified in the bucket, made now by the server from another object.
        case copied
        /// Failed; `started`: false when it never got as far as its first request (its
        /// destination failed before it, its lock or its journal record could not be had).
        case failed(UploadError, started: Bool)
        /// Given up by the user (`ingest abort`) while it ran.
        case aborted
        /// Left for later on a stop request.
        case interrupted
        /// Another process runs it, or it needs nothing any more: not this run's.
        case leftAlone
    }

    private(set) var phase: Phase = .open(stopped: false)
    private(set) var totals = UploadTotals()
    /// Uploads started and not yet ended.
    private(set) var running = 0
    /// Uploads queued or running: one upload is never run twice at once.
    private var active: Set<String> = []
    private var stoppedBy: UploadError?
    private var worstObjectFailure: UploadError?

    /// An upload is submitted: true when it is to be queued, false when this run has it
    /// queued or running already (two files with one content share one upload). Once it
    /// ended (``release(_:)``) it may be queued again: the journal says then whether it
    /// still needs anything. So the run keeps only what is queued or running, not every
    /// upload of the card.
    mutating func submit(_ uploadID: String) -> Bool {
        guard phase != .finished else { impossible("submit(\(uploadID))") }
        return active.insert(uploadID).inserted
    }

    /// Whether this run has the upload queued or running.
    func isActive(_ uploadID: String) -> Bool { active.contains(uploadID) }

    /// A queued upload ended, or was dropped without running.
    mutating func release(_ uploadID: String) {
        active.remove(uploadID)
    }

    /// A queued upload reaches the front: true to run it, false when the run was stopped
    /// (it is counted as interrupted, and stays pending in the journal).
    mutating func start() -> Bool {
        switch phase {
        case .open(stopped: false), .draining(stopped: false):
            running += 1
            return true
        case .open(stopped: true), .draining(stopped: true):
            totals.interrupted += 1
            return false
        case .finished:
            impossible("start")
        }
    }

    mutating func ended(_ ending: Ending) {
        guard phase != .finished, running > 0 else { impossible("ended(\(ending))") }
        running -= 1
        switch ending {
        case let .uploaded(alreadyThere, bytes):
            if alreadyThere {
                totals.alreadyThere += 1
            } else {
                totals.uploaded += 1
                totals.uploadedBytes += bytes
            }
        case .copied:
            totals.uploaded += 1
            totals.copied += 1
        case let .failed(error, started):
            if started { totals.failed += 1 } else { totals.notAttempted += 1 }
            if error.scope == .destination {
                if stoppedBy == nil { stoppedBy = error }
            } else if worstObjectFailure == nil || error.exitStatus == .integrity {
                worstObjectFailure = error
            }
        case .interrupted:
            totals.interrupted += 1
        case .aborted, .leftAlone:
            break
        }
    }

    /// Staged copies deleted as their objects verified.
    mutating func removedStagedCopies(_ count: Int) {
        totals.stagedCopiesRemoved += count
    }

    /// A stop request: no queued upload starts any more. Any number of times, in any phase
    /// but the last.
    mutating func stop() {
        switch phase {
        case .open: phase = .open(stopped: true)
        case .draining: phase = .draining(stopped: true)
        case .finished: break
        }
    }

    /// The pipeline submits nothing more: what is queued and running ends.
    mutating func drain() {
        guard case .open(let stopped) = phase else { impossible("drain") }
        phase = .draining(stopped: stopped)
    }

    /// Every upload ended: the run's totals and the failure that decides its status.
    mutating func finish() -> (UploadTotals, UploadError?) {
        guard case .draining = phase, running == 0 else { impossible("finish") }
        phase = .finished
        return (totals, stoppedBy ?? worstObjectFailure)
    }

    private func impossible(_ event: String) -> Never {
        preconditionFailure("UploadRunMachine: \(event) is impossible in \(phase) with \(running) running")
    }
}
