/// One attempt at an upload, multipart or single PUT: ``UploadStateMachine`` decides, this
/// performs, with one method per action the machine can ask for and one for each answer a
/// part can bring.
///
/// Actions are performed in the order the machine gives them, and each `persist` is committed
/// before the next, so the journal is never ahead of the server. Parts go out concurrently,
/// within the machine's window and the process-wide ``TransferLimiter``, as child tasks of one
/// task group; their answers are fed to the machine one at a time.
struct UploadRun {
    /// What a part's task brings back.
    enum PartAnswer: Sendable {
        case acknowledged(uploadID: String, number: Int, etag: String, digest: PartDigest)
        case failed(uploadID: String, number: Int, error: S3ClientError)
        case unreadable(SystemError)
        /// The server found the part's bytes do not match the CRC32C the card's bytes made.
        case damaged(number: Int)
        /// The process was asked to stop before the part left.
        case notSent
    }

    /// After an action or an answer: more for the machine to do, or the attempt's end.
    private enum Step {
        case more([UploadStateMachine.Action])
        case end(ObjectUploader.Attempt)
    }

    private let uploader: ObjectUploader
    private let plan: PartPlan
    private let sender: ObjectUploader.PartSender
    private var machine: UploadStateMachine
    /// The parts as the journal has them, to write each persist as a difference.
    private var journalled: [Int: UploadStateMachine.AcknowledgedPart]
    /// The server's words for the request that ended the upload, to go with the machine's.
    private var cause: UploadError?

    private var record: UploadRecord { uploader.record }
    private var client: any ObjectStore { uploader.client }

    /// Runs the upload of `uploader`'s record from the journal's `parts`, cut as the record
    /// says (a part size, or none for a single PUT).
    static func start(
        _ uploader: ObjectUploader, parts: [UploadPartRecord], sender: ObjectUploader.PartSender
    ) async -> ObjectUploader.Attempt {
        let record = uploader.record
        let plan: PartPlan
        do { plan = try PartPlan.recorded(fileSize: record.size, partSize: record.partSize) } catch {
            return .done(.failed(UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(error)")))
        }
        guard let fingerprint = record.contentFingerprint else {
            return .done(.failed(UploadError(
                exitStatus: .software, scope: .object, message: "\(record.key) has no content fingerprint to upload under")))
        }
        let machine = UploadStateMachine(
            resuming: .init(
                logicalUploadID: record.id, file: uploader.stagedPath, fingerprint: fingerprint, plan: plan,
                phase: record.phase, uploadID: record.uploadID, parts: parts.map(\.acknowledged),
                restartCount: record.restartCount, failure: nil),
            configuration: .init(maxRestarts: uploader.settings.maxRestarts, partsInFlight: uploader.settings.partsInFlight))
        var run = UploadRun(
            uploader: uploader, plan: plan, sender: sender, machine: machine,
            journalled: Dictionary(uniqueKeysWithValues: parts.map { ($0.number, $0.acknowledged) }))
        return await run.run()
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

    private mutating func run() async -> ObjectUploader.Attempt {
        await withTaskGroup(of: PartAnswer.self) { group -> ObjectUploader.Attempt in
            var actions = machine.start()
            while true {
                while !actions.isEmpty {
                    switch await perform(actions.removeFirst(), group: &group) {
                    case .more(let more): actions += more
                    case .end(let attempt):
                        group.cancelAll()
                        return attempt
                    }
                }
                // Asked to stop: once the parts on the wire have ended (and been journalled
                // above), the upload is left for later.
                if uploader.stop.isRaised, group.isEmpty { return .done(.interrupted) }
                guard let answer = await group.next() else {
                    return .done(.failed(UploadError(
                        exitStatus: .software, scope: .object,
                        message: "the upload of \(record.key) stalled with no request outstanding (a bug: please report it)")))
                }
                switch await received(answer) {
                case .more(let more): actions = more
                case .end(let attempt):
                    group.cancelAll()
                    return attempt
                }
            }
        }
    }

    // MARK: the machine's actions

    private mutating func perform(_ action: UploadStateMachine.Action, group: inout TaskGroup<PartAnswer>) async -> Step {
        switch action {
        case .persist(let snapshot): await persist(snapshot)
        case .createUpload: await createUpload()
        case .putObject: await putObject()
        case .listParts(let uploadID): await listParts(uploadID)
        case let .sendParts(uploadID, numbers): sendParts(numbers, of: uploadID, group: &group)
        case let .complete(uploadID, parts): await complete(uploadID, parts: parts)
        case .abort(let uploadID): await abort(uploadID)
        case .verify: await verify()
        case .finish(let outcome): await finish(outcome)
        }
    }

    private mutating func persist(_ snapshot: UploadStateMachine.Snapshot) async -> Step {
        let now = Dictionary(uniqueKeysWithValues: snapshot.parts.map { ($0.number, $0) })
        let added = snapshot.parts.filter { journalled[$0.number] != $0 }
        let removed = journalled.keys.filter { now[$0] == nil }
        do {
            try await uploader.journal.persist(snapshot, added: added, removed: removed, lastError: cause?.message)
        } catch {
            return .end(.done(.failed(.journal(error))))
        }
        journalled = now
        for _ in added { uploader.hooks.partJournalled() }
        return .more([])
    }

    private mutating func createUpload() async -> Step {
        uploader.sink.emit(.upload(.initiating(record)))
        do throws(S3ClientError) {
            let id = try await client.createMultipartUpload(
                key: record.key, headers: record.requestHeaders + record.checksum.createMultipartUploadHeaders)
            return .more(machine.uploadCreated(uploadID: id))
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
        } catch {
            return .more(machine.requestFailed(given(up: error, "CreateMultipartUpload \(record.key)")))
        }
    }

    /// A single PUT: the whole file in one `PutObject`, written only where the key is free
    /// (`If-None-Match: *`).
    private mutating func putObject() async -> Step {
        if uploader.stop.isRaised { return .end(.done(.interrupted)) }
        uploader.sink.emit(.upload(.initiating(record)))
        let range = plan.range(ofPart: 1)
        // A small body is read first, into memory: its digest and hash come from those bytes.
        let body: HTTPBody
        switch uploader.body(of: range) {
        case .success(let value): body = value
        case .failure(let error): return .end(.done(await uploader.handle(.unreadable(error))))
        }
        let bytes: [UInt8]? = if case .bytes(let bytes) = body { bytes } else { nil }
        let (digest, fromCard): (PartDigest, Bool)
        switch await sender.digest(ofPart: 1, range: range, bytes: bytes) {
        case .success(let value): (digest, fromCard) = value
        case .failure(let error): return .end(.done(await uploader.handle(.unreadable(error))))
        }
        let payloadHash: PayloadHash
        switch await uploader.bodyHash(of: range, bytes: bytes) {
        case .success(let hash): payloadHash = hash
        case .failure(let error): return .end(.done(await uploader.handle(.unreadable(error))))
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
            return .more(machine.objectPut(
                etag: written.etag, digest: digest.journalText,
                confirmed: written.confirms(.expected(singlePut: digest))))
        } catch let error where error.isPreconditionFailed {
            return .end(await uploader.afterPreconditionFailed())
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
        } catch let error where fromCard && error.isBadDigest {
            return .end(.done(await uploader.handle(.refusedByServer(part: nil))))
        } catch {
            return .more(machine.putFailed(given(up: error, "PutObject \(record.key)")))
        }
    }

    private mutating func listParts(_ uploadID: String) async -> Step {
        uploader.sink.emit(.upload(.reconciling(record)))
        do throws(S3ClientError) {
            let listed = try await client.listParts(key: record.key, uploadID: uploadID)
            let known = Set(machine.acknowledgedParts.map(\.number))
            let adopted = await adopt(listed.filter {
                !known.contains($0.number) && plan.partNumbers.contains($0.number) && $0.size == plan.length(ofPart: $0.number)
            })
            return .more(machine.partsListed(Self.remoteParts(listed, journal: machine.acknowledgedParts), adopted: adopted))
        } catch .uploadGone {
            return .more(machine.uploadGone(uploadID: uploadID))
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
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
        // A server that ignores If-None-Match: the key is looked at first, once.
        if !uploader.conditionalWrites {
            let look = await uploader.lookAtKey()
            if let decided = ObjectUploader.decided(by: look) {
                if case .success = look { try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID) }
                return .end(decided)
            }
        }
        do throws(S3ClientError) {
            let etag = try await client.completeMultipartUpload(
                key: record.key, uploadID: uploadID,
                parts: parts.map {
                    CompletedPart(number: $0.number, etag: $0.etag, digest: $0.digest.flatMap { try? PartDigest(journalText: $0) })
                }, headers: [.ifNoneMatchAny])
            uploader.hooks.completed()
            return .more(machine.completed(etag: etag))
        } catch let error where error.isPreconditionFailed {
            return .end(await uploader.afterPreconditionFailed(uploadID: uploadID, parts: wholeDigest))
        } catch .uploadGone {
            return .more(machine.completeFailed(.restartUpload))
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
        } catch {
            return .more(machine.completeFailed(given(up: error, "CompleteMultipartUpload \(record.key)")))
        }
    }

    private mutating func abort(_ uploadID: String) async -> Step {
        do throws(S3ClientError) {
            try await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
            return .more(machine.abortConfirmed())
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
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
            var found = head.metadata[ObjectLabelKeys.fingerprint]
            if found == nil, record.fingerprintGoesInTag {
                found = try await taggedFingerprint(of: head, provenOurs: mismatch == nil && (check == .matches || machine.isConfirmingCompletion))
            }
            return .more(machine.objectAlreadyExists(
                size: head.size, fingerprint: found.flatMap(Fingerprint.init(hex:)), digestMismatch: mismatch))
        } catch where cutByStop(error) {
            return .end(.done(.interrupted))
        } catch {
            return .more(machine.requestFailed(given(up: error, "HeadObject \(record.key)")))
        }
    }

    /// What the server's digest of the object must be, from the digests of the parts
    /// acknowledged; nil when they are not all known or not of one algorithm.
    private var wholeDigest: WholeObjectDigest? {
        let digests = machine.acknowledgedParts.compactMap { part in part.digest.flatMap { try? PartDigest(journalText: $0) } }
        if digests.count != plan.partCount || Set(digests.map(\.algorithm)).count != 1 { return nil }
        return plan.isSinglePut ? .expected(singlePut: digests[0]) : .expected(parts: digests)
    }

    /// The fingerprint of an object whose parts were sent while its file was read (see
    /// ``UploadRecord/fingerprintGoesInTag``): its `xxh128` tag. An object of our size
    /// without one is given it when it is proven ours: the server's digest of it is the
    /// one our parts make (their CRC32Cs come from the same read of the card as the
    /// fingerprint), or our `Complete` has just written it where the key was free
    /// (``UploadStateMachine/isConfirmingCompletion``). This is also what a run killed between the
    /// `Complete` and the tagging finds on resume.
    private func taggedFingerprint(of head: ObjectHead, provenOurs: Bool) async throws(S3ClientError) -> String? {
        if let tagged = try await client.recordedFingerprint(of: head, key: record.key) { return tagged }
        guard provenOurs, head.size == plan.fileSize else { return nil }
        try await uploader.tagFingerprint()
        return record.fingerprint
    }

    private func finish(_ outcome: UploadStateMachine.Outcome) async -> Step {
        switch outcome {
        case .uploaded:
            await abortStrayUploads()
            return .end(.done(.uploaded(alreadyThere: false)))
        case .alreadyUploaded:
            await abortStrayUploads()
            return .end(.done(.uploaded(alreadyThere: true)))
        case .aborted:
            return .end(.done(.aborted))
        case .failed(let failure):
            return .end(.done(.failed(error(failure))))
        }
    }

    // MARK: the parts' answers

    private mutating func received(_ answer: PartAnswer) async -> Step {
        switch answer {
        case let .acknowledged(uploadID, number, etag, digest):
            let actions = machine.partAcknowledged(uploadID: uploadID, number: number, etag: etag, digest: digest.journalText)
            uploader.sink.emit(.upload(.partUploaded(
                record, number: number, partCount: plan.partCount, bytes: plan.length(ofPart: number))))
            return .more(actions)
        case let .failed(uploadID, number, error):
            if case .uploadGone = error {
                return .more(machine.partFailed(uploadID: uploadID, number: number, decision: .restartUpload))
            }
            return .more(machine.partFailed(
                uploadID: uploadID, number: number, decision: given(up: error, "UploadPart \(number) of \(record.key)")))
        case .unreadable(let error):
            return .end(.done(await uploader.handle(.unreadable(error))))
        case .damaged(let number):
            return .end(.done(await uploader.handle(.refusedByServer(part: number))))
        case .notSent:
            return .more([])
        }
    }

    // MARK: helpers

    /// The request was cut because the process is stopping (``CurlTransport/cut()``): not a
    /// failure of the upload, which is left as the journal has it and resumes from there.
    private func cutByStop(_ error: S3ClientError) -> Bool { uploader.stop.isRaised && error.isCut }

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

    /// The machine's reason, with the server's words when a request ended it.
    private func error(_ failure: UploadFailure) -> UploadError {
        switch failure {
        case .requestFailed:
            return cause ?? UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(failure)")
        case .restartLimitExceeded:
            return UploadError(exitStatus: .partial, scope: .object, message: "\(record.key): \(failure)")
        case .verificationFailed, .digestMismatch:
            return UploadError(exitStatus: .integrity, scope: .object, message: "\(record.key): \(failure)")
        }
    }

    /// The object is in place: any multipart upload still open at its key is a stray, one
    /// whose `CreateMultipartUpload` answer was lost (a kill before the journal write, a
    /// connection cut after the server answered, a retry that created a second). Aborted
    /// now, so none waits for the rescan's sweep; a failure to list or abort only waits
    /// for that sweep.
    /// A single PUT opens no multipart upload: nothing to look for.
    private func abortStrayUploads() async {
        guard !plan.isSinglePut else { return }
        _ = try? await client.abortUploads(key: record.key, known: nil)
    }

    /// Parts the server holds that the journal never recorded (acknowledged just before a
    /// kill), proved ours: the server's ETag of a part is its MD5, so a part whose ETag is
    /// the MD5 of the staged range holds exactly those bytes and need not be sent again.
    /// A part that does not prove ours (another ETag form, encryption) is simply resent.
    private func adopt(_ parts: [ListedPart]) async -> [UploadStateMachine.AcknowledgedPart] {
        var adopted: [UploadStateMachine.AcknowledgedPart] = []
        let path = uploader.stagedPath
        for part in parts {
            let range = plan.range(ofPart: part.number)
            guard case .success(let md5) = await ObjectUploader.digest(.md5, path: path, offset: range.offset, length: range.length),
                ETag.unquoted(part.etag).lowercased() == lowercaseHex(md5.bytes)
            else { continue }
            let digest: PartDigest
            if record.checksum == .md5 {
                digest = md5
            } else if case .success(let value) = await ObjectUploader.digest(
                record.checksum, path: path, offset: range.offset, length: range.length)
            {
                digest = value
            } else {
                continue
            }
            adopted.append(.init(number: part.number, etag: part.etag, size: part.size, digest: digest.journalText))
        }
        return adopted
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

extension ObjectUploader {
    /// Digests one part and sends it, within the process-wide limit.
    func sendPart(
        uploadID: String, number: Int, range: (offset: Int64, length: Int64), sender: PartSender
    ) async -> UploadRun.PartAnswer {
        await limiter.withPermit(range.length) { () async -> UploadRun.PartAnswer in
            if stop.isRaised { return .notSent }
            let (digest, fromCard): (PartDigest, Bool)
            switch await sender.digest(ofPart: number, range: range) {
            case .success(let value): (digest, fromCard) = value
            case .failure(let error): return .unreadable(error)
            }
            let payloadHash: PayloadHash
            switch await bodyHash(of: range) {
            case .success(let hash): payloadHash = hash
            case .failure(let error): return .unreadable(error)
            }
            do throws(S3ClientError) {
                let etag = try await client.uploadPart(
                    key: record.key, uploadID: uploadID, partNumber: number,
                    body: .file(path: stagedPath, offset: range.offset, length: range.length), payloadHash: payloadHash,
                    headers: digest.headers)
                return .acknowledged(uploadID: uploadID, number: number, etag: etag, digest: digest)
            } catch {
                if stop.isRaised, error.isCut { return .notSent }
                if fromCard, error.isBadDigest { return .damaged(number: number) }
                return .failed(uploadID: uploadID, number: number, error: error)
            }
        }
    }
}
