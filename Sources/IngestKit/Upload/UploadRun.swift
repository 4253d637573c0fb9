/// One upload, multipart or single PUT, driven to its end: ``UploadStateMachine`` decides,
/// ``ObjectUploader`` performs, and this loop carries each action from the one to the other
/// and each result back as the next event. It decides nothing: the key found taken and the
/// alternative key, the object found already there, restarts, a staged copy found gone or
/// changed, a stop, and every way the upload ends are the machine's.
///
/// Actions are performed in the order the machine gives them, and each `persist` is committed
/// before the next, so the journal is never ahead of the server; an action that fails is
/// reported to the machine, whose answer replaces the actions queued after it. Parts go out
/// concurrently, within the machine's window and the process-wide ``TransferLimiter``, as
/// child tasks of one task group; their answers are fed to the machine one at a time.
struct UploadRun {
    /// What a part's task brings back.
    enum PartAnswer: Sendable {
        case acknowledged(uploadID: String, number: Int, etag: String, digest: PartDigest)
        case failed(uploadID: String, number: Int, error: S3ClientError)
        case unreadable(uploadID: String, number: Int, SystemError)
        /// The server found the part's bytes do not match the CRC32C the card's bytes made.
        case damaged(uploadID: String, number: Int)
        /// The process was asked to stop before the part left.
        case notSent
    }

    /// After an action: more for the machine to do, the machine's answer to a failure (which
    /// replaces what was queued), or the upload's end.
    private enum Step {
        case more([UploadStateMachine.Action])
        case instead([UploadStateMachine.Action])
        case end(UploadResult)
    }

    /// The performer; its record changes when the upload starts again at another key.
    private var uploader: ObjectUploader
    private let plan: PartPlan
    private var sender: ObjectUploader.PartSender
    private var machine: UploadStateMachine
    /// The parts as the journal has them, to write each persist as a difference.
    private var journalled: [Int: UploadStateMachine.AcknowledgedPart]
    /// The words that go with the machine's failure: the server's for the request that ended
    /// the upload, or the performer's for what it could not do.
    private var cause: UploadError?
    /// Server uploads this run has worked on: when it creates one again (the last was gone),
    /// the handover never takes one of them over, so no answer of a part sent to an upload
    /// given up can count for the next.
    private var passedOver: Set<String> = []
    /// The object the last look at the key found this upload's (``verify()``, ``lookAtKey(_:)``):
    /// its identity is recorded with the completion.
    private var found: StoredObject?

    private var record: UploadRecord { uploader.record }
    private var client: any ObjectStore { uploader.client }

    /// Uploads `uploader`'s record, or resumes it from `parts` (the journal's acknowledged
    /// parts), then records the outcome in the journal. `resumed`: an earlier process
    /// started it, so the staged copy is checked against its fingerprint before a byte of it
    /// is sent. `checksums`: the parts' CRC32Cs computed when the card was read, if the
    /// stager computed them. `confirming`: the journal says the object is in the bucket
    /// (content dedupe), so it is looked at before that is believed: missing, or holding
    /// other bytes, the content is uploaded again.
    ///
    /// No object is ever replaced: a key that holds other bytes sends the file to its
    /// ``KeyTemplate/alternativeKey(_:fingerprint:)``, and if that is taken too the file
    /// fails and stays staged.
    static func upload(
        _ uploader: ObjectUploader, parts: [UploadPartRecord], resumed: Bool, checksums: PartChecksums?,
        confirming: Bool = false
    ) async -> UploadResult {
        let record = uploader.record
        if resumed {
            uploader.sink.emit(.upload(.resuming(record, acknowledgedBytes: parts.reduce(0) { $0 + $1.size })))
        } else if !confirming {
            uploader.sink.emit(.upload(.preparing(record)))
            uploader.hooks.damage(stagedCopy: uploader.stagedPath)
        }
        let plan: PartPlan
        do { plan = try PartPlan.recorded(fileSize: record.size, partSize: record.partSize) } catch {
            return await uploader.conclude(.failed(UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(error)")))
        }
        guard let fingerprint = record.contentFingerprint else {
            return await uploader.conclude(.failed(UploadError(
                exitStatus: .software, scope: .object, message: "\(record.key) has no content fingerprint to upload under")))
        }
        if let uploadID = record.uploadID {
            uploader.client.resumingUpload(key: record.key, uploadID: uploadID, headers: record.requestHeaders)
        }
        let machine = UploadStateMachine(
            resuming: .init(
                logicalUploadID: record.id, file: uploader.stagedPath, fingerprint: fingerprint, plan: plan,
                phase: record.phase, uploadID: record.uploadID, parts: parts.map(\.acknowledged),
                restartCount: record.restartCount, failure: nil),
            configuration: .init(
                maxRestarts: uploader.settings.maxRestarts,
                // A destination that appends (tus) takes one part at a time, in order.
                partsInFlight: uploader.client.capabilities.contains(.partsInAnyOrder) ? uploader.settings.partsInFlight : 1,
                conditionalWrites: uploader.conditionalWrites),
            onAlternativeKey: uploader.onAlternativeKey)
        var run = UploadRun(
            uploader: uploader, plan: plan,
            sender: ObjectUploader.PartSender(uploader: uploader, checksums: record.checksum == .crc32c ? checksums : nil),
            machine: machine, journalled: Dictionary(uniqueKeysWithValues: parts.map { ($0.number, $0.acknowledged) }))
        return await run.drive(confirming ? .confirming : resumed ? .resumed : .fresh)
    }

    private init(
        uploader: ObjectUploader, plan: PartPlan, sender: ObjectUploader.PartSender, machine: UploadStateMachine,
        journalled: [Int: UploadStateMachine.AcknowledgedPart]
    ) {
        self.uploader = uploader
        self.plan = plan
        self.sender = sender
        self.machine = machine
        self.journalled = journalled
    }

    private mutating func drive(_ opening: UploadStateMachine.Opening) async -> UploadResult {
        await withTaskGroup(of: PartAnswer.self) { group -> UploadResult in
            var actions = machine.start(opening)
            while true {
                while !actions.isEmpty {
                    switch await perform(actions.removeFirst(), group: &group) {
                    case .more(let more): actions += more
                    case .instead(let replacing): actions = replacing
                    case .end(let result):
                        group.cancelAll()
                        return result
                    }
                }
                // Asked to stop: once the parts on the wire have ended (and been journalled
                // above), the machine leaves the upload for later.
                if uploader.stop.isRaised, group.isEmpty {
                    actions = machine.stopped()
                    continue
                }
                guard let answer = await group.next() else {
                    cause = UploadError(
                        exitStatus: .software, scope: .object,
                        message: "the upload of \(record.key) stalled with no request outstanding (a bug: please report it)")
                    actions = machine.ownerFailed()
                    continue
                }
                actions = received(answer)
            }
        }
    }

    // MARK: the machine's actions

    private mutating func perform(_ action: UploadStateMachine.Action, group: inout TaskGroup<PartAnswer>) async -> Step {
        switch action {
        case .persist(let snapshot): return await persist(snapshot)
        case .createUpload: return await createUpload()
        case .putObject: return await putObject()
        case .listParts(let uploadID): return await listParts(uploadID)
        case let .sendParts(uploadID, numbers): return sendParts(numbers, of: uploadID, group: &group)
        case .cancelParts:
            group.cancelAll()
            return .more([])
        case let .complete(uploadID, parts): return await complete(uploadID, parts: parts)
        case .abort(let uploadID): return await abort(uploadID)
        case .discard(let uploadID):
            try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
            return .more([])
        case .verify: return await verify()
        case .lookAtKey(let look): return await lookAtKey(look)
        case .startAgain(let choice): return await startAgain(choice)
        case .checkStagedCopy: return await checkStagedCopy()
        case let .restage(trouble, uploadID): return await restage(trouble, uploadID: uploadID)
        case .finish(let outcome): return await finish(outcome)
        case .beginStream, .waitForPart, .streamParts, .waitForCopyEnd, .awaitClaim, .handOff:
            preconditionFailure("UploadRun: \(action) belongs to a stream (StreamRun)")
        }
    }

    private mutating func persist(_ snapshot: UploadStateMachine.Snapshot) async -> Step {
        let now = Dictionary(uniqueKeysWithValues: snapshot.parts.map { ($0.number, $0) })
        let added = snapshot.parts.filter { journalled[$0.number] != $0 }
        let removed = journalled.keys.filter { now[$0] == nil }
        do {
            try await uploader.journal.persist(snapshot, added: added, removed: removed, lastError: cause?.message)
        } catch {
            return ownerFailed(.journal(error))
        }
        journalled = now
        for _ in added { uploader.hooks.partJournalled() }
        return .more([])
    }

    /// `CreateMultipartUpload`, with the handover around it (``ObjectUploader/handover(behind:)``):
    /// an upload of the key in progress is looked for before, and again after, which is when
    /// two stations that began the key at once find each other; the one behind gives its
    /// own up before sending a part.
    private mutating func createUpload() async -> Step {
        if let journalled = record.uploadID { passedOver.insert(journalled) }
        if let found = handedOver(await uploader.handover(passedOver: passedOver)) { return found }
        uploader.sink.emit(.upload(.initiating(record)))
        do throws(S3ClientError) {
            let id = try await client.createMultipartUpload(
                key: record.key, size: record.size, headers: record.requestHeaders + record.checksum.createMultipartUploadHeaders)
            let found = handedOver(await uploader.handover(behind: id, passedOver: passedOver))
            passedOver.insert(id)
            if let found { return found }
            return .more(machine.uploadCreated(uploadID: id))
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch {
            return .more(machine.requestFailed(given(up: error, "CreateMultipartUpload \(record.key)")))
        }
    }

    /// What the machine is told of a handover; nil: nothing found, go on.
    private mutating func handedOver(_ handover: ObjectUploader.Handover) -> Step? {
        switch handover {
        case .none: nil
        case .takeOver(let uploadID): .more(machine.uploadFound(uploadID: uploadID))
        case .ended: .more(machine.foundUploadEnded())
        case .stopped: .instead(machine.stopped())
        }
    }

    /// A single PUT: the whole file in one `PutObject`, written only where the key is free
    /// (`If-None-Match: *`).
    private mutating func putObject() async -> Step {
        if uploader.stop.isRaised { return .instead(machine.stopped()) }
        uploader.sink.emit(.upload(.initiating(record)))
        let range = plan.range(ofPart: 1)
        // A small body is read first, into memory: its digest and hash come from those bytes.
        let body: HTTPBody
        switch uploader.body(of: range) {
        case .success(let value): body = value
        case .failure(let error):
            let trouble = trouble(error)
            return .instead(machine.stagedCopyFailed(trouble))
        }
        let bytes: [UInt8]? = if case .bytes(let bytes) = body { bytes } else { nil }
        let (digest, fromCard): (PartDigest, Bool)
        switch await sender.digest(ofPart: 1, range: range, bytes: bytes) {
        case .success(let value): (digest, fromCard) = value
        case .failure(let error):
            let trouble = trouble(error)
            return .instead(machine.stagedCopyFailed(trouble))
        }
        let payloadHash: PayloadHash
        switch await uploader.bodyHash(of: range, bytes: bytes) {
        case .success(let hash): payloadHash = hash
        case .failure(let error):
            let trouble = trouble(error)
            return .instead(machine.stagedCopyFailed(trouble))
        }
        let (client, record) = (client, record)
        do throws(S3ClientError) {
            let written = try await uploader.limiter.withPermit(max(range.length, 1)) {
                () async throws(S3ClientError) -> ObjectWritten in
                try await client.putObject(
                    key: record.key, body: body,
                    payloadHash: payloadHash, headers: record.requestHeaders + digest.headers + [.ifNoneMatchAny])
            }
            uploader.hooks.completed()
            // Written under If-None-Match: the object is ours; a look after, if the answer
            // does not confirm the bytes, records what it finds instead.
            found = StoredObject(etag: written.etag, size: record.size, checksum: written.checksumCRC32C)
            return .more(machine.objectPut(
                etag: written.etag, digest: digest.journalText,
                confirmed: written.confirms(.expected(singlePut: digest))))
        } catch let error where error.isPreconditionFailed {
            return .more(machine.writeRefused())
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch let error where fromCard && error.isBadDigest {
            return .more(machine.stagedCopyFailed(.refusedByServer(part: nil)))
        } catch {
            return .more(machine.putFailed(given(up: error, "PutObject \(record.key)")))
        }
    }

    private mutating func listParts(_ uploadID: String) async -> Step {
        passedOver.insert(uploadID)
        uploader.sink.emit(.upload(.reconciling(record)))
        do throws(S3ClientError) {
            let listed = try await client.listParts(key: record.key, uploadID: uploadID, partSize: plan.partSize ?? record.size)
            let known = Set(machine.acknowledgedParts.map(\.number))
            let adopted = await uploader.adopt(listed.filter {
                !known.contains($0.number) && plan.partNumbers.contains($0.number) && $0.size == plan.length(ofPart: $0.number)
            }, plan: plan)
            return .more(machine.partsListed(Self.remoteParts(listed, journal: machine.acknowledgedParts), adopted: adopted))
        } catch .uploadGone {
            return .more(machine.uploadGone(uploadID: uploadID))
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch {
            return .more(machine.requestFailed(given(up: error, "ListParts \(record.key)")))
        }
    }

    private func sendParts(_ numbers: [Int], of uploadID: String, group: inout TaskGroup<PartAnswer>) -> Step {
        guard !uploader.stop.isRaised else { return .more([]) }
        for number in numbers {
            let (uploader, sender, range) = (uploader, sender, plan.range(ofPart: number))
            group.addTask { await uploader.sendPart(uploadID: uploadID, number: number, range: range, sender: sender) }
        }
        return .more([])
    }

    private mutating func complete(_ uploadID: String, parts: [UploadStateMachine.AcknowledgedPart]) async -> Step {
        uploader.sink.emit(.upload(.completing(record)))
        do throws(S3ClientError) {
            let etag = try await client.completeMultipartUpload(
                key: record.key, uploadID: uploadID,
                parts: parts.map {
                    CompletedPart(number: $0.number, etag: $0.etag, digest: $0.digest.flatMap { try? PartDigest(journalText: $0) })
                }, headers: [.ifNoneMatchAny])
            uploader.hooks.completed()
            return .more(machine.completed(etag: etag))
        } catch let error where error.isPreconditionFailed {
            return .more(machine.writeRefused())
        } catch .uploadGone {
            return .more(machine.completeFailed(.restartUpload))
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch {
            return .more(machine.completeFailed(given(up: error, "CompleteMultipartUpload \(record.key)")))
        }
    }

    private mutating func abort(_ uploadID: String) async -> Step {
        do throws(S3ClientError) {
            try await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
            return .more(machine.abortConfirmed())
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch {
            return .more(machine.requestFailed(given(up: error, "AbortMultipartUpload \(record.key)")))
        }
    }

    /// Looks for the object: its size, fingerprint and the server's digest of it against the
    /// digests of the parts acknowledged.
    private mutating func verify() async -> Step {
        let whole = wholeDigest
        do throws(S3ClientError) {
            guard let head = try await client.headObject(key: record.key, checksumMode: whole?.needsChecksumMode ?? false) else {
                return .more(machine.objectNotFound())
            }
            var mismatch: String?
            let check = whole?.check(head)
            if case let .mismatch(want, found) = check {
                mismatch = "the server's digest is \(found), the parts sent make \(want)"
            }
            var fingerprint = head.metadata[ObjectLabelKeys.fingerprint]
            if fingerprint == nil, uploader.fingerprintMayBeInTag {
                fingerprint = try await uploader.taggedFingerprint(
                    of: head, provenOurs: mismatch == nil && (check == .matches || machine.isConfirmingCompletion))
            }
            found = StoredObject(head)
            return .more(machine.objectAlreadyExists(
                size: head.size, fingerprint: fingerprint.flatMap(Fingerprint.init(hex:)), digestMismatch: mismatch))
        } catch where cutByStop(error) {
            return .instead(machine.stopped())
        } catch {
            return .more(machine.requestFailed(given(up: error, "HeadObject \(record.key)")))
        }
    }

    /// Looks at the key: free, ours, or taken by other bytes. After our own `Complete` was
    /// refused, the object is ours too if the server's digest of it is the one our parts make.
    private mutating func lookAtKey(_ look: UploadStateMachine.KeyLook) async -> Step {
        switch await uploader.lookAtKey(completedFrom: look == .afterRefusedComplete ? wholeDigest : nil) {
        case .success(.free): return .more(machine.keyFree())
        case .success(.ours(let head)):
            found = StoredObject(head)
            return .more(machine.keyOurs())
        case .success(.taken(let head)):
            return .more(machine.keyTaken(size: head.size, fingerprint: head.metadata[ObjectLabelKeys.fingerprint]))
        case .failure(let error):
            cause = error
            return .more(machine.requestFailed(.fail(.notRetryable)))
        }
    }

    /// Journals the upload as started again from nothing, at its key or its alternative key.
    private mutating func startAgain(_ choice: UploadStateMachine.KeyChoice) async -> Step {
        let moved: Result<ObjectUploader, UploadError>
        switch choice {
        case .same:
            moved = await uploader.restarted(atKey: record.key)
        case let .alternative(foundSize, foundFingerprint):
            moved = await uploader.movedToAlternativeKey(foundSize: foundSize, foundFingerprint: foundFingerprint)
        }
        switch moved {
        case .success(let moved):
            uploader = moved
            sender = ObjectUploader.PartSender(uploader: moved, checksums: sender.checksums)
            journalled = [:]
            return .more(machine.startedAgain())
        case .failure(let error):
            return ownerFailed(error)
        }
    }

    private mutating func checkStagedCopy() async -> Step {
        switch await uploader.checkStagedCopy() {
        case .success(let checksums):
            if record.checksum == .crc32c, let checksums {
                sender = ObjectUploader.PartSender(uploader: uploader, checksums: checksums)
            }
            return .more(machine.stagedCopyChecked(checksums))
        case .failure(.unreadable(let error)):
            let trouble = trouble(error)
            return .more(machine.stagedCopyFailed(trouble))
        case .failure(.changed(let found)):
            return .more(machine.stagedCopyFailed(.changed(found: found)))
        }
    }

    private mutating func restage(_ trouble: UploadStateMachine.StagedCopyTrouble, uploadID: String?) async -> Step {
        switch await uploader.restage(trouble, uploadID: uploadID) {
        case .success(let reported):
            cause = reported
            return .more(machine.restaged())
        case .failure(let error):
            return ownerFailed(error)
        }
    }

    private func finish(_ outcome: UploadStateMachine.Outcome) async -> Step {
        let result: UploadResult
        switch outcome {
        case .uploaded:
            await abortUnsentUploads()
            result = .uploaded(alreadyThere: false)
        case .alreadyUploaded:
            await abortUnsentUploads()
            result = .uploaded(alreadyThere: true)
        case .foundAtKey:
            result = .uploaded(alreadyThere: true)
        case .aborted:
            result = .aborted
        case .interrupted:
            result = .interrupted
        case .failed(let failure):
            result = .failed(error(failure))
        case .restaged:
            result = .failed(cause ?? UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): restaged"))
        case .notStreamed:
            preconditionFailure("UploadRun: an upload is no stream")
        }
        return .end(await uploader.conclude(result, object: found))
    }

    // MARK: the parts' answers

    private mutating func received(_ answer: PartAnswer) -> [UploadStateMachine.Action] {
        switch answer {
        case let .acknowledged(uploadID, number, etag, digest):
            let actions = machine.partAcknowledged(uploadID: uploadID, number: number, etag: etag, digest: digest.journalText)
            uploader.sink.emit(.upload(.partUploaded(
                record, number: number, partCount: plan.partCount, bytes: plan.length(ofPart: number))))
            return actions
        case let .failed(uploadID, number, error):
            if case .uploadGone = error {
                return machine.partFailed(uploadID: uploadID, number: number, decision: .restartUpload)
            }
            return machine.partFailed(
                uploadID: uploadID, number: number, decision: given(up: error, "UploadPart \(number) of \(record.key)"))
        case let .unreadable(uploadID, number, error):
            let trouble = trouble(error)
            return machine.partFailed(uploadID: uploadID, number: number, trouble: trouble)
        case let .damaged(uploadID, number):
            return machine.partFailed(uploadID: uploadID, number: number, trouble: .refusedByServer(part: number))
        case .notSent:
            return []
        }
    }

    // MARK: helpers

    /// The request was cut because the process is stopping (``CurlTransport/cut()``): not a
    /// failure of the upload, which is left as the journal has it and resumes from there.
    private func cutByStop(_ error: S3ClientError) -> Bool { uploader.stop.isRaised && error.isCut }

    /// What a failure to read the staged copy is: gone (`ENOENT`), or unreadable now, its
    /// words kept for the report.
    private mutating func trouble(_ error: SystemError) -> UploadStateMachine.StagedCopyTrouble {
        if error.errno == .noSuchFileOrDirectory { return .gone }
        cause = UploadError(
            exitStatus: .cantCreate, scope: .object,
            message: "the staged copy \(uploader.stagedPath) cannot be read now (\(error)); it is kept, and the upload is "
                + "tried again on the next run (ingest resume). Check the staging disk if this repeats.")
        return .unreadable
    }

    /// An action of the performer's own failed: its words kept, the machine told.
    private mutating func ownerFailed(_ error: UploadError) -> Step {
        cause = error
        return .instead(machine.ownerFailed())
    }

    /// A request given up after its retries: its words kept as the cause, and what the
    /// machine is told. `NoSuchUpload` starts the upload over; anything else fails it.
    private mutating func given(up error: S3ClientError, _ what: String) -> RetryDecision {
        switch error {
        case .uploadGone:
            return .restartUpload
        case .server(_, let attempts), .transport(_, let attempts):
            cause = UploadError(error, what: what, target: record.target)
            return .fail(attempts > 1 ? .attemptsExhausted(attempts: attempts) : .notRetryable)
        default:
            cause = UploadError(error, what: what, target: record.target)
            return .fail(.notRetryable)
        }
    }

    /// The machine's reason, with the server's or the performer's words where they go with it.
    private func error(_ failure: UploadFailure) -> UploadError {
        switch failure {
        case .requestFailed, .ownerFailed, .stagedCopy(.unreadable):
            return cause ?? UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(failure)")
        case .restartLimitExceeded:
            return UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(failure)")
        case .verificationFailed, .digestMismatch:
            return UploadError(exitStatus: .integrity, scope: .object, message: "\(record.key): \(failure)")
        case let .keyTakenTwice(size, found):
            return uploader.keyTakenTwice(foundSize: size, foundFingerprint: found)
        case .refusedThenFree:
            return uploader.refusedThenFree
        case .stagedCopy(let trouble):
            let what = if case .refusedByServer(let part?) = trouble { "part \(part)" } else { "the object" }
            return UploadError(
                exitStatus: .integrity, scope: .object,
                message: "the server found \(what) of \(record.key) does not match the CRC32C of the card's bytes, twice, "
                    + "yet the staged copy \(uploader.stagedPath) still has its fingerprint: the bytes changed on the way "
                    + "(a proxy, the network, the server). The copy is kept and the upload resumes on the next run.")
        }
    }

    /// What the server's digest of the object must be, from the digests of the parts
    /// acknowledged; nil when they are not all known or not of one algorithm.
    private var wholeDigest: WholeObjectDigest? {
        let digests = machine.acknowledgedParts.compactMap { part in part.digest.flatMap { try? PartDigest(journalText: $0) } }
        if digests.count != plan.partCount || Set(digests.map(\.algorithm)).count != 1 { return nil }
        return plan.isSinglePut
            ? .expected(singlePut: digests[0]) : .expected(parts: digests, lengths: plan.partNumbers.map(plan.length(ofPart:)))
    }

    /// The object is in place, so no other upload of its key can complete. One that holds no
    /// part is a stray (a `CreateMultipartUpload` whose answer was lost and which was sent
    /// again), or one whose sender has not begun: it is aborted now rather than left a day
    /// for the orphan sweep. One with parts may be another station's, still being sent: it
    /// is left alone, and its sender's `Complete` is refused and discards it. A failure to
    /// list or abort leaves the stray to the sweep.
    private func abortUnsentUploads() async {
        guard !plan.isSinglePut, client.capabilities.contains(.listing) else { return }
        let key = record.key
        guard let listing = try? await client.listUploads(prefix: key, keeping: { $0.key == key }) else { return }
        for upload in listing.uploads {
            guard let parts = try? await client.listParts(key: key, uploadID: upload.uploadID, partSize: plan.partSize ?? record.size),
                parts.isEmpty
            else { continue }
            try? await client.abortMultipartUpload(key: key, uploadID: upload.uploadID)
        }
    }

    /// The server's parts by number. SeaweedFS lists every upload of a part number, where
    /// AWS lists only the last; `Complete` takes the copy whose ETag it is sent, so the copy
    /// the journal recorded is the one that counts, and otherwise the last one listed.
    static func remoteParts(
        _ listed: [ListedPart], journal: [UploadStateMachine.AcknowledgedPart]
    ) -> [Int: UploadStateMachine.RemotePart] {
        let recorded = Dictionary(journal.map { ($0.number, ETag.unquoted($0.etag)) }, uniquingKeysWith: { _, last in last })
        var remote: [Int: UploadStateMachine.RemotePart] = [:]
        for part in listed {
            if let kept = remote[part.number], recorded[part.number] == ETag.unquoted(kept.etag) { continue }
            remote[part.number] = UploadStateMachine.RemotePart(etag: part.etag, size: part.size)
        }
        return remote
    }
}
