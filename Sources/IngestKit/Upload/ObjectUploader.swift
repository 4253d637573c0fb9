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
        /// An object with this upload's size and fingerprint, as this look found it.
        case ours(ObjectHead)
        /// An object with other bytes.
        case taken(ObjectHead)
    }

    /// `HEAD` the key: free, ours, or taken by other bytes.
    ///
    /// An object of our size that carries no fingerprint (neither in its metadata nor in its
    /// `xxh128` tag) is not taken for other bytes on that alone: a run killed between a
    /// `Complete` and its tagging leaves one, and so did the copies of streamed files made
    /// before every copy carried its fingerprint. It is ours when what the server says of it
    /// proves it (``proofOfOurs(_:completedFrom:copiedFrom:)``); it is then given its
    /// fingerprint's tag where the destination tags objects, and counts as ours.
    ///
    /// `parts`: the digest the parts this upload completed add up to, when it sent a
    /// `Complete` whose answer may have been lost. `source`: the verified upload a copy is
    /// made from (``copyOnce(from:)``).
    ///
    /// A label is not a proof: an object the journal knows is not ours (another ETag than the
    /// one its completion recorded, ``UploadLog/isForeign(key:etag:target:)``), or that
    /// differs from what this upload's completion recorded, is taken, whatever metadata it
    /// carries.
    func lookAtKey(completedFrom parts: WholeObjectDigest? = nil, copiedFrom source: UploadRecord? = nil) async
        -> Result<KeyState, UploadError>
    {
        let head: ObjectHead?
        do { head = try await client.headObject(key: record.key, checksumMode: parts?.needsChecksumMode ?? false) } catch {
            return .failure(UploadError(error, what: "HeadObject \(record.key)", target: record.target))
        }
        guard var head else { return .success(.free) }
        do {
            let found = try await client.recordedFingerprint(of: head, key: record.key)
            head.metadata[ObjectLabelKeys.fingerprint] = found
            if try await provenNotOurs(head) { return .success(.taken(head)) }
            if head.size == record.size, found == record.fingerprint { return .success(.ours(head)) }
            if head.size == record.size, found == nil,
                try await proofOfOurs(head, completedFrom: parts, copiedFrom: source) != nil
            {
                if client.capabilities.contains(.tagging) { try await tagFingerprint() }
                head.metadata[ObjectLabelKeys.fingerprint] = record.fingerprint
                return .success(.ours(head))
            }
        } catch let error as JournalError {
            return .failure(.journal(error))
        } catch let error as S3ClientError {
            return .failure(UploadError(error, what: "the tags of \(record.key)", target: record.target))
        } catch {
            return .failure(UploadError(exitStatus: .software, scope: .object, message: "\(error)"))
        }
        // What holds the key, with its fingerprint wherever ingest recorded it (for `key_taken`).
        return .success(.taken(head))
    }

    /// The object at the key is not this upload's, whatever its label says: its completion
    /// recorded another object there, or a check proved this one foreign.
    private func provenNotOurs(_ head: ObjectHead) async throws(JournalError) -> Bool {
        guard let etag = head.etag else { return record.etag != nil }
        if let recorded = record.etag, ETag.unquoted(recorded) != ETag.unquoted(etag) { return true }
        return try await journal.isForeign(key: record.key, etag: etag, target: record.target)
    }

    /// What proves an object of our size without a fingerprint ours.
    enum ProofOfOurs: Sendable, Equatable {
        /// The server's digest of it is the one the parts this upload completed make.
        case completedParts
        /// Its ETag is the one the journal recorded when this upload completed.
        case recordedETag
        /// The server's digest of it is the one the staged copy's parts make (their CRC32Cs,
        /// cut as the upload cut them): the content, sent before this run.
        case stagedCopy
        /// It is a copy of `source`, the content's verified upload: the server gives both
        /// the same ETag or the same checksum, and the source carries our fingerprint.
        case copyOfSource
    }

    /// Why the object `head` describes at the key, of our size and with no fingerprint
    /// recorded, is ours; nil when nothing proves it (then it is other bytes, and nothing of
    /// it is replaced). Each proof is what the server said of the bytes it holds, never a
    /// label: cheapest first, the staged copy read only when nothing else answers.
    func proofOfOurs(
        _ head: ObjectHead, completedFrom parts: WholeObjectDigest?, copiedFrom source: UploadRecord?
    ) async throws(S3ClientError) -> ProofOfOurs? {
        if parts?.check(head) == .matches { return .completedParts }
        if let recorded = record.etag, let etag = head.etag, ETag.unquoted(recorded) == ETag.unquoted(etag) { return .recordedETag }
        // The server's checksums are given only when asked for.
        var described = head
        if described.checksumCRC32C == nil, let again = try await client.headObject(key: record.key, checksumMode: true) {
            described = again
        }
        guard described.size == record.size else { return nil }
        if let source, try await isCopy(described, of: source) { return .copyOfSource }
        if !record.isCopy, let expected = await stagedCopyDigest(), expected.check(described) == .matches { return .stagedCopy }
        return nil
    }

    /// Whether the object `head` describes holds `source`'s bytes: `source` is in the bucket
    /// with our size and fingerprint, and the server gives both objects one ETag or one
    /// CRC32C (a server-side copy keeps them on SeaweedFS, and on S3 for a single-part
    /// source). A checksum of one kind only on one side proves nothing.
    private func isCopy(_ head: ObjectHead, of source: UploadRecord) async throws(S3ClientError) -> Bool {
        guard source.fingerprint == record.fingerprint, source.key != record.key,
            let original = try await client.headObject(key: source.key, checksumMode: true), original.size == head.size,
            try await client.recordedFingerprint(of: original, key: source.key) == record.fingerprint
        else { return false }
        if let mine = head.etag, let theirs = original.etag, ETag.unquoted(mine) == ETag.unquoted(theirs) { return true }
        if let mine = head.checksumCRC32C, let theirs = original.checksumCRC32C, mine == theirs { return true }
        return false
    }

    /// What the server's digest of this upload's object must be, from the staged copy: the
    /// CRC32Cs of its parts journalled when the card was read, or else computed by reading
    /// the copy (whose fingerprint is checked in the same pass). Nil when the upload sends
    /// no CRC32C, or the copy cannot be read or no longer has its fingerprint.
    private func stagedCopyDigest() async -> WholeObjectDigest? {
        guard record.checksum == .crc32c, let plan = try? PartPlan.recorded(fileSize: record.size, partSize: record.partSize)
        else { return nil }
        let checksums: PartChecksums
        if let journalled = record.partChecksums, journalled.partSize == record.partSize {
            checksums = journalled
        } else {
            guard case .success(let read?) = await checkStagedCopy() else { return nil }
            checksums = read
        }
        let digests = plan.partNumbers.compactMap { checksums.digest(ofPart: $0, partSize: record.partSize) }
        guard digests.count == plan.partCount, !digests.isEmpty else { return nil }
        return plan.isSinglePut
            ? .expected(singlePut: digests[0]) : .expected(parts: digests, lengths: plan.partNumbers.map(plan.length(ofPart:)))
    }

    /// This performer, acting for `other`: the upload a copy is made from, looked at and
    /// tagged with the same client, journal and staged copy (one content, one copy).
    func acting(for other: UploadRecord) -> ObjectUploader {
        var performer = self
        performer.record = other
        return performer
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
        /// The object at the key is this file's, found as `object` (nil where the destination
        /// keeps no object of its own for it); `alreadyThere`: nothing was written.
        case verified(alreadyThere: Bool, object: StoredObject?)
        /// The key holds an object with other bytes (found by `HEAD`, or by a `412`).
        case keyTaken(ObjectHead)
    }

    /// What a look at the key decides before a copy's write: nil when the key is free to write.
    static func decided(by look: Result<KeyState, UploadError>) -> Attempt? {
        switch look {
        case .failure(let error): .done(.failed(error))
        case .success(.ours(let head)): .verified(alreadyThere: true, object: StoredObject(head))
        case .success(.taken(let head)): .keyTaken(head)
        case .success(.free): nil
        }
    }

    /// A copy's conditional write was refused (`412`): look at what holds the key.
    func afterPreconditionFailed(copiedFrom source: UploadRecord) async -> Attempt {
        Self.decided(by: await lookAtKey(copiedFrom: source)) ?? .done(.failed(refusedThenFree))
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
    ///
    /// `object`: the identity of the object an `.uploaded` result verified, recorded with the
    /// completion (``StoredObject``).
    func conclude(_ result: UploadResult, object: StoredObject? = nil) async -> UploadResult {
        if case .failed(let error) = result, stop.isRaised, error.exitStatus == .unavailable { return .interrupted }
        switch result {
        case .uploaded(let alreadyThere):
            await verified?()
            let releasable: Fingerprint?
            do {
                releasable = try await journal.completeUpload(id: record.id, object: object, releasingStagedCopy: releases != nil)
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
