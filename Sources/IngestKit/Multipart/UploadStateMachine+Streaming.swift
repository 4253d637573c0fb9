/// The streaming phase: a large file's parts go out while the stager still copies it, so its
/// upload ends about when the card's last byte is read instead of starting then.
///
/// The stream learns the content's fingerprint only at the copy's end, so its upload is
/// created with every label but the fingerprint (which goes in a tag once the object is
/// complete). Its durable record is the stream's own journal row, not a snapshot: the
/// owner journals the stream (``Action/beginStream(uploadID:)``) before any part is sent,
/// and each part the server acknowledges as it comes (``Action/streamParts(uploadID:parts:)``).
///
/// ```
/// startStreaming ▶ lookAtKey(.beforeStream) ─free─▶ createUpload ─▶ beginStream
///    anything at the key, or a request given up: notStreamed (the ordinary way, once staged)
/// beginStream ─streamBegun─▶ waitForPart(1) ─staged(upTo:)─▶ streamParts … (a window at once)
///    a part given up, or a stop: no more parts (the normal path sends the rest)
/// every part sent and answered ▶ waitForCopyEnd ─copyComplete─▶ awaitClaim
///    ─claimed (same content, same cut)─▶ handOff: the journal adopts the stream as the
///    content's upload, in `uploading`, finished from there as any resumed upload
///    ─claimed (other content) or abortRequested─▶ abort ─▶ aborted
/// copyFailed ▶ (parts on the wire answered) abort ─▶ aborted
/// ```
///
/// A kill at any point leaves the stream's row with its parts, which the next process
/// adopts as its file's upload if the file was staged, and aborts otherwise.
extension UploadStateMachine {
    /// A stream of `plan`'s parts (a multipart plan: the stager's cut) from the growing copy
    /// named `file`; `streamID`: the stream's number, as the journal knows it.
    public init(streaming streamID: String, file: String, plan: PartPlan, configuration: Configuration = Configuration()) {
        precondition(!plan.isSinglePut, "a stream is a multipart upload")
        self.init(id: streamID, file: file, fingerprint: nil, plan: plan, configuration: configuration, onAlternativeKey: false)
    }

    /// Begins the stream: the key is looked at first; anything there is the ordinary way's
    /// to decide on, once the file is staged.
    public mutating func startStreaming() -> [Action] {
        guard case .idle(.created, nil, _) = state, knownFingerprint == nil else { impossible("startStreaming") }
        state = .lookingAtKey(.beforeStream, phase: .created, uploadID: nil)
        return [.lookAtKey(.beforeStream)]
    }

    /// The stream's upload exists: journal it before any part is sent.
    mutating func streamCreated(uploadID: String) -> [Action] {
        state = .streamBeginning(uploadID: uploadID)
        return [.beginStream(uploadID: uploadID)]
    }

    /// The stream is in the journal: parts go as the copy holds them.
    public mutating func streamBegun() -> [Action] {
        guard case let .streamBeginning(uploadID) = state else { impossible("streamBegun") }
        state = .streaming(Stream(uploadID: uploadID))
        return advanceStream()
    }

    /// The copy holds its first `bytes` bytes, with the CRC32C of each part they complete.
    public mutating func staged(upTo bytes: Int64) -> [Action] {
        guard case .streaming(var stream) = state else { impossible("staged(upTo: \(bytes))") }
        while stream.staged < plan.partCount {
            let range = plan.range(ofPart: stream.staged + 1)
            guard range.offset + range.length <= bytes else { break }
            stream.staged += 1
        }
        stream.waiting = false
        state = .streaming(stream)
        return advanceStream()
    }

    /// The copy is written in full: the content's fingerprint is known.
    public mutating func copyComplete(fingerprint: Fingerprint) -> [Action] {
        guard case .streaming(var stream) = state, stream.copyEnded == nil else { impossible("copyComplete") }
        knownFingerprint = fingerprint
        stream.copyEnded = .complete
        stream.waiting = false
        state = .streaming(stream)
        return advanceStream()
    }

    /// The copy was given up (unreadable, changed while copied, the run stopped): nothing
    /// of it may become an object, so the stream's upload is aborted once the parts on the
    /// wire are answered.
    public mutating func copyFailed() -> [Action] {
        guard case .streaming(var stream) = state, stream.copyEnded == nil else { impossible("copyFailed") }
        stream.copyEnded = .failed
        stream.sending = false
        stream.waiting = false
        state = .streaming(stream)
        return advanceStream()
    }

    /// The file's claim arrived with the staged content's fingerprint and part size: the
    /// same content cut the same way takes the stream as its upload; anything else (the file
    /// changed between the stream's read and the stager's) aborts it.
    public mutating func claimed(fingerprint staged: Fingerprint, partSize: Int64?) -> [Action] {
        guard case let .streamed(uploadID) = state else { impossible("claimed") }
        guard staged == knownFingerprint, partSize == plan.partSize else {
            state = .streamAborting(uploadID: uploadID)
            return [.abort(uploadID: uploadID)]
        }
        state = .handedOff(uploadID: uploadID)
        return [.handOff(uploadID: uploadID, parts: acknowledgedParts)]
    }

    /// The stream waits for its file's claim, or was handed to it: an abort is still its own.
    public var holdsStream: Bool {
        switch state {
        case .streamed, .handedOff: true
        default: false
        }
    }

    /// A part's answer while streaming: acknowledged (`etag`, already in the stream's journal)
    /// or given up (nil: no more parts are sent; the normal path sends what is missing).
    mutating func streamedPartAnswered(uploadID: String, number: Int, etag: String?, digest: String?) -> [Action] {
        guard case .streaming(var stream) = state, stream.uploadID == uploadID else {
            return staleOrImpossible("a streamed part's answer (part \(number))", uploadID: uploadID)
        }
        guard stream.inFlight.remove(number) != nil else { impossible("a streamed part's answer (part \(number), not in flight)") }
        if let etag {
            acknowledged[number] = AcknowledgedPart(number: number, etag: etag, size: plan.length(ofPart: number), digest: digest)
        } else {
            stream.sending = false
        }
        state = .streaming(stream)
        return advanceStream()
    }

    /// A stop while streaming: no part is sent any more. The stop answers a wait for a part
    /// (the owner reports it instead of waiting).
    mutating func streamStopped() -> [Action] {
        guard case .streaming(var stream) = state else { impossible("stopped") }
        stream.sending = false
        stream.waiting = false
        state = .streaming(stream)
        return advanceStream()
    }

    /// What the stream does next: the parts staged, within the window; a wait for the next
    /// part or the copy's end; or, the copy ended and every part answered, its end.
    mutating func advanceStream() -> [Action] {
        guard case .streaming(var stream) = state else { return [] }
        var actions: [Action] = []
        var batch: [Int] = []
        while stream.sending, stream.next <= stream.staged, stream.inFlight.count < configuration.partsInFlight {
            stream.inFlight.insert(stream.next)
            batch.append(stream.next)
            stream.next += 1
        }
        if !batch.isEmpty { actions.append(.streamParts(uploadID: stream.uploadID, parts: batch)) }
        if let end = stream.copyEnded {
            guard stream.inFlight.isEmpty else {
                state = .streaming(stream)
                return actions
            }
            switch end {
            case .complete:
                state = .streamed(uploadID: stream.uploadID)
                return actions + [.awaitClaim]
            case .failed:
                state = .streamAborting(uploadID: stream.uploadID)
                return actions + [.abort(uploadID: stream.uploadID)]
            }
        }
        if !stream.waiting {
            let more = stream.sending && stream.next <= plan.partCount
            if more, stream.next > stream.staged, stream.inFlight.count < configuration.partsInFlight {
                stream.waiting = true
                actions.append(.waitForPart(stream.next))
            } else if !more, stream.inFlight.isEmpty {
                // Every part sent and answered (or no more will be): the copy's end decides.
                stream.waiting = true
                actions.append(.waitForCopyEnd)
            }
        }
        state = .streaming(stream)
        return actions
    }
}
