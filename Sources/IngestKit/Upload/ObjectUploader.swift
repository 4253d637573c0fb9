import Foundation
import Synchronization

/// How one upload ended, for the pipeline's summary and exit status.
public enum UploadResult: Sendable, Equatable {
    /// The object is in the bucket and verified. `alreadyThere`: nothing had to be sent.
    case uploaded(alreadyThere: Bool)
    case failed(UploadError)
    case aborted
    /// Left for later on a stop request: every acknowledged part is journalled, the upload
    /// stays pending and resumes from there.
    case interrupted
}

/// What one upload does to the bucket, the journal and the staged copy: each request, journal
/// write and read of the copy an upload's actions call for, performed and its result
/// returned. It decides nothing and drives nothing: ``UploadRun`` carries the actions of
/// ``UploadStateMachine`` here and the results back, and calls ``conclude(_:)`` with the end.
struct ObjectUploader: Sendable {
    private(set) var record: UploadRecord
    let client: any ObjectStore
    let journal: any UploadLog
    /// The staged copy the object is read from.
    let stagedPath: String
    let limiter: TransferLimiter
    let settings: UploadSettings
    let sink: any EventSink
    let hooks: FaultHooks
    /// Raised when the process is asked to stop: no new part is sent.
    let stop: StopFlag
    /// Where the staged copy goes once the object verified, when none is kept; nil: kept.
    let releases: StagedCopyReleases?
    /// The server honours `If-None-Match: *`. Every new object is written with it; a server
    /// that ignores it (``ConditionalWrites``) also gets a `HEAD` before each write, which
    /// leaves a race with another writer to the same key open there.
    let conditionalWrites: Bool
    /// Called once the object verified, before its completion is journalled: the file's slot
    /// (``UploadRunner``'s files in flight) goes to the next file then, so a completion
    /// waiting for its batch (``GroupCommit``) holds no upload back.
    var verified: (@Sendable () async -> Void)? = nil
    /// A copy (``copy(from:)``) larger than this is made in parts of ``copyPartSize``; tests
    /// lower both to copy in parts without 5 GiB objects.
    var singleCopyLimit = S3UploadLimits.maxSingleCopySize
    /// 1 GiB: 5 TiB, the largest object, in 5,120 parts, within S3's 10,000.
    var copyPartSize = S3UploadLimits.gibibyte

    // MARK: the key

    enum KeyState: Sendable {
        /// No object at the key.
        case free
        /// An object with this upload's size and fingerprint.
        case ours
        /// An object with other bytes.
        case taken(ObjectHead)
    }

    /// `HEAD` the key: free, ours, or taken by other bytes.
    ///
    /// `parts`: the digest the parts this upload completed add up to, when it sent a
    /// `Complete` whose answer may have been lost. An object whose fingerprint goes in its
    /// tag (``UploadRecord/fingerprintGoesInTag``) and has none yet is then ours if the
    /// server's digest of it is that one: it is tagged, and counts as ours.
    func lookAtKey(completedFrom parts: WholeObjectDigest? = nil) async -> Result<KeyState, UploadError> {
        let head: ObjectHead?
        do { head = try await client.headObject(key: record.key, checksumMode: parts?.needsChecksumMode ?? false) } catch {
            return .failure(UploadError(error, what: "HeadObject \(record.key)", target: record.target))
        }
        guard var head else { return .success(.free) }
        do {
            let found = try await client.recordedFingerprint(of: head, key: record.key)
            if head.size == record.size, found == record.fingerprint {
                // Unless a read-back found other bytes under a copy of our label there.
                let taken: Bool
                do { taken = try await journal.isKeyTaken(record.key, at: record.target) } catch {
                    return .failure(.journal(error))
                }
                if !taken { return .success(.ours) }
            }
            if head.size == record.size, found == nil, fingerprintMayBeInTag, parts?.check(head) == .matches {
                try await tagFingerprint()
                return .success(.ours)
            }
            // What holds the key, with its fingerprint wherever ingest recorded it (for `key_taken`).
            head.metadata[ObjectLabelKeys.fingerprint] = found
        } catch {
            return .failure(UploadError(error, what: "the tags of \(record.key)", target: record.target))
        }
        return .success(.taken(head))
    }

    /// The fingerprint of an object whose parts were sent while its file was read (see
    /// ``UploadRecord/fingerprintGoesInTag``): its `xxh128` tag. An object of our size
    /// without one is given it when it is proven ours: the server's digest of it is the
    /// one our parts make (their CRC32Cs come from the same read of the card as the
    /// fingerprint), or our `Complete` has just written it where the key was free
    /// (``UploadStateMachine/isConfirmingCompletion``). This is also what a run killed between the
    /// `Complete` and the tagging finds on resume.
    func taggedFingerprint(of head: ObjectHead, provenOurs: Bool) async throws(S3ClientError) -> String? {
        if let tagged = try await client.recordedFingerprint(of: head, key: record.key) { return tagged }
        guard provenOurs, head.size == record.size else { return nil }
        try await tagFingerprint()
        return record.fingerprint
    }

    /// An object of ours may carry its fingerprint in its `xxh128` tag rather than its
    /// metadata: its parts were streamed (``UploadRecord/fingerprintGoesInTag``), here or at
    /// another station whose upload this one took over (``handover(behind:passedOver:)``):
    /// the object has the metadata its upload was created with. Wherever tags can be set.
    var fingerprintMayBeInTag: Bool { record.fingerprintGoesInTag || client.capabilities.contains(.tagging) }

    /// Adds the `xxh128` tag to the object's tags (``UploadRecord/fingerprintGoesInTag``).
    func tagFingerprint() async throws(S3ClientError) {
        var tags = record.objectTags
        tags[ObjectLabelKeys.fingerprint] = record.fingerprint
        try await client.putObjectTagging(key: record.key, tags: tags)
    }

    /// How one attempt at a copy (``copyOnce(from:)``) ended.
    enum Attempt: Sendable {
        case done(UploadResult)
        /// The key holds an object with other bytes (found by `HEAD`, or by a `412`).
        case keyTaken(ObjectHead)
    }

    /// What a look at the key decides before a copy's write: nil when the key is free to write.
    static func decided(by look: Result<KeyState, UploadError>) -> Attempt? {
        switch look {
        case .failure(let error): .done(.failed(error))
        case .success(.ours): .done(.uploaded(alreadyThere: true))
        case .success(.taken(let head)): .keyTaken(head)
        case .success(.free): nil
        }
    }

    /// A copy's conditional write was refused (`412`): look at what holds the key.
    func afterPreconditionFailed() async -> Attempt {
        Self.decided(by: await lookAtKey()) ?? .done(.failed(refusedThenFree))
    }

    /// A conditional write was refused as taken (`412`), then the key had no object.
    var refusedThenFree: UploadError {
        UploadError(
            exitStatus: .partial, scope: .object,
            message: "\(record.key) in \(record.target.displayName) refused the write as taken (412), then had no "
                + "object: another writer is at work on this key. The file stays staged; run ingest resume.")
    }

    /// The key holds other bytes and is the file's alternative key already: nothing replaced.
    func keyTakenTwice(foundSize: Int64, foundFingerprint: String?) -> UploadError {
        UploadError(
            exitStatus: .integrity, scope: .object,
            message: "\(record.key) in \(record.target.displayName) holds other bytes (\(foundSize) bytes, fingerprint "
                + "\(foundFingerprint ?? "none")), and it is already the alternative key of \(record.sourceDisplay): "
                + "nothing was replaced, the file stays staged. Find out what writes there, then run ingest resume.")
    }

    /// The key is the file's alternative key already (or the record has no content to name one).
    var onAlternativeKey: Bool {
        record.contentFingerprint.map { record.key.contains("~" + $0.hex) } ?? true
    }

    /// This upload, started again from nothing at `key`.
    func restarted(atKey key: String) async -> Result<ObjectUploader, UploadError> {
        let moved: UploadRecord?
        do { moved = try await journal.restartUpload(id: record.id, key: key) } catch {
            return .failure(.journal(error))
        }
        guard let moved else {
            return .failure(UploadError(
                exitStatus: .software, scope: .object, message: "upload \(record.id) left the journal while it ran"))
        }
        var next = self
        next.record = moved
        return .success(next)
    }

    /// The key holds other bytes (`foundSize` of them, with this recorded fingerprint): the
    /// upload starts again from nothing at the file's alternative key, journalled first.
    func movedToAlternativeKey(foundSize: Int64, foundFingerprint: String?) async -> Result<ObjectUploader, UploadError> {
        guard let fingerprint = record.contentFingerprint else {
            return .failure(UploadError(
                exitStatus: .software, scope: .object, message: "\(record.key) has no content fingerprint to upload under"))
        }
        let alternative: String
        do { alternative = try KeyTemplate.alternativeKey(record.key, fingerprint: fingerprint) } catch {
            return .failure(UploadError(exitStatus: .dataError, scope: .object, message: "\(error)"))
        }
        sink.emit(.upload(.keyTaken(record, newKey: alternative, foundSize: foundSize, foundFingerprint: foundFingerprint ?? "none")))
        return await restarted(atKey: alternative)
    }

    // MARK: the staged copy

    /// What is wrong with a staged copy, re-read.
    enum StagedCopyProblem: Error {
        /// Reading it failed: gone (`ENOENT`), or a trouble that may pass (`EMFILE`,
        /// `ENOMEM`, `EIO` of a busy disk).
        case unreadable(SystemError)
        /// Re-read, it hashes to another fingerprint: proven wrong.
        case changed(found: Fingerprint)
    }

    /// Reads the staged copy once: checks its fingerprint and, in the same pass, computes its
    /// parts' CRC32Cs.
    func checkStagedCopy() async -> Result<PartChecksums?, StagedCopyProblem> {
        let path = stagedPath
        let checksummer = record.checksum == .crc32c ? PartChecksummer(partSize: record.partSize) : nil
        let found = await BlockingWorkers.shared.run { () -> Result<(Fingerprint, PartChecksums?), SystemError> in
            Result { () throws(SystemError) in try Fingerprint.ofFile(at: path, checksummer: checksummer) }
        }
        switch found {
        case .success(let (fingerprint, checksums)) where fingerprint.hex == record.fingerprint:
            return .success(checksums)
        case .success(let (fingerprint, _)):
            return .failure(.changed(found: fingerprint))
        case .failure(let error):
            return .failure(.unreadable(error))
        }
    }

    /// The staged copy is not there to upload from (``UploadStateMachine/Action/restage(_:uploadID:)``):
    /// the server's upload `uploadID` is aborted, a changed copy is moved aside (never
    /// uploaded, never deleted by ingest), and the files go back to pending, so the next
    /// ingest of the card copies them afresh. Returns what to report: `.integrity` when the
    /// copy was proven wrong, `.partial` when it is only missing (the files need their card
    /// again); fails with the journal's error.
    func restage(_ trouble: UploadStateMachine.StagedCopyTrouble, uploadID: String?) async -> Result<UploadError, UploadError> {
        let problem: String
        var aside: String?
        let exitStatus: ExitStatus
        switch trouble {
        case .changed(let found):
            aside = StagingArea.moveAside(stagedPath)
            problem = "the staged copy \(stagedPath) no longer has its fingerprint (it reads as \(found.hex), "
                + "the card's bytes made \(record.fingerprint))"
            exitStatus = .integrity
        case .gone, .unreadable, .refusedByServer:
            problem = "the staged copy \(stagedPath) is gone and \(record.key) is not in \(record.target.displayName)"
            exitStatus = .partial
        }
        if let uploadID {
            try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
        }
        let kept = aside.map { " The copy was moved to \($0), kept for inspection: delete it when done." } ?? ""
        let message = "\(problem). The upload was dropped and the file is pending again: "
            + "ingest the card again to copy it afresh.\(kept)"
        do { try await journal.restage(uploadID: record.id, reason: message) } catch {
            return .failure(.journal(error))
        }
        return .success(UploadError(exitStatus: exitStatus, scope: .object, message: message))
    }

    // MARK: the end

    /// Journals the outcome; lets the staged copy go when nothing is to be kept. A failure to
    /// reach the server while the process is stopping is the stop's own cut of the transfers
    /// (``CurlTransport/cut()``): the upload is left for later, not failed (a real failure
    /// shows again when it resumes).
    func conclude(_ result: UploadResult) async -> UploadResult {
        if case .failed(let error) = result, stop.isRaised, error.exitStatus == .unavailable { return .interrupted }
        switch result {
        case .uploaded(let alreadyThere):
            await verified?()
            let releasable: Fingerprint?
            do {
                releasable = try await journal.completeUpload(id: record.id, etag: nil, releasingStagedCopy: releases != nil)
            } catch {
                return .failed(.journal(error))
            }
            sink.emit(.upload(.completed(record, alreadyThere: alreadyThere)))
            if let releasable { await releases?.release(releasable, size: record.size) }
        case .failed(let error):
            let quarantined = try? await journal.noteFailure(
                error.message, ofUpload: record.id, quarantineAfter: settings.quarantineAfter)
            if quarantined == true { sink.emit(.upload(.quarantined(record, failures: record.failures + 1))) }
            sink.emit(.upload(.failed(record, error)))
        case .aborted:
            sink.emit(.upload(.aborted(record)))
        case .interrupted:
            break
        }
        return result
    }
}
