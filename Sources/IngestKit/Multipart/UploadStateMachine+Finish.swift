/// The end of an upload: `Complete`, the look at the object that verifies it, the look at
/// the key and what it decides (ours, free, taken: the alternative key), the staged copy's
/// troubles, a stop, and how each ends.
extension UploadStateMachine {
    /// `CompleteMultipartUpload` succeeded (with no `<Error>` in its 200): journal it, then
    /// check the object. `etag`: the answer's, nil where it named none (Ceph RGW 16 sends
    /// `<ETag></ETag>`): the check of the object does not need it.
    public mutating func completed(etag: String?) -> [Action] {
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
    /// Accepted before ``start(_:)`` too, when the owner looked for the object itself.
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
                if let digestMismatch, isOurLabelOrNone(size: size, fingerprint: found) {
                    return failStillCompleting(.digestMismatch(digestMismatch))
                }
                return fail(.verificationFailed(expectedSize: plan.fileSize, foundSize: size, foundFingerprint: found))
            case .resumeAfterComplete, .completeLostUpload:
                if ours { return finish(.alreadyUploaded) }
                // The object our `Complete` may have made, whose digest is not what our parts
                // make: a proof that failed, not a key taken by other bytes. It is neither
                // replaced nor left for an alternative key; the failure says what to look at.
                if let digestMismatch, isOurLabelOrNone(size: size, fingerprint: found) {
                    return failStillCompleting(.digestMismatch(digestMismatch))
                }
                return afterObjectMissing(uploadID: uploadID, purpose: purpose)
            }
        default:
            impossible("objectAlreadyExists")
        }
    }

    /// Whether an object of `size` with this recorded fingerprint carries our label, or none
    /// yet (a streamed upload's fingerprint is tagged after its object is proven).
    private func isOurLabelOrNone(size: Int64, fingerprint found: Fingerprint?) -> Bool {
        size == plan.fileSize && (found == nil || found == fingerprint)
    }

    /// `HeadObject` found nothing at the key.
    public mutating func objectNotFound() -> [Action] {
        guard case let .verifying(uploadID, purpose) = state else { impossible("objectNotFound") }
        if case .confirmCompleted = purpose {
            return fail(.verificationFailed(expectedSize: plan.fileSize, foundSize: nil, foundFingerprint: nil))
        }
        return afterObjectMissing(uploadID: uploadID, purpose: purpose)
    }

    // MARK: the key

    /// The look at the key found nothing there.
    public mutating func keyFree() -> [Action] {
        guard case let .lookingAtKey(look, phase, uploadID) = state else { impossible("keyFree") }
        switch look {
        case .beforeWriting:
            state = .idle(phase: phase, uploadID: uploadID, failure: nil)
            return startAsJournalled()
        case .confirming:
            // The object the journal counted on is gone: the content goes again, to the same key.
            state = .startingAgain(alternative: false)
            return [.startAgain(.same)]
        case .beforeComplete:
            guard let uploadID else { impossible("keyFree (no upload to complete)") }
            state = .completing(uploadID: uploadID)
            return [.complete(uploadID: uploadID, parts: acknowledgedParts)]
        case .afterRefusedPut, .afterRefusedComplete:
            state = .done(.failed(.refusedThenFree), uploadID: nil)
            return [.finish(.failed(.refusedThenFree))]
        case .stagedCopyGone:
            return beginRestaging(.gone, uploadID: uploadID)
        case .beforeStream:
            state = .streamCreating
            return [.createUpload]
        }
    }

    /// The key holds this upload's bytes: its size, and its fingerprint wherever ingest
    /// records it.
    public mutating func keyOurs() -> [Action] {
        guard case let .lookingAtKey(look, _, uploadID) = state else { impossible("keyOurs") }
        switch look {
        case .beforeStream:
            return finish(.notStreamed)
        case .beforeComplete:
            guard let uploadID else { impossible("keyOurs (no upload to complete)") }
            return [.discard(uploadID: uploadID)] + finish(.foundAtKey)
        case .beforeWriting, .confirming, .afterRefusedPut, .afterRefusedComplete, .stagedCopyGone:
            return finish(.foundAtKey)
        }
    }

    /// The key holds other bytes: `size` of them, with this recorded fingerprint (nil: none).
    /// Nothing is ever replaced: the upload starts again at the file's alternative key,
    /// unless the key is that one already.
    public mutating func keyTaken(size: Int64, fingerprint found: String?) -> [Action] {
        guard case let .lookingAtKey(look, _, uploadID) = state else { impossible("keyTaken") }
        switch look {
        case .beforeStream:
            // What holds the key is the ordinary way's to decide on, once the file is staged.
            return finish(.notStreamed)
        case .stagedCopyGone:
            return beginRestaging(.gone, uploadID: uploadID)
        case .beforeComplete:
            guard let uploadID else { impossible("keyTaken (no upload to complete)") }
            return [.discard(uploadID: uploadID)] + moveAside(foundSize: size, foundFingerprint: found)
        case .beforeWriting, .confirming, .afterRefusedPut, .afterRefusedComplete:
            return moveAside(foundSize: size, foundFingerprint: found)
        }
    }

    /// The journal started the upload again from nothing (``Action/startAgain(_:)``): it goes
    /// on as a fresh upload, the key looked at first where needed.
    public mutating func startedAgain() -> [Action] {
        guard case let .startingAgain(alternative) = state else { impossible("startedAgain") }
        if alternative { onAlternativeKey = true }
        clearParts()
        state = .idle(phase: .created, uploadID: nil, failure: nil)
        return startFresh()
    }

    /// A conditional write (`PutObject` or `Complete` with `If-None-Match: *`) was refused
    /// (`412`): something holds the key. A refused `Complete`'s upload is discarded, and
    /// the key looked at: it may be ours, written by an attempt whose answer was lost.
    public mutating func writeRefused() -> [Action] {
        switch state {
        case .putting:
            state = .lookingAtKey(.afterRefusedPut, phase: .created, uploadID: nil)
            return [.lookAtKey(.afterRefusedPut)]
        case let .completing(uploadID):
            state = .lookingAtKey(.afterRefusedComplete, phase: .completing, uploadID: nil)
            return [.discard(uploadID: uploadID), .lookAtKey(.afterRefusedComplete)]
        default:
            impossible("writeRefused")
        }
    }

    /// The look at the key was given up (``requestFailed(_:)``): a stream does not start, a
    /// copy gone is given up for its card, anything else fails as the journal has it.
    mutating func keyLookFailed(_ look: KeyLook, uploadID: String?, _ decision: RetryDecision) -> [Action] {
        switch look {
        case .beforeStream:
            return finish(.notStreamed)
        case .stagedCopyGone:
            return beginRestaging(.gone, uploadID: uploadID)
        case .beforeWriting, .confirming, .beforeComplete, .afterRefusedPut, .afterRefusedComplete:
            guard case let .fail(reason) = decision else { impossible("requestFailed(\(decision))") }
            let failure = UploadFailure.requestFailed(request: "HeadObject", reason: Self.text(reason))
            state = .done(.failed(failure), uploadID: uploadID)
            return [.finish(.failed(failure))]
        }
    }

    /// The key holds other bytes: to the alternative key, or failed on it already.
    mutating func moveAside(foundSize: Int64, foundFingerprint: String?) -> [Action] {
        let decided = Self.afterKeyTaken(onAlternativeKey: onAlternativeKey, foundSize: foundSize, foundFingerprint: foundFingerprint)
        if case let .finish(.failed(failure)) = decided {
            state = .done(.failed(failure), uploadID: nil)
        } else {
            state = .startingAgain(alternative: true)
        }
        return [decided]
    }

    /// What a key that holds other bytes (`foundSize` of them, with this recorded
    /// fingerprint) decides: the file's alternative key, or, on that key already, a failure
    /// that replaces nothing. The rule of ``keyTaken(size:fingerprint:)``, and of a
    /// server-side copy, which has no upload of its own to drive.
    public static func afterKeyTaken(onAlternativeKey: Bool, foundSize: Int64, foundFingerprint: String?) -> Action {
        onAlternativeKey
            ? .finish(.failed(.keyTakenTwice(foundSize: foundSize, foundFingerprint: foundFingerprint)))
            : .startAgain(.alternative(foundSize: foundSize, foundFingerprint: foundFingerprint))
    }

    // MARK: the staged copy

    /// The staged copy still has its fingerprint; `checksums`: its parts' CRC32Cs, computed
    /// in the same read. After a resume, the journalled parts whose digest is not the
    /// copy's for their range are forgotten (sent from other bytes: a stream adopted after
    /// a kill, of a file staged afresh since), and the upload goes on as a fresh one. After
    /// the server refused its bytes twice, the copy is right and the way to the server is
    /// not: the upload fails, the copy kept.
    public mutating func stagedCopyChecked(_ checksums: PartChecksums?) -> [Action] {
        guard case let .checkingStagedCopy(purpose, phase, uploadID) = state else { impossible("stagedCopyChecked") }
        switch purpose {
        case .resume:
            if let checksums {
                for number in plan.partNumbers {
                    guard let journalled = acknowledged[number]?.digest,
                        let staged = checksums.digest(ofPart: number, partSize: checksums.partSize)
                    else { continue }
                    if staged.journalText != journalled { acknowledged[number] = nil }
                }
            }
            state = .idle(phase: phase, uploadID: uploadID, failure: nil)
            return startFresh()
        case let .refused(part):
            let failure = UploadFailure.stagedCopy(.refusedByServer(part: part))
            state = .done(.failed(failure), uploadID: uploadID)
            return [.finish(.failed(failure))]
        }
    }

    /// The staged copy cannot be used: gone, the object may be there anyway (a run cut off
    /// after its upload verified may have lost the journal's word of it, not the object),
    /// else the upload is dropped and its files go back to their card; proven changed, it
    /// is dropped; unreadable now, the upload fails and the copy is kept for the next run;
    /// its bytes refused by the server, the copy is re-read to tell the copy from the way.
    ///
    /// A staged copy may be the only copy left once the card is formatted, so it is given
    /// up only when proven wrong. Parts still on the wire are dropped first.
    public mutating func stagedCopyFailed(_ trouble: StagedCopyTrouble) -> [Action] {
        let phase = self.phase
        let uploadID = self.uploadID
        var actions: [Action] = []
        switch state {
        case .uploading: actions = [.cancelParts]
        case .checkingStagedCopy:
            if case .refusedByServer = trouble { impossible("stagedCopyFailed(\(trouble)) (a check of the copy sends nothing)") }
        case .putting: break
        default: impossible("stagedCopyFailed(\(trouble))")
        }
        switch trouble {
        case .gone:
            state = .lookingAtKey(.stagedCopyGone, phase: phase, uploadID: uploadID)
            return actions + [.lookAtKey(.stagedCopyGone)]
        case .changed:
            return actions + beginRestaging(trouble, uploadID: uploadID)
        case .unreadable:
            let failure = UploadFailure.stagedCopy(.unreadable)
            state = .done(.failed(failure), uploadID: uploadID)
            return actions + [.finish(.failed(failure))]
        case .refusedByServer:
            guard case let .refusedByServer(part) = trouble else { return actions }
            state = .checkingStagedCopy(.refused(part: part), phase: phase, uploadID: uploadID)
            return actions + [.checkStagedCopy]
        }
    }

    /// The upload was dropped for its staged copy (``Action/restage(_:uploadID:)``).
    public mutating func restaged() -> [Action] {
        guard case let .restaging(trouble) = state else { impossible("restaged") }
        state = .done(.restaged(trouble), uploadID: nil)
        return [.finish(.restaged(trouble))]
    }

    mutating func beginRestaging(_ trouble: StagedCopyTrouble, uploadID: String?) -> [Action] {
        clearParts()
        state = .restaging(trouble)
        return [.restage(trouble, uploadID: uploadID)]
    }

    // MARK: stops and the owner's failures

    /// The process is stopping, and the owner has let the requests on the wire end: the
    /// upload is left as the journal has it, and resumes from there. A stream only stops
    /// sending: its copy's end decides what becomes of it.
    public mutating func stopped() -> [Action] {
        if case .streaming = state { return streamStopped() }
        let (phase, uploadID) = (self.phase, self.uploadID)
        state = .interrupted(phase: phase, uploadID: uploadID)
        return [.finish(.interrupted)]
    }

    /// An action of the owner's own failed (a journal write, a local step): the upload
    /// fails as it is, with the owner's words for why, and nothing is persisted (the
    /// journal keeps what it last took). A stream not yet journalled is aborted.
    public mutating func ownerFailed() -> [Action] {
        if case let .streamBeginning(uploadID) = state {
            state = .streamAborting(uploadID: uploadID)
            return [.abort(uploadID: uploadID)]
        }
        let uploadID = self.uploadID
        state = .done(.failed(.ownerFailed), uploadID: uploadID)
        return [.finish(.failed(.ownerFailed))]
    }

    // MARK: endings

    mutating func fail(_ failure: UploadFailure) -> [Action] {
        finish(.failed(failure))
    }

    /// Fails the look at an object our `Complete` (or single PUT) may have made, journalled
    /// `completing` with its parts: the next run looks at the object and checks its digest
    /// again. Journalled `failed`, it would list the parts of an upload that is gone (or PUT
    /// again) and take the object at the key for ours on its label alone.
    mutating func failStillCompleting(_ failure: UploadFailure) -> [Action] {
        guard case .verifying = state else { impossible("failStillCompleting") }
        let completing = snapshot
        state = .done(.failed(failure), uploadID: uploadID)
        return [.persist(completing), .finish(.failed(failure))]
    }

    mutating func finish(_ outcome: Outcome) -> [Action] {
        switch outcome {
        case .failed:
            // Parts and upload id stay, so a later run can reconcile or abort.
            state = .done(outcome, uploadID: uploadID)
        case .aborted:
            clearParts()
            state = .done(outcome, uploadID: nil)
        case .uploaded, .alreadyUploaded, .foundAtKey, .notStreamed, .restaged, .interrupted:
            state = .done(outcome, uploadID: nil)
            return [.finish(outcome)]
        }
        return [.persist(snapshot), .finish(outcome)]
    }

    mutating func clearParts() {
        for index in acknowledged.indices { acknowledged[index] = nil }
    }

    /// An event naming another upload id, or a part answer after the machine stopped
    /// waiting for parts, is a stale answer; anything else is impossible.
    func staleOrImpossible(_ event: String, uploadID: String) -> [Action] {
        switch state {
        case .done, .aborting, .creating, .interrupted, .checkingStagedCopy, .lookingAtKey, .startingAgain, .restaging,
            .streamAborting:
            return []
        default:
            if let current = self.uploadID, current != uploadID { return [] }
            impossible(event)
        }
    }
}
