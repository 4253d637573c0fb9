/// The upload's own life: how it starts, the single PUT, the multipart upload's creation,
/// parts and reconciliation, restarts after `NoSuchUpload`, and the abort.
extension UploadStateMachine {

    /// Begin, or resume where the snapshot left off, as `opening` says.
    ///
    /// - ``Opening/resumed``: the staged copy is checked first, then as ``Opening/fresh``;
    /// - ``Opening/confirming``: the key is looked at (the journal says the object is there);
    /// - ``Opening/fresh``: nothing on the server yet, the key is looked at first where the
    ///   write would not find it taken in time: before a multipart upload's parts are sent,
    ///   and before any write on a server that ignores `If-None-Match`; then as journalled;
    /// - ``Opening/asJournalled``:
    ///   - new, or resumed without an upload id: create the upload;
    ///   - resumed with an upload id (initiated, uploading, failed): list the server's parts
    ///     to reconcile them with the journal;
    ///   - resumed in completing or completed: look for the object first, since the last
    ///     run may have completed it and been killed before its journal said so;
    ///   - resumed in aborting: finish the abort; resumed aborted: nothing to do.
    public mutating func start(_ opening: Opening = .asJournalled) -> [Action] {
        switch (state, opening) {
        case let (.idle(phase, uploadID, _), .resumed):
            state = .checkingStagedCopy(.resume, phase: phase, uploadID: uploadID)
            return [.checkStagedCopy]
        case let (.idle(phase, uploadID, _), .confirming):
            state = .lookingAtKey(.confirming, phase: phase, uploadID: uploadID)
            return [.lookAtKey(.confirming)]
        case (.idle, .fresh):
            return startFresh()
        case (.done(.aborted, _), _):
            return [.finish(.aborted)]
        case (.idle, .asJournalled):
            return startAsJournalled()
        default:
            impossible("start")
        }
    }

    /// ``start(_:)`` of a fresh upload: the look at the key first where it is needed.
    mutating func startFresh() -> [Action] {
        guard case let .idle(phase, uploadID, _) = state else { impossible("start") }
        if phase == .created, uploadID == nil, !plan.isSinglePut || !configuration.conditionalWrites {
            state = .lookingAtKey(.beforeWriting, phase: phase, uploadID: uploadID)
            return [.lookAtKey(.beforeWriting)]
        }
        return startAsJournalled()
    }

    /// ``start(_:)`` as the journal has it.
    mutating func startAsJournalled() -> [Action] {
        guard case let .idle(phase, uploadID, _) = state else { impossible("start") }
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
    }

    /// A single PUT begins: new, it is sent at once; resumed in another phase (a journal
    /// of an older version), the object is looked for first.
    ///
    /// Nothing is journalled before the `PutObject`: it writes only where the key is free
    /// (`If-None-Match: *`), so a run killed once it landed is answered `412` by the next
    /// run's write, whose owner then looks at the key and finds the object its own; a
    /// server that ignores conditional writes gets that look before every write anyway.
    /// A small file then costs one journal write, its completion.
    mutating func startSinglePut(phase: Phase) -> [Action] {
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
        case .streamCreating:
            return streamCreated(uploadID: uploadID)
        default:
            impossible("uploadCreated")
        }
    }

    /// Asked to create an upload, the owner found one in progress at the key instead, whose
    /// sender stopped sending it (another station with the same card, or a process of this
    /// one killed before journalling it): it is taken over. Its parts are listed, and each is
    /// kept only when it proves to hold this file's bytes (``partsListed(_:adopted:)``); the
    /// journal records the upload before a part is sent. A stream takes over nothing: its
    /// file goes the ordinary way once staged.
    public mutating func uploadFound(uploadID: String) -> [Action] {
        switch state {
        case .creating:
            clearParts()
            state = .reconciling(uploadID: uploadID)
            return [.listParts(uploadID: uploadID)]
        case .streamCreating:
            return finish(.notStreamed)
        case .done(.aborted, _):
            // Given up meanwhile: the upload found is its sender's, left alone.
            return []
        default:
            impossible("uploadFound")
        }
    }

    /// The upload in progress the owner found at the key ended while it was waited for (its
    /// sender completed or abandoned it): the key is looked at again before anything is
    /// created.
    public mutating func foundUploadEnded() -> [Action] {
        switch state {
        case .creating:
            state = .lookingAtKey(.beforeWriting, phase: .created, uploadID: nil)
            return [.lookAtKey(.beforeWriting)]
        case .streamCreating:
            return finish(.notStreamed)
        case .done(.aborted, _):
            return []
        default:
            impossible("foundUploadEnded")
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
        if case .streaming = state { return streamedPartAnswered(uploadID: uploadID, number: number, etag: etag, digest: digest) }
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
        if case .streaming = state { return streamedPartAnswered(uploadID: uploadID, number: number, etag: nil, digest: nil) }
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

    /// A part's bytes could not be read from the staged copy, or the server refused them as
    /// not the card's (``stagedCopyFailed(_:)``).
    public mutating func partFailed(uploadID: String, number: Int, trouble: StagedCopyTrouble) -> [Action] {
        guard case .uploading(let current, _, let inFlight) = state, current == uploadID else {
            return staleOrImpossible("partFailed(part \(number), \(trouble))", uploadID: uploadID)
        }
        guard inFlight.contains(number) else { impossible("partFailed(part \(number), which is not in flight)") }
        return stagedCopyFailed(trouble)
    }

    /// A request other than a part or `Complete` (`CreateMultipartUpload`, `ListParts`,
    /// `HeadObject`, `AbortMultipartUpload`) was given up.
    public mutating func requestFailed(_ decision: RetryDecision) -> [Action] {
        let request: String
        switch state {
        case .creating: request = "CreateMultipartUpload"
        case .reconciling: request = "ListParts"
        case .verifying, .lookingAtKey: request = "HeadObject"
        case .aborting, .streamAborting: request = "AbortMultipartUpload"
        case .streamCreating: return finish(.notStreamed)
        default: impossible("requestFailed(\(decision))")
        }
        if case let .lookingAtKey(look, _, uploadID) = state {
            return keyLookFailed(look, uploadID: uploadID, decision)
        }
        if case .streamAborting = state, case let .fail(reason) = decision {
            // The stream stays in the journal: the next process to recover streams aborts it.
            let failure = UploadFailure.requestFailed(request: request, reason: Self.text(reason))
            state = .done(.failed(failure), uploadID: uploadID)
            return [.finish(.failed(failure))]
        }
        switch decision {
        case .restartUpload:
            switch state {
            case .reconciling: return restart()
            case .aborting, .streamAborting: return abortConfirmed()
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
        case let .aborting(current) where current == uploadID, let .streamAborting(current) where current == uploadID:
            return abortConfirmed()
        default:
            return staleOrImpossible("uploadGone", uploadID: uploadID)
        }
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
    /// - A stream whose copy ended: its upload is aborted, with no snapshot (the stream's
    ///   record is its journal).
    public mutating func abortRequested() -> [Action] {
        switch state {
        case .idle(.completed, _, _):
            return []
        case let .idle(_, uploadID?, _), let .reconciling(uploadID), let .uploading(uploadID, _, _),
            let .done(.failed, uploadID?):
            return beginAborting(uploadID)
        case .idle(_, nil, _), .creating, .done(.failed, nil):
            return finish(.aborted)
        case let .streamed(uploadID), let .handedOff(uploadID):
            state = .streamAborting(uploadID: uploadID)
            return [.abort(uploadID: uploadID)]
        case .streamCreating, .streamBeginning, .streaming:
            impossible("abortRequested (a stream is aborted once its copy ended)")
        case .completing, .putting, .verifying, .aborting, .streamAborting, .done, .checkingStagedCopy, .lookingAtKey,
            .startingAgain, .restaging, .interrupted:
            return []
        }
    }

    /// The server confirmed the abort (or answered `NoSuchUpload` to it).
    public mutating func abortConfirmed() -> [Action] {
        switch state {
        case .aborting: return finish(.aborted)
        case .streamAborting:
            // The stream's record is its journal: the owner ends it, no snapshot is kept.
            state = .done(.aborted, uploadID: nil)
            return [.finish(.aborted)]
        case .done(.aborted, _): return []  // a late confirmation of a cleanup abort
        default: impossible("abortConfirmed")
        }
    }

    // MARK: transitions

    /// Parts to send now: the smallest numbers still queued, up to the window.
    mutating func sendMore() -> [Action] {
        guard case .uploading(let uploadID, var queue, var inFlight) = state else { return [] }
        var batch: [Int] = []
        while inFlight.count < configuration.partsInFlight, let next = queue.popLast() {
            inFlight.insert(next)
            batch.append(next)
        }
        state = .uploading(uploadID: uploadID, queue: queue, inFlight: inFlight)
        return batch.isEmpty ? [] : [.sendParts(uploadID: uploadID, parts: batch)]
    }

    mutating func beginPutting() -> [Action] {
        clearParts()
        state = .putting
        return [.putObject]
    }

    /// Every part is acknowledged: journal `completing`, then `Complete`; on a server that
    /// ignores `If-None-Match`, the key is looked at once first.
    mutating func beginCompleting(_ uploadID: String) -> [Action] {
        state = .completing(uploadID: uploadID)
        let persisted = Action.persist(snapshot)
        if !configuration.conditionalWrites {
            state = .lookingAtKey(.beforeComplete, phase: .completing, uploadID: uploadID)
            return [persisted, .lookAtKey(.beforeComplete)]
        }
        return [persisted, .complete(uploadID: uploadID, parts: acknowledgedParts)]
    }

    mutating func beginAborting(_ uploadID: String) -> [Action] {
        state = .aborting(uploadID: uploadID)
        return [.persist(snapshot), .abort(uploadID: uploadID)]
    }

    /// The object is not (or not ours) where a completed upload would have put it.
    mutating func afterObjectMissing(uploadID: String?, purpose: VerifyPurpose) -> [Action] {
        switch purpose {
        case .completeLostUpload:
            // Looked for just now: created again at once.
            return restart(lookingFirst: false)
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
    /// `lookingFirst`: the key is looked at before the new upload is created, since the
    /// upload may be gone because its object was completed (by another station that took
    /// it over too); false when the object was just looked for.
    mutating func restart(lookingFirst: Bool = true) -> [Action] {
        guard restartCount < configuration.maxRestarts else {
            return fail(.restartLimitExceeded(maxRestarts: configuration.maxRestarts))
        }
        restartCount += 1
        clearParts()
        guard lookingFirst else {
            state = .creating
            return [.persist(snapshot), .createUpload]
        }
        state = .lookingAtKey(.beforeWriting, phase: .created, uploadID: nil)
        return [.persist(snapshot), .lookAtKey(.beforeWriting)]
    }

}
