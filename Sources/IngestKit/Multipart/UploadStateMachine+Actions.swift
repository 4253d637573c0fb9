/// What the owner of an ``UploadStateMachine`` tells it and is told: how an upload opens,
/// why the key is looked at, the actions to perform, and how the upload ended.
extension UploadStateMachine {
    /// How ``start(_:)`` begins.
    public enum Opening: Sendable, Equatable {
        /// As the journal has it, the key taken as free: the bare protocol.
        case asJournalled
        /// An upload this process planned or took over: the key is looked at first where the
        /// write itself would not find it taken in time.
        case fresh
        /// An upload an earlier process started: the staged copy is checked against its
        /// fingerprint before a byte of it is sent, then as ``fresh``.
        case resumed
        /// The journal says the object is in the bucket (content dedupe): the key is looked
        /// at before that is believed.
        case confirming
    }

    /// Why the key is looked at (``Action/lookAtKey(_:)``): what the owner reports back is
    /// the same, the look differs only where said.
    public enum KeyLook: Sendable, Equatable {
        /// Before anything is written.
        case beforeWriting
        /// The journal says the object is there.
        case confirming
        /// Before `Complete`, on a server that ignores `If-None-Match`.
        case beforeComplete
        /// Our `PutObject` was refused as taken (`412`).
        case afterRefusedPut
        /// Our `Complete` was refused as taken (`412`): an earlier attempt whose answer was
        /// lost may have written it, so the object is ours if the server's digest of it is
        /// the one the acknowledged parts make (and it is tagged then, when its fingerprint
        /// goes in a tag).
        case afterRefusedComplete
        /// The staged copy is gone: is the object there anyway?
        case stagedCopyGone
        /// Before a stream's upload is created: anything at the key, and nothing streams.
        case beforeStream
    }

    /// Where ``Action/startAgain(_:)`` starts the upload from nothing.
    public enum KeyChoice: Sendable, Equatable {
        /// The same key (the object the journal counted on is gone).
        case same
        /// The file's alternative key: the key holds other bytes, of this size and this
        /// recorded fingerprint (nil: none).
        case alternative(foundSize: Int64, foundFingerprint: String?)
    }

    /// What is wrong with the staged copy the upload reads from.
    public enum StagedCopyTrouble: Sendable, Equatable, Codable {
        /// It cannot be read now (`EMFILE`, `ENOMEM`, the `EIO` of a busy disk): kept.
        case unreadable
        /// It is gone (`ENOENT`).
        case gone
        /// Re-read, it hashes to another fingerprint: proven wrong.
        case changed(found: Fingerprint)
        /// The server found a part (or the single PUT's object) does not match the CRC32C
        /// computed from the card's bytes, twice.
        case refusedByServer(part: Int?)
    }

    /// What the owner does next. Perform them in order.
    public enum Action: Sendable, Equatable {
        /// `CreateMultipartUpload`; answer with ``uploadCreated(uploadID:)``. Where the key is
        /// one other stations write too, an upload in progress at it is looked for first,
        /// and again once this one is created: one that began first is waited for while it
        /// is sent, then answered with ``uploadFound(uploadID:)`` (taken over) or
        /// ``foundUploadEnded()``.
        case createUpload
        /// A single PUT: `PutObject` of the whole file; answer with
        /// ``objectPut(etag:digest:confirmed:)``, ``putFailed(_:)`` or ``writeRefused()``.
        case putObject
        /// `ListParts` (every page); answer with ``partsListed(_:adopted:)``.
        case listParts(uploadID: String)
        /// Read, digest and `UploadPart` these parts, concurrently; answer each with
        /// ``partAcknowledged(uploadID:number:etag:digest:)`` or
        /// ``partFailed(uploadID:number:decision:)``. Never more than the configured window
        /// is outstanding.
        case sendParts(uploadID: String, parts: [Int])
        /// Drop the parts still on the wire: their answers no longer count.
        case cancelParts
        /// Commit the snapshot to the journal before the next action.
        case persist(Snapshot)
        /// `CompleteMultipartUpload` with these parts, in order, ETags exactly as returned;
        /// answer with ``completed(etag:)``, ``completeFailed(_:)`` or ``writeRefused()``.
        case complete(uploadID: String, parts: [AcknowledgedPart])
        /// `AbortMultipartUpload`; answer with ``abortConfirmed()`` (a `NoSuchUpload` answer
        /// confirms it too).
        case abort(uploadID: String)
        /// `AbortMultipartUpload` of an upload nobody wants any more, once, with no answer:
        /// a failure leaves it to the orphan sweep.
        case discard(uploadID: String)
        /// `HeadObject` on the key; answer with ``objectAlreadyExists(size:fingerprint:digestMismatch:)``
        /// (size and the fingerprint metadata found) or ``objectNotFound()``.
        case verify
        /// `HeadObject` on the key, with the fingerprint recorded wherever ingest records it;
        /// answer with ``keyFree()``, ``keyOurs()``, ``keyTaken(size:fingerprint:)`` or
        /// ``requestFailed(_:)``.
        case lookAtKey(KeyLook)
        /// Journal the upload as started again from nothing (no upload id, no parts) at the
        /// key chosen; answer with ``startedAgain()``.
        case startAgain(KeyChoice)
        /// Re-read the staged copy: its fingerprint, and its parts' CRC32Cs in the same pass;
        /// answer with ``stagedCopyChecked(_:)`` or ``stagedCopyFailed(_:)``.
        case checkStagedCopy
        /// The staged copy is not there to upload from: abort `uploadID` if any, move a
        /// changed copy aside, and journal the files pending again (the upload goes); answer
        /// with ``restaged()``.
        case restage(StagedCopyTrouble, uploadID: String?)
        /// Streaming: journal the stream (its upload id) before any part is sent; answer with
        /// ``streamBegun()``.
        case beginStream(uploadID: String)
        /// Streaming: wait until the copy holds part `number` with its CRC32C; answer with
        /// ``staged(upTo:)`` or ``copyFailed()``.
        case waitForPart(Int)
        /// Streaming: `UploadPart` these parts from the growing copy, each with the CRC32C
        /// the stager computed from the card's bytes, and journal each part the server
        /// acknowledges in the stream's record before answering
        /// ``partAcknowledged(uploadID:number:etag:digest:)`` (or ``partFailed(uploadID:number:decision:)``).
        case streamParts(uploadID: String, parts: [Int])
        /// Streaming: wait for the copy's end; answer with ``copyComplete(fingerprint:)``
        /// or ``copyFailed()``.
        case waitForCopyEnd
        /// Streaming: the copy is complete and every part sent is answered; hold the stream
        /// for its file's claim: answer ``claimed(fingerprint:partSize:)`` or
        /// ``abortRequested()``.
        case awaitClaim
        /// Streaming: the claim takes the stream as its content's upload (the journal adopts
        /// it, in `uploading` with these parts); from there it is finished as any resumed
        /// upload.
        case handOff(uploadID: String, parts: [AcknowledgedPart])
        /// The upload is over: record it and report it. A success is not persisted first:
        /// the owner records it in one journal write (phase, parts dropped, files uploaded).
        case finish(Outcome)
    }

    /// How an upload ended.
    public enum Outcome: Sendable, Equatable {
        /// Completed now and verified; the ETag `Complete` returned (nil where its answer
        /// named none: the look that verified the object recorded the object's).
        case uploaded(etag: String?)
        /// The object was already on the server with our size and fingerprint: a previous
        /// run completed it and was stopped before its journal said so.
        case alreadyUploaded
        /// A look at the key found our object there before anything was written by this
        /// run (another run, or another card of the same content, wrote it).
        case foundAtKey
        case failed(UploadFailure)
        case aborted
        /// Asked to stop: left as the journal has it, to resume from there.
        case interrupted
        /// The staged copy was gone or wrong: the upload was dropped and its files are
        /// pending again, for the card's next run to copy afresh.
        case restaged(StagedCopyTrouble)
        /// Streaming: nothing streamed (the key holds something, the upload could not be
        /// created): the file is uploaded the ordinary way once staged.
        case notStreamed
    }
}
