import Foundation
import Glibc
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

/// Runs one upload to its end, multipart or a single `PutObject`, as ``UploadStateMachine``
/// drives it (``UploadRun`` performs its actions); then records the outcome in the journal.
///
/// The state machine decides; this type performs. Actions are performed in the order the
/// machine gives them and each `persist` is committed before the next action, so the
/// journal is never ahead of the server. Parts go out concurrently, within the machine's
/// window and the process-wide ``TransferLimiter``; their answers come back through a task
/// group and are fed to the machine one at a time.
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

    /// Uploads, or resumes from `parts` (the journal's acknowledged parts). `resumed`: the
    /// upload was started by an earlier process, so the staged copy is checked against its
    /// fingerprint before a byte of it is sent. `checksums`: the parts' CRC32Cs computed
    /// when the card was read, if the stager computed them. `confirming`: the journal says
    /// the object is in the bucket (content dedupe), so it is looked at before that is
    /// believed: missing, or holding other bytes, the content is uploaded again.
    ///
    /// No object is ever replaced: a key that holds other bytes sends the file to its
    /// ``KeyTemplate/alternativeKey(_:fingerprint:)``, and if that is taken too the file
    /// fails and stays staged.
    func run(parts: [UploadPartRecord], resumed: Bool, checksums: PartChecksums?, confirming: Bool = false) async
        -> UploadResult
    {
        var checksums = checksums
        var parts = parts
        if resumed {
            sink.emit(.upload(.resuming(record, acknowledgedBytes: parts.reduce(0) { $0 + $1.size })))
            switch await checkStagedCopy() {
            case .success(let computed):
                checksums = computed
                parts = Self.parts(parts, matching: computed)
            case .failure(let problem): return await conclude(await handle(problem))
            }
        } else if !confirming {
            sink.emit(.upload(.preparing(record)))
            hooks.damage(stagedCopy: stagedPath)
        }
        var uploader = self
        if confirming {
            switch await lookAtKey() {
            case .failure(let error): return await conclude(.failed(error))
            case .success(.ours): return await conclude(.uploaded(alreadyThere: true))
            case .success(.free):
                switch await restarted(atKey: record.key) {
                case .success(let again): uploader = again
                case .failure(let error): return await conclude(.failed(error))
                }
                parts = []
            case .success(.taken(let head)):
                switch await movedAside(from: head) {
                case .success(let moved): uploader = moved
                case .failure(let error): return await conclude(.failed(error))
                }
                parts = []
            }
        }
        while true {
            switch await uploader.upload(parts: parts, checksums: checksums) {
            case .done(let result):
                return await uploader.conclude(result)
            case .keyTaken(let head):
                switch await uploader.movedAside(from: head) {
                case .success(let moved): uploader = moved
                case .failure(let error): return await uploader.conclude(.failed(error))
                }
                parts = []
            }
        }
    }

    /// The journalled parts whose digest is the staged copy's for their range: a part sent
    /// from other bytes (a stream adopted after a kill, of a file staged afresh since) is
    /// sent again rather than completed into the object.
    static func parts(_ parts: [UploadPartRecord], matching checksums: PartChecksums?) -> [UploadPartRecord] {
        guard let checksums else { return parts }
        return parts.filter { part in
            guard let journalled = part.digest, let staged = checksums.digest(ofPart: part.number, partSize: checksums.partSize)
            else { return true }
            return staged.journalText == journalled
        }
    }

    /// How one attempt at the record's key ended.
    enum Attempt: Sendable {
        case done(UploadResult)
        /// The key holds an object with other bytes (found by `HEAD`, or by a `412`).
        case keyTaken(ObjectHead)
    }

    private func upload(parts: [UploadPartRecord], checksums: PartChecksums?) async -> Attempt {
        // Nothing on the server yet: look at the key first where the write itself would not
        // find it taken in time: before a multipart upload's parts are sent, and on a server
        // that ignores If-None-Match.
        if record.phase == .created, record.uploadID == nil, record.partSize != nil || !conditionalWrites,
            let decided = Self.decided(by: await lookAtKey())
        {
            return decided
        }
        let sender = PartSender(uploader: self, checksums: record.checksum == .crc32c ? checksums : nil)
        return await UploadRun.start(self, parts: parts, sender: sender)
    }

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
            if head.size == record.size, found == record.fingerprint { return .success(.ours) }
            if head.size == record.size, found == nil, record.fingerprintGoesInTag, parts?.check(head) == .matches {
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

    /// Adds the `xxh128` tag to the object's tags (``UploadRecord/fingerprintGoesInTag``).
    func tagFingerprint() async throws(S3ClientError) {
        var tags = record.objectTags
        tags[ObjectLabelKeys.fingerprint] = record.fingerprint
        try await client.putObjectTagging(key: record.key, tags: tags)
    }

    /// What a look at the key decides before a write: nil when the key is free to write.
    static func decided(by look: Result<KeyState, UploadError>) -> Attempt? {
        switch look {
        case .failure(let error): .done(.failed(error))
        case .success(.ours): .done(.uploaded(alreadyThere: true))
        case .success(.taken(let head)): .keyTaken(head)
        case .success(.free): nil
        }
    }

    /// A conditional write was refused (`412`): look at what holds the key. `parts`: what
    /// the refused `Complete`'s parts add up to (an earlier attempt may have completed it).
    func afterPreconditionFailed(uploadID: String? = nil, parts: WholeObjectDigest? = nil) async -> Attempt {
        if let uploadID { try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID) }
        return Self.decided(by: await lookAtKey(completedFrom: parts))
            ?? .done(.failed(UploadError(
                exitStatus: .partial, scope: .object,
                message: "\(record.key) in \(record.target.displayName) refused the write as taken (412), then had no "
                    + "object: another writer is at work on this key. The file stays staged; run ingest resume.")))
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

    /// The key holds other bytes: the upload goes to the alternative key, journalled first.
    /// Fails when the key already is the alternative one (both are taken).
    func movedAside(from head: ObjectHead) async -> Result<ObjectUploader, UploadError> {
        let found = head.metadata[ObjectLabelKeys.fingerprint] ?? "none"
        let alternative: String
        do {
            guard let fingerprint = record.contentFingerprint, !record.key.contains("~" + fingerprint.hex) else {
                return .failure(UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "\(record.key) in \(record.target.displayName) holds other bytes (\(head.size) bytes, "
                        + "fingerprint \(found)), and it is already the alternative key of \(record.sourceDisplay): "
                        + "nothing was replaced, the file stays staged. Find out what writes there, then run ingest resume."))
            }
            alternative = try KeyTemplate.alternativeKey(record.key, fingerprint: fingerprint)
        } catch {
            return .failure(UploadError(exitStatus: .dataError, scope: .object, message: "\(error)"))
        }
        sink.emit(.upload(.keyTaken(record, newKey: alternative, foundSize: head.size, foundFingerprint: found)))
        return await restarted(atKey: alternative)
    }

    // MARK: the staged copy

    /// What is wrong with a staged copy.
    enum StagedCopyProblem: Error {
        /// Reading it failed: gone (`ENOENT`), or a trouble that may pass (`EMFILE`,
        /// `ENOMEM`, `EIO` of a busy disk).
        case unreadable(SystemError)
        /// Re-read, it hashes to another fingerprint: proven wrong.
        case changed(found: Fingerprint)
        /// The server found a part (or the object) does not match the CRC32C computed from
        /// the card's bytes, twice: the copy or the way to the server changed the bytes.
        case refusedByServer(part: Int?)
    }

    /// Reads the staged copy once: checks its fingerprint and, in the same pass, computes its
    /// parts' CRC32Cs.
    private func checkStagedCopy() async -> Result<PartChecksums?, StagedCopyProblem> {
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

    /// A staged copy may be the only copy left once the card is formatted, so it is given up
    /// only when proven wrong: re-read, it hashes to another fingerprint. Then it is moved
    /// aside (never uploaded, never deleted by ingest), the server's upload is aborted and
    /// the files go back to pending, so the next ingest of the card copies them afresh. A
    /// copy that cannot be read now, or that still hashes right after the server refused its
    /// bytes, is kept and tried again on the next run; the failure is counted, and
    /// quarantines the upload after `upload.quarantine_after` runs in a row.
    func handle(_ problem: StagedCopyProblem) async -> UploadResult {
        switch problem {
        case .unreadable(let error) where error.errno == .noSuchFileOrDirectory:
            // Gone is no error when the object is there: a run cut off after its upload
            // verified may have lost the journal's word of it, not the object.
            if case .success(.ours) = await lookAtKey() { return .uploaded(alreadyThere: true) }
            return await restage(
                because: "the staged copy \(stagedPath) is gone and \(record.key) is not in \(record.target.displayName)",
                movedTo: nil, exitStatus: .partial)
        case .unreadable(let error):
            return .failed(UploadError(
                exitStatus: .cantCreate, scope: .object,
                message: "the staged copy \(stagedPath) cannot be read now (\(error)); it is kept, and the upload is "
                    + "tried again on the next run (ingest resume). Check the staging disk if this repeats."))
        case .changed(let found):
            let aside = StagingArea.moveAside(stagedPath)
            return await restage(
                because: "the staged copy \(stagedPath) no longer has its fingerprint (it reads as \(found.hex), "
                    + "the card's bytes made \(record.fingerprint))", movedTo: aside, exitStatus: .integrity)
        case .refusedByServer(let part):
            let what = part.map { "part \($0)" } ?? "the object"
            switch await checkStagedCopy() {
            case .success:
                return .failed(UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "the server found \(what) of \(record.key) does not match the CRC32C of the card's bytes, "
                        + "twice, yet the staged copy \(stagedPath) still has its fingerprint: the bytes changed on the "
                        + "way (a proxy, the network, the server). The copy is kept and the upload resumes on the next run."))
            case .failure(let problem):
                if case .refusedByServer = problem { preconditionFailure("a check of the copy sends nothing") }
                return await handle(problem)
            }
        }
    }

    /// The copy is not there to upload from: the server's upload is aborted, and the files
    /// go back to pending so the next ingest of the card copies them again. `exitStatus`:
    /// `.integrity` when the copy was proven wrong, `.partial` when it is only missing (the
    /// files need their card again).
    private func restage(because problem: String, movedTo aside: String?, exitStatus: ExitStatus) async -> UploadResult {
        if let uploadID = record.uploadID {
            try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
        }
        let kept = aside.map { " The copy was moved to \($0), kept for inspection: delete it when done." } ?? ""
        let message = "\(problem). The upload was dropped and the file is pending again: "
            + "ingest the card again to copy it afresh.\(kept)"
        do { try await journal.restage(uploadID: record.id, reason: message) } catch {
            return .failed(.journal(error))
        }
        return .failed(UploadError(exitStatus: exitStatus, scope: .object, message: message))
    }

    // MARK: sending

    /// The digests parts go out with: the card's CRC32Cs when the stager (or the check
    /// before a resume) computed them for this cut, otherwise computed from the staged copy:
    /// from `bytes` when the body is in memory already, else read from the disk.
    struct PartSender: Sendable {
        let uploader: ObjectUploader
        let checksums: PartChecksums?

        /// The digest of part `number` at `range`, and whether it comes from the card's bytes.
        func digest(
            ofPart number: Int, range: (offset: Int64, length: Int64), bytes: [UInt8]? = nil
        ) async -> Result<(PartDigest, Bool), SystemError> {
            if let known = checksums?.digest(ofPart: number, partSize: uploader.record.partSize) { return .success((known, true)) }
            if let bytes { return .success((PartDigest.compute(uploader.record.checksum, bytes: bytes), false)) }
            return await ObjectUploader.digest(
                uploader.record.checksum, path: uploader.stagedPath, offset: range.offset, length: range.length
            ).map { ($0, false) }
        }
    }

    /// The body of `range` of the staged copy. A small one (``smallCopyLimit``) is read into
    /// memory here, on the calling task: one `pread` of a copy the page cache holds (it was
    /// staged through it), where streaming it cost a hand-over to a read-ahead thread and a
    /// wake-up of the transport's. It holds no more than its own buffer would have, and the
    /// files uploading at once bound how many there are. A larger one streams from the disk
    /// as it is sent.
    func body(of range: (offset: Int64, length: Int64)) -> Result<HTTPBody, SystemError> {
        guard range.length <= smallCopyLimit else {
            return .success(.file(path: stagedPath, offset: range.offset, length: range.length))
        }
        return Result { () throws(SystemError) -> HTTPBody in
            let file = try FileDescriptor(path: stagedPath, flags: .readOnly)
            // Read into uninitialised memory: zeroing it first cost as much as the copy.
            var failure: SystemError?
            let bytes = [UInt8](unsafeUninitializedCapacity: Int(range.length)) { buffer, count in
                do throws(SystemError) {
                    count = try file.read(into: UnsafeMutableRawBufferPointer(buffer), at: range.offset, path: stagedPath)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            // Shorter than planned: the copy was cut since it was staged.
            guard bytes.count == range.length else { throw SystemError(call: "pread", errno: .ioError, path: stagedPath) }
            return .bytes(bytes)
        }
    }

    /// `UNSIGNED-PAYLOAD` where TLS (or the loopback) protects the body; its SHA-256 over
    /// plain HTTP to another host, or with `[upload] sign_payloads` (``PayloadHash``): from
    /// `bytes` when the body is in memory already, else read from the staged copy.
    func bodyHash(of range: (offset: Int64, length: Int64), bytes: [UInt8]? = nil) async -> Result<PayloadHash, SystemError> {
        let signed = settings.signPayloads || client.bodiesCrossPlainHTTP
        if let bytes { return .success(signed ? PayloadHash(sha256Of: bytes) : .unsigned) }
        return await Self.bodyHash(path: stagedPath, range: range, signed: signed)
    }

    /// ``bodyHash(of:)`` of a range of the file at `path`: its SHA-256 when `signed`, read on a
    /// blocking worker, else `UNSIGNED-PAYLOAD`.
    static func bodyHash(
        path: String, range: (offset: Int64, length: Int64), signed: Bool
    ) async -> Result<PayloadHash, SystemError> {
        guard signed else { return .success(.unsigned) }
        return await BlockingWorkers.shared.run { () -> Result<PayloadHash, SystemError> in
            Result { () throws(SystemError) in try PayloadHash.ofFile(path: path, offset: range.offset, length: range.length) }
        }
    }

    static func digest(
        _ algorithm: PartDigestAlgorithm, path: String, offset: Int64, length: Int64
    ) async -> Result<PartDigest, SystemError> {
        await BlockingWorkers.shared.run { () -> Result<PartDigest, SystemError> in
            Result { () throws(SystemError) -> PartDigest in
                try PartDigest.compute(algorithm, path: path, offset: offset, length: length)
            }
        }
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
