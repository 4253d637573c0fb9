/// The life of one upload, as a value: events go in, the actions to perform come out, and
/// nothing here touches the disk or the network. A multipart upload and a single
/// `PutObject` (a plan of one part, ``PartPlan/isSinglePut``) live the same life: planned,
/// sent, verified, journalled at the same points.
///
/// Its owner (an actor) performs the actions in the order given and reports what came of
/// them as the next events. The split is async-http-client's `Transaction+StateMachine`:
/// every decision about the upload is here, where a test can drive it step by step, and
/// every side effect is in the owner.
///
/// ```
/// created ──start──▶ (createUpload) ──uploadCreated──▶ initiated ──first ack──▶ uploading
///    │                                                     │                         │
///    │ resumed with an upload id: start ▶ listParts ▶ partsListed (reconcile) ───────┤
///    │                                                                               ▼
///    │                      completed ◀──verify, objectAlreadyExists── (completing) ◀─ last ack
///    │
///    └─ uploadGone (NoSuchUpload): a new upload, at most `maxRestarts` times, else failed
///       abortRequested: aborting ──abortConfirmed──▶ aborted
///
/// single PUT:
/// created ──start──▶ (putObject) ──objectPut──▶ verify ──▶ completed
///    resumed in any other phase: verify first; the object missing, putObject
/// ```
///
/// Rules the owner relies on:
/// - **Persist before depending.** Every `persist` comes before the action that relies on
///   it: an acknowledged part is in the journal before the next part or `Complete` is sent;
///   a restart's count is in the journal before the new upload is created. A `kill -9` at
///   any point then resumes from a snapshot that is true, or behind by the parts in flight,
///   which reconciliation finds again.
/// - **Stale answers are ignored, never trapped.** Parts are sent concurrently, so after
///   `NoSuchUpload`, a failure or an abort, answers for requests already on the wire keep
///   arriving. Events that name an upload id other than the current one, and part answers
///   after the upload ended, return no actions.
/// - **Impossible transitions trap.** An event that cannot happen in the current state (an
///   acknowledgement of a part never sent, `uploadCreated` when nothing was created) is a
///   bug in the owner; `preconditionFailure` names the state and the event.
/// - **Retries are the owner's.** The owner runs ``RetryPolicy`` for each request and
///   reports only the decisions that end a request: ``RetryDecision/restartUpload`` and
///   ``RetryDecision/fail(_:)``. A decision to send the same request again does not change
///   the upload, so reporting one traps.
public struct UploadStateMachine: Sendable {
    /// Limits the owner sets from the configuration.
    public struct Configuration: Sendable, Equatable {
        /// How many times one logical upload may start over after the server forgot it
        /// (`NoSuchUpload`: aborted, expired by a lifecycle rule, server data lost). Bounded,
        /// because a server that keeps forgetting would otherwise take the file's bytes again
        /// and again forever.
        public var maxRestarts: Int
        /// Parts sent at once: the owner's memory and connection budget for this file.
        public var partsInFlight: Int

        /// A configuration; a negative `maxRestarts` counts as 0 and a `partsInFlight` below
        /// 1 as 1, so a bad configuration value cannot make an upload that never sends.
        public init(maxRestarts: Int = 3, partsInFlight: Int = 4) {
            self.maxRestarts = max(0, maxRestarts)
            self.partsInFlight = max(1, partsInFlight)
        }
    }

    /// The phase the journal records, from which a later run resumes.
    public enum Phase: String, Codable, Sendable, CaseIterable {
        /// Planned; nothing on the server yet (or a restart is creating a new upload).
        case created
        /// The server gave an upload id; no part acknowledged yet.
        case initiated
        /// Some parts are acknowledged.
        case uploading
        /// Every part is acknowledged and `CompleteMultipartUpload` was sent (or is about to
        /// be); for a single PUT, its `PutObject` was sent (or is about to be). The object
        /// may exist already: a resume checks before anything else.
        case completing
        /// The server completed the object. (A resume verifies it once more.)
        case completed
        /// Given up; the snapshot keeps the upload id and the parts, so a later run can try
        /// again or abort it.
        case failed
        /// An abort was sent and not yet confirmed: a resume finishes the abort, it never
        /// uploads what the user gave up.
        case aborting
        /// The server forgot the upload on our request.
        case aborted
    }

    /// A part the server acknowledged, as the journal keeps it.
    public struct AcknowledgedPart: Codable, Sendable, Hashable {
        public var number: Int
        /// Exactly as the server returned it, quotes included: `Complete` sends it back so.
        public var etag: String
        public var size: Int64
        /// The integrity digest sent with the part (``PartDigest``'s journal form): what the
        /// whole-object check after `Complete` is computed from.
        public var digest: String?

        public init(number: Int, etag: String, size: Int64, digest: String? = nil) {
            self.number = number
            self.etag = etag
            self.size = size
            self.digest = digest
        }
    }

    /// A part as `ListParts` reports it.
    public struct RemotePart: Sendable, Hashable {
        public var etag: String
        public var size: Int64

        public init(etag: String, size: Int64) {
            self.etag = etag
            self.size = size
        }
    }

    /// What the journal stores for one upload: enough to resume after `kill -9`.
    public struct Snapshot: Sendable, Equatable {
        /// Our id for the upload, stable across restarts on the server.
        public var logicalUploadID: String
        /// The staged file.
        public var file: String
        public var fingerprint: Fingerprint
        public var plan: PartPlan
        public var phase: Phase
        /// The server's id of the current multipart upload, once known.
        public var uploadID: String?
        /// Acknowledged parts of the current upload, by part number.
        public var parts: [AcknowledgedPart]
        /// Times the upload started over after `NoSuchUpload`.
        public var restartCount: Int
        /// Why it failed, in phase ``Phase/failed``.
        public var failure: UploadFailure?

        public init(
            logicalUploadID: String, file: String, fingerprint: Fingerprint, plan: PartPlan, phase: Phase,
            uploadID: String?, parts: [AcknowledgedPart], restartCount: Int, failure: UploadFailure?
        ) {
            self.logicalUploadID = logicalUploadID
            self.file = file
            self.fingerprint = fingerprint
            self.plan = plan
            self.phase = phase
            self.uploadID = uploadID
            self.parts = parts
            self.restartCount = restartCount
            self.failure = failure
        }
    }

    /// What the owner does next. Perform them in order.
    public enum Action: Sendable, Equatable {
        /// `CreateMultipartUpload`; answer with ``uploadCreated(uploadID:)``.
        case createUpload
        /// A single PUT: `PutObject` of the whole file; answer with
        /// ``objectPut(etag:digest:)`` or ``putFailed(_:)``.
        case putObject
        /// `ListParts` (every page); answer with ``partsListed(_:)``.
        case listParts(uploadID: String)
        /// Read, digest and `UploadPart` these parts, concurrently; answer each with
        /// ``partAcknowledged(uploadID:number:etag:)`` or ``partFailed(uploadID:number:decision:)``.
        /// Never more than the configured window is outstanding.
        case sendParts(uploadID: String, parts: [Int])
        /// Commit the snapshot to the journal before the next action.
        case persist(Snapshot)
        /// `CompleteMultipartUpload` with these parts, in order, ETags exactly as returned;
        /// answer with ``completed(etag:)`` or ``completeFailed(_:)``.
        case complete(uploadID: String, parts: [AcknowledgedPart])
        /// `AbortMultipartUpload`; answer with ``abortConfirmed()`` (a `NoSuchUpload` answer
        /// confirms it too).
        case abort(uploadID: String)
        /// `HeadObject` on the key; answer with ``objectAlreadyExists(size:fingerprint:)``
        /// (size and the fingerprint metadata found) or ``objectNotFound()``.
        case verify
        /// The upload is over: record it and report it. A success is not persisted first:
        /// the owner records it in one journal write (phase, parts dropped, files uploaded).
        case finish(Outcome)
    }

    /// How an upload ended.
    public enum Outcome: Sendable, Equatable {
        /// Completed now and verified; the ETag `Complete` returned.
        case uploaded(etag: String)
        /// The object was already on the server with our size and fingerprint: a previous
        /// run completed it and was stopped before its journal said so.
        case alreadyUploaded
        case failed(UploadFailure)
        case aborted
    }

    /// Why the object is being looked for.
    private enum VerifyPurpose: Sendable {
        /// Resumed in `completing`: did the last run's `Complete` succeed?
        case resumeAfterComplete
        /// `Complete` met `NoSuchUpload`: a first attempt that got no answer may have
        /// succeeded, so look before starting over.
        case completeLostUpload
        /// `Complete` succeeded: check the object is ours.
        case confirmCompleted(etag: String)
    }

    private enum State: Sendable {
        /// Before ``start()``: new (`created`) or resumed from a snapshot in `phase`.
        case idle(phase: Phase, uploadID: String?, failure: UploadFailure?)
        /// `CreateMultipartUpload` sent.
        case creating
        /// A single PUT's `PutObject` sent.
        case putting
        /// `ListParts` sent; the journal's parts wait to be compared.
        case reconciling(uploadID: String)
        /// Parts being sent. `queue` holds the parts still to send, the smallest last.
        case uploading(uploadID: String, queue: [Int], inFlight: Set<Int>)
        /// `CompleteMultipartUpload` sent.
        case completing(uploadID: String)
        /// `HeadObject` sent.
        case verifying(uploadID: String?, purpose: VerifyPurpose)
        /// `AbortMultipartUpload` sent.
        case aborting(uploadID: String)
        /// Ended. A failed upload keeps its upload id, for a later run to reconcile or abort.
        case done(Outcome, uploadID: String?)
    }

    public let logicalUploadID: String
    public let file: String
    public let fingerprint: Fingerprint
    public let plan: PartPlan
    public let configuration: Configuration
    public private(set) var restartCount: Int
    private var state: State
    /// Acknowledged parts by number (index 0 unused): a snapshot lists them in order in
    /// O(parts), where a dictionary would sort on every acknowledgement.
    private var acknowledged: [AcknowledgedPart?]

    /// A new upload: nothing on the server yet.
    public init(
        logicalUploadID: String, file: String, fingerprint: Fingerprint, plan: PartPlan,
        configuration: Configuration = Configuration()
    ) {
        self.logicalUploadID = logicalUploadID
        self.file = file
        self.fingerprint = fingerprint
        self.plan = plan
        self.configuration = configuration
        self.restartCount = 0
        self.state = .idle(phase: .created, uploadID: nil, failure: nil)
        self.acknowledged = Array(repeating: nil, count: plan.partCount + 1)
    }

    /// An upload resumed from its journal snapshot; call ``start()`` to go on. Parts the
    /// snapshot lists outside the plan are dropped (they cannot be ours).
    public init(resuming snapshot: Snapshot, configuration: Configuration = Configuration()) {
        self.init(
            logicalUploadID: snapshot.logicalUploadID, file: snapshot.file, fingerprint: snapshot.fingerprint,
            plan: snapshot.plan, configuration: configuration)
        restartCount = snapshot.restartCount
        for part in snapshot.parts where plan.partNumbers.contains(part.number) {
            acknowledged[part.number] = part
        }
        switch snapshot.phase {
        case .aborted: state = .done(.aborted, uploadID: nil)
        default: state = .idle(phase: snapshot.phase, uploadID: snapshot.uploadID, failure: snapshot.failure)
        }
    }

    // MARK: what the owner may read

    /// The phase the journal would record now.
    public var phase: Phase {
        switch state {
        case let .idle(phase, _, _): phase
        case .creating: .created
        case .putting: .created
        case .reconciling, .uploading: acknowledgedParts.isEmpty ? .initiated : .uploading
        case .completing: .completing
        // Completed only once verified: a kill between the server's Complete and the look that
        // verifies it leaves the upload completing, which the next process takes up (its
        // ListParts finds the upload gone, and the look at the key finds the object ours).
        case .verifying: .completing
        case .aborting: .aborting
        case let .done(outcome, _):
            switch outcome {
            case .uploaded, .alreadyUploaded: .completed
            case .failed: .failed
            case .aborted: .aborted
            }
        }
    }

    /// The object is being looked at right after this machine's own `Complete` (or single
    /// PUT) succeeded: what is at the key was written by it, where the key was free.
    public var isConfirmingCompletion: Bool {
        if case .verifying(_, .confirmCompleted) = state { return true }
        return false
    }

    /// The server's id of the current upload, once known.
    public var uploadID: String? {
        switch state {
        case let .idle(_, id, _): id
        case .creating, .putting: nil
        case let .done(_, id): id
        case let .reconciling(id), let .uploading(id, _, _), let .completing(id), let .aborting(id): id
        case let .verifying(id, _): id
        }
    }

    /// The acknowledged parts, by part number.
    public var acknowledgedParts: [AcknowledgedPart] { acknowledged.compactMap { $0 } }

    /// What the journal stores now.
    public var snapshot: Snapshot {
        var failure: UploadFailure?
        switch state {
        case let .idle(_, _, idleFailure): failure = idleFailure
        case let .done(.failed(reason), _): failure = reason
        default: failure = nil
        }
        return Snapshot(
            logicalUploadID: logicalUploadID, file: file, fingerprint: fingerprint, plan: plan, phase: phase,
            uploadID: uploadID, parts: acknowledgedParts, restartCount: restartCount, failure: failure)
    }

    // MARK: events

    /// Begin, or resume where the snapshot left off.
    ///
    /// - new, or resumed without an upload id: create the upload;
    /// - resumed with an upload id (initiated, uploading, failed): list the server's parts
    ///   to reconcile them with the journal;
    /// - resumed in completing or completed: look for the object first, since the last
    ///   run may have completed it and been killed before its journal said so;
    /// - resumed in aborting: finish the abort; resumed aborted: nothing to do.
    public mutating func start() -> [Action] {
        switch state {
        case let .idle(phase, uploadID, _):
            if plan.isSinglePut {
                return startSinglePut(phase: phase)
            }
            switch (phase, uploadID) {
            case (.aborting, let id?):
                state = .aborting(uploadID: id)
                return [.abort(uploadID: id)]
            case (.aborting, nil):
                return finish(.aborted)
            case (.completed, _):
                state = .verifying(uploadID: uploadID, purpose: .resumeAfterComplete)
                return [.verify]
            case (.completing, _):
                state = .verifying(uploadID: uploadID, purpose: .resumeAfterComplete)
                return [.verify]
            case (_, let id?):
                state = .reconciling(uploadID: id)
                return [.listParts(uploadID: id)]
            case (_, nil):
                clearParts()
                state = .creating
                return [.createUpload]
            }
        case .done(.aborted, _):
            return [.finish(.aborted)]
        default:
            impossible("start")
        }
    }

    /// A single PUT begins: new, it is sent at once; resumed in another phase (a journal
    /// of an older version), the object is looked for first.
    ///
    /// Nothing is journalled before the `PutObject`: it writes only where the key is free
    /// (`If-None-Match: *`), so a run killed once it landed is answered `412` by the next
    /// run's write, whose owner then looks at the key and finds the object its own; a
    /// server that ignores conditional writes gets that look before every write anyway.
    /// A small file then costs one journal write, its completion.
    private mutating func startSinglePut(phase: Phase) -> [Action] {
        switch phase {
        case .created: return beginPutting()
        case .aborting, .aborted: return finish(.aborted)
        default:
            state = .verifying(uploadID: nil, purpose: .resumeAfterComplete)
            return [.verify]
        }
    }

    /// The single PUT's `PutObject` succeeded. `confirmed`: its answer carried the server's
    /// digest of what it stored, and it is the digest of the bytes sent (the card's CRC32C,
    /// or their MD5 as ETag): the object is verified by the write itself, written only where
    /// the key was free, with the metadata sent in the same request. Otherwise it is looked
    /// at (`HeadObject`) before it counts.
    public mutating func objectPut(etag: String, digest: String? = nil, confirmed: Bool = false) -> [Action] {
        guard case .putting = state else { impossible("objectPut") }
        acknowledged[1] = AcknowledgedPart(number: 1, etag: etag, size: plan.fileSize, digest: digest)
        if confirmed { return finish(.uploaded(etag: etag)) }
        state = .verifying(uploadID: nil, purpose: .confirmCompleted(etag: etag))
        return [.verify]
    }

    /// The single PUT's `PutObject` was given up. The journal keeps its phase: the next
    /// run's conditional write finds the object if the lost answer hid a success.
    public mutating func putFailed(_ decision: RetryDecision) -> [Action] {
        guard case .putting = state, case let .fail(reason) = decision else { impossible("putFailed(\(decision))") }
        let failure = UploadFailure.requestFailed(request: "PutObject", reason: Self.text(reason))
        state = .done(.failed(failure), uploadID: nil)
        return [.finish(.failed(failure))]
    }

    /// The server created the upload. Late answers, after an abort, are cleaned up.
    public mutating func uploadCreated(uploadID: String) -> [Action] {
        switch state {
        case .creating:
            clearParts()
            state = .uploading(uploadID: uploadID, queue: Array(plan.partNumbers.reversed()), inFlight: [])
            return [.persist(snapshot)] + sendMore()
        case .done(.aborted, _):
            // Aborted while the create was on the wire: the server holds an upload nobody wants.
            return [.abort(uploadID: uploadID)]
        default:
            impossible("uploadCreated")
        }
    }

    /// The server's parts of the current upload, every page of `ListParts`.
    ///
    /// A part is kept when the server has it with the planned size and the journal recorded
    /// it with the same ETag (compared without surrounding quotes, which servers write
    /// inconsistently between `UploadPart` and `ListParts`). Every other part is sent:
    /// parts the server lacks, parts of the wrong size (a different plan, a truncated
    /// write), and parts the journal never recorded. The last are the parts in flight at
    /// the kill; their bytes were never confirmed to us, and resending at most a window of
    /// parts is cheap next to trusting them. Server parts outside the plan are left out of
    /// `Complete`, which discards them.
    ///
    /// `adopted` are parts the owner found on the server but not in the journal and proved
    /// to be ours (the server's digest of the part equals the digest of the staged range):
    /// they count as acknowledged, so a kill costs only what the server really lacks.
    public mutating func partsListed(_ remote: [Int: RemotePart], adopted: [AcknowledgedPart] = []) -> [Action] {
        switch state {
        case let .reconciling(uploadID):
            for part in adopted where plan.partNumbers.contains(part.number) && acknowledged[part.number] == nil {
                acknowledged[part.number] = part
            }
            var queue: [Int] = []
            for number in plan.partNumbers.reversed() {
                if let journal = acknowledged[number], let server = remote[number],
                    server.size == plan.length(ofPart: number), journal.size == server.size,
                    ETag.unquoted(journal.etag) == ETag.unquoted(server.etag)
                {
                    continue
                }
                acknowledged[number] = nil
                queue.append(number)
            }
            state = .uploading(uploadID: uploadID, queue: queue, inFlight: [])
            if queue.isEmpty { return beginCompleting(uploadID) }
            return [.persist(snapshot)] + sendMore()
        case .aborting, .done:
            return []
        default:
            impossible("partsListed")
        }
    }

    /// The server acknowledged a part: journal it, then send the next one, or complete when
    /// it was the last.
    public mutating func partAcknowledged(uploadID: String, number: Int, etag: String, digest: String? = nil) -> [Action] {
        guard case .uploading(let current, let queue, var inFlight) = state, current == uploadID else {
            return staleOrImpossible("partAcknowledged(part \(number))", uploadID: uploadID)
        }
        guard inFlight.remove(number) != nil else {
            impossible("partAcknowledged(part \(number), which is not in flight)")
        }
        acknowledged[number] = AcknowledgedPart(number: number, etag: etag, size: plan.length(ofPart: number), digest: digest)
        state = .uploading(uploadID: current, queue: queue, inFlight: inFlight)
        if queue.isEmpty && inFlight.isEmpty { return beginCompleting(current) }
        return [.persist(snapshot)] + sendMore()
    }

    /// A part could not be sent: ``RetryDecision/restartUpload`` starts over like
    /// ``uploadGone(uploadID:)``, ``RetryDecision/fail(_:)`` ends the upload.
    public mutating func partFailed(uploadID: String, number: Int, decision: RetryDecision) -> [Action] {
        guard case .uploading(let current, _, let inFlight) = state, current == uploadID else {
            return staleOrImpossible("partFailed(part \(number))", uploadID: uploadID)
        }
        guard inFlight.contains(number) else { impossible("partFailed(part \(number), which is not in flight)") }
        switch decision {
        case .restartUpload:
            return restart()
        case let .fail(reason):
            return fail(.requestFailed(request: "UploadPart (part \(number))", reason: Self.text(reason)))
        default:
            impossible("partFailed(part \(number), \(decision))")
        }
    }

    /// A request other than a part or `Complete` (`CreateMultipartUpload`, `ListParts`,
    /// `HeadObject`, `AbortMultipartUpload`) was given up.
    public mutating func requestFailed(_ decision: RetryDecision) -> [Action] {
        let request: String
        switch state {
        case .creating: request = "CreateMultipartUpload"
        case .reconciling: request = "ListParts"
        case .verifying: request = "HeadObject"
        case .aborting: request = "AbortMultipartUpload"
        default: impossible("requestFailed(\(decision))")
        }
        switch decision {
        case .restartUpload:
            switch state {
            case .reconciling: return restart()
            case .aborting: return abortConfirmed()
            default: impossible("requestFailed(\(decision))")
            }
        case let .fail(reason):
            let failure = UploadFailure.requestFailed(request: request, reason: Self.text(reason))
            switch state {
            case let .aborting(uploadID), let .verifying(uploadID?, _):
                // The journal keeps its phase (aborting, completing, completed): it already
                // says what the next run must do first, abort again or look for the object,
                // where `failed` would make it send parts to an upload that may be gone.
                state = .done(.failed(failure), uploadID: uploadID)
                return [.finish(.failed(failure))]
            case .verifying(nil, _):
                state = .done(.failed(failure), uploadID: nil)
                return [.finish(.failed(failure))]
            default:
                return fail(failure)
            }
        default:
            impossible("requestFailed(\(decision))")
        }
    }

    /// The server no longer knows the upload (`NoSuchUpload`): start a new one, unless the
    /// upload already started over ``Configuration/maxRestarts`` times.
    public mutating func uploadGone(uploadID: String) -> [Action] {
        switch state {
        case let .reconciling(current) where current == uploadID,
            let .uploading(current, _, _) where current == uploadID:
            return restart()
        case let .completing(current) where current == uploadID:
            state = .verifying(uploadID: current, purpose: .completeLostUpload)
            return [.verify]
        case let .aborting(current) where current == uploadID:
            return abortConfirmed()
        default:
            return staleOrImpossible("uploadGone", uploadID: uploadID)
        }
    }

    /// `CompleteMultipartUpload` succeeded (with no `<Error>` in its 200): journal it, then
    /// check the object.
    public mutating func completed(etag: String) -> [Action] {
        guard case let .completing(uploadID) = state else { impossible("completed") }
        state = .verifying(uploadID: uploadID, purpose: .confirmCompleted(etag: etag))
        return [.persist(snapshot), .verify]
    }

    /// `CompleteMultipartUpload` was given up. `NoSuchUpload` (``RetryDecision/restartUpload``)
    /// may mean an earlier attempt that got no answer succeeded, so the object is looked for
    /// before starting over.
    public mutating func completeFailed(_ decision: RetryDecision) -> [Action] {
        guard case let .completing(uploadID) = state else { impossible("completeFailed") }
        switch decision {
        case .restartUpload:
            state = .verifying(uploadID: uploadID, purpose: .completeLostUpload)
            return [.verify]
        case let .fail(reason):
            // The request may have reached the server and its answer been lost: the object
            // may be in place and the upload gone. The journal keeps `completing`, so the
            // next run looks for the object first; `failed` would have it list the parts
            // of an upload that is gone and send every part again.
            let failure = UploadFailure.requestFailed(request: "CompleteMultipartUpload", reason: Self.text(reason))
            state = .done(.failed(failure), uploadID: uploadID)
            return [.finish(.failed(failure))]
        default:
            impossible("completeFailed(\(decision))")
        }
    }

    /// The object is on the server with this size and fingerprint metadata (nil when it has
    /// none). Ours — same size, same fingerprint — it ends the upload without sending
    /// anything more. Not ours: after a `Complete` that succeeded, verification fails;
    /// otherwise the upload goes on and will replace it.
    ///
    /// `digestMismatch` is the owner's whole-object check: nil when the server's digest of
    /// the object (the multipart ETag or composite checksum) matches the digests of the
    /// acknowledged parts, or cannot be compared; otherwise what differs. A mismatch makes
    /// the object not ours whatever its metadata says: after `Complete` it is an integrity
    /// failure, never a success.
    ///
    /// Accepted before ``start()`` too, when the owner looked for the object itself.
    public mutating func objectAlreadyExists(
        size: Int64, fingerprint found: Fingerprint?, digestMismatch: String? = nil
    ) -> [Action] {
        let ours = size == plan.fileSize && found == fingerprint && digestMismatch == nil
        switch state {
        case .idle(phase: .created, _, _):
            return ours ? finish(.alreadyUploaded) : []
        case let .verifying(uploadID, purpose):
            switch purpose {
            case let .confirmCompleted(etag):
                if ours { return finish(.uploaded(etag: etag)) }
                if let digestMismatch, size == plan.fileSize, found == fingerprint {
                    return fail(.digestMismatch(digestMismatch))
                }
                return fail(.verificationFailed(expectedSize: plan.fileSize, foundSize: size, foundFingerprint: found))
            case .resumeAfterComplete, .completeLostUpload:
                if ours { return finish(.alreadyUploaded) }
                return afterObjectMissing(uploadID: uploadID, purpose: purpose)
            }
        default:
            impossible("objectAlreadyExists")
        }
    }

    /// `HeadObject` found nothing at the key.
    public mutating func objectNotFound() -> [Action] {
        guard case let .verifying(uploadID, purpose) = state else { impossible("objectNotFound") }
        if case .confirmCompleted = purpose {
            return fail(.verificationFailed(expectedSize: plan.fileSize, foundSize: nil, foundFingerprint: nil))
        }
        return afterObjectMissing(uploadID: uploadID, purpose: purpose)
    }

    /// The user (or `ingest abort`) gives the upload up, and wants the server to free what it
    /// holds.
    ///
    /// - Nothing on the server (not started, create not answered, failed before an upload
    ///   id): aborted at once, with no request. A create answered later is aborted then.
    /// - An upload id known: `aborting` is journaled, then `AbortMultipartUpload`.
    /// - Refused, returning no actions, while `Complete` is on the wire or the object is
    ///   being verified, and after the upload ended (completed, or already aborted or
    ///   aborting): the object is the user's now, and removing it is a delete, not an
    ///   abort. The owner explains from ``phase``.
    public mutating func abortRequested() -> [Action] {
        switch state {
        case .idle(.completed, _, _):
            return []
        case let .idle(_, uploadID?, _), let .reconciling(uploadID), let .uploading(uploadID, _, _),
            let .done(.failed, uploadID?):
            return beginAborting(uploadID)
        case .idle(_, nil, _), .creating, .done(.failed, nil):
            return finish(.aborted)
        case .completing, .putting, .verifying, .aborting, .done:
            return []
        }
    }

    /// The server confirmed the abort (or answered `NoSuchUpload` to it).
    public mutating func abortConfirmed() -> [Action] {
        switch state {
        case .aborting: return finish(.aborted)
        case .done(.aborted, _): return []  // a late confirmation of a cleanup abort
        default: impossible("abortConfirmed")
        }
    }

    // MARK: transitions

    /// Parts to send now: the smallest numbers still queued, up to the window.
    private mutating func sendMore() -> [Action] {
        guard case .uploading(let uploadID, var queue, var inFlight) = state else { return [] }
        var batch: [Int] = []
        while inFlight.count < configuration.partsInFlight, let next = queue.popLast() {
            inFlight.insert(next)
            batch.append(next)
        }
        state = .uploading(uploadID: uploadID, queue: queue, inFlight: inFlight)
        return batch.isEmpty ? [] : [.sendParts(uploadID: uploadID, parts: batch)]
    }

    private mutating func beginPutting() -> [Action] {
        clearParts()
        state = .putting
        return [.putObject]
    }

    private mutating func beginCompleting(_ uploadID: String) -> [Action] {
        state = .completing(uploadID: uploadID)
        return [.persist(snapshot), .complete(uploadID: uploadID, parts: acknowledgedParts)]
    }

    private mutating func beginAborting(_ uploadID: String) -> [Action] {
        state = .aborting(uploadID: uploadID)
        return [.persist(snapshot), .abort(uploadID: uploadID)]
    }

    /// The object is not (or not ours) where a completed upload would have put it.
    private mutating func afterObjectMissing(uploadID: String?, purpose: VerifyPurpose) -> [Action] {
        switch purpose {
        case .completeLostUpload:
            return restart()
        case .resumeAfterComplete:
            if plan.isSinglePut { return beginPutting() }
            if let uploadID {
                state = .reconciling(uploadID: uploadID)
                return [.listParts(uploadID: uploadID)]
            }
            clearParts()
            state = .creating
            return [.createUpload]
        case .confirmCompleted:
            preconditionFailure("UploadStateMachine: a completed object is verified, not restarted")
        }
    }

    /// Start a new upload on the server, within the bound.
    private mutating func restart() -> [Action] {
        guard restartCount < configuration.maxRestarts else {
            return fail(.restartLimitExceeded(maxRestarts: configuration.maxRestarts))
        }
        restartCount += 1
        clearParts()
        state = .creating
        return [.persist(snapshot), .createUpload]
    }

    private mutating func fail(_ failure: UploadFailure) -> [Action] {
        finish(.failed(failure))
    }

    private mutating func finish(_ outcome: Outcome) -> [Action] {
        switch outcome {
        case .failed:
            // Parts and upload id stay, so a later run can reconcile or abort.
            state = .done(outcome, uploadID: uploadID)
        case .aborted:
            clearParts()
            state = .done(outcome, uploadID: nil)
        case .uploaded, .alreadyUploaded:
            state = .done(outcome, uploadID: nil)
            return [.finish(outcome)]
        }
        return [.persist(snapshot), .finish(outcome)]
    }

    private mutating func clearParts() {
        for index in acknowledged.indices { acknowledged[index] = nil }
    }

    /// An event naming another upload id, or a part answer after the upload ended, is a
    /// stale answer; anything else is impossible.
    private func staleOrImpossible(_ event: String, uploadID: String) -> [Action] {
        switch state {
        case .done, .aborting, .creating: return []
        default:
            if let current = self.uploadID, current != uploadID { return [] }
            impossible(event)
        }
    }

    private func impossible(_ event: String, file: StaticString = #file, line: UInt = #line) -> Never {
        preconditionFailure(
            "UploadStateMachine: event \(event) is impossible in state \(stateName) "
                + "(logical upload \(logicalUploadID))", file: file, line: line)
    }

    private var stateName: String {
        switch state {
        case let .idle(phase, _, _): "idle(\(phase.rawValue))"
        case .creating: "creating"
        case .putting: "putting"
        case .reconciling: "reconciling"
        case .uploading: "uploading"
        case .completing: "completing"
        case .verifying: "verifying"
        case .aborting: "aborting"
        case let .done(outcome, _): "done(\(outcome))"
        }
    }

    private static func text(_ reason: FailReason) -> String {
        switch reason {
        case .notRetryable: "the server's error is not one that sending again can fix"
        case .recoveryDidNotHelp: "the one recovery allowed (clock, credentials or re-read) did not help"
        case let .attemptsExhausted(attempts): "all \(attempts) attempts failed"
        }
    }
}

/// Why an upload failed. Each message says what to do.
public enum UploadFailure: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    /// The server forgot the upload more often than allowed.
    case restartLimitExceeded(maxRestarts: Int)
    /// A request was given up; the owner reports the server's error next to this.
    case requestFailed(request: String, reason: String)
    /// After `Complete`, the object at the key is missing or not ours.
    case verificationFailed(expectedSize: Int64, foundSize: Int64?, foundFingerprint: Fingerprint?)
    /// After `Complete`, the server's digest of the object is not the one the parts sent
    /// add up to: some bytes differ from what was read from staging.
    case digestMismatch(String)

    public var description: String {
        switch self {
        case let .restartLimitExceeded(maxRestarts):
            let bound =
                maxRestarts == 0
                ? "and upload.max_restarts allows no new start"
                : "after it had been started over \(maxRestarts) time\(maxRestarts == 1 ? "" : "s"), "
                    + "the most upload.max_restarts allows"
            return "the server lost the multipart upload (NoSuchUpload) \(bound). "
                + "Check the bucket's lifecycle rules (AbortIncompleteMultipartUpload) and the server's health; "
                + "the file stays staged, run ingest rescan to try again."
        case let .requestFailed(request, reason):
            return "\(request) failed: \(reason). The file stays staged and resumes on the next run."
        case let .digestMismatch(detail):
            return "integrity error: the object's digest on the server does not match the parts sent (\(detail)). "
                + "The object is not trusted; the file stays staged. Check the server and the network path "
                + "(a proxy that rewrites bodies?), then run ingest resume."
        case let .verificationFailed(expectedSize, foundSize, foundFingerprint):
            let found =
                foundSize.map {
                    "an object of \($0) bytes with fingerprint \(foundFingerprint?.hex ?? "(none)")"
                } ?? "no object"
            return "after the upload completed the server has \(found) at the key, not the "
                + "\(expectedSize) bytes uploaded. Something else writes to this key, or the server lost the "
                + "object; check the bucket, the file stays staged."
        }
    }
}
