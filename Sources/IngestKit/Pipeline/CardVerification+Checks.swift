import Foundation

/// The object checks, behind the reading: each file judged against its journal record, and
/// the object its upload made looked at (a few at once).
extension CardVerification {
    /// Takes what the reading found, judges each file against its journal record, checks its
    /// object (a few at once) and reports every problem. Returns what ended the check early,
    /// if anything did.
    func judge(
        _ batches: Batches<CardFinding>, into summary: inout CardVerificationSummary, progress: CardVerificationProgress,
        stop: StopFlag, report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async -> IngestError? {
        var stores: [S3Destination: any ObjectStore] = [:]
        var failure: IngestError?
        func settle(_ verdict: CardVerdict, size: Int64) {
            summary.files += 1
            summary.bytes = summary.bytes.addingSaturating(size)
            switch verdict {
            case .verified, .readBack:
                summary.verified += 1
                summary.verifiedBytes = summary.verifiedBytes.addingSaturating(size)
                if case .readBack(let bytes) = verdict {
                    summary.readBackFiles += 1
                    summary.readBackBytes = summary.readBackBytes.addingSaturating(bytes)
                }
            case .problem(let problem):
                summary.counts[problem.code, default: 0] += 1
                progress.problems.add(1, ordering: .relaxed)
                report(.problem(problem))
            case .destination(let error):
                // Not the file's problem: the check stops, and the file is not counted.
                summary.files -= 1
                summary.bytes -= size
                if failure == nil { failure = .upload(error) }
                return
            }
            progress.filesChecked.add(1, ordering: .relaxed)
        }
        await withTaskGroup(of: (CardVerdict, Int64).self) { group in
            var inFlight = 0
            taking: while let batch = await batches.next() {
                for finding in batch {
                    guard failure == nil else { break taking }
                    switch finding {
                    case let .lost(path, reason):
                        let problem = CardVerificationProblem(
                            code: .lost, path: path,
                            message: "\(reason): what it holds was never ingested (\(reason.code))")
                        summary.counts[.lost, default: 0] += 1
                        progress.problems.add(1, ordering: .relaxed)
                        report(.problem(problem))
                    case let .file(read, entry):
                        switch Self.judge(read, entry) {
                        case .settled(let verdict):
                            settle(verdict, size: read.size)
                        case .check(let check):
                            let store: any ObjectStore
                            if let known = stores[check.target] {
                                store = known
                            } else {
                                do throws(IngestError) { store = try self.store(check.target) } catch {
                                    failure = error
                                    break taking
                                }
                                stores[check.target] = store
                                if readBack != nil, !store.capabilities.contains(.rangedReads) {
                                    summary.readBackUnavailable.append(check.target.displayName)
                                    report(.readBackUnavailable(destination: check.target.displayName))
                                }
                            }
                            if inFlight >= headsInFlight, let (verdict, size) = await group.next() {
                                inFlight -= 1
                                settle(verdict, size: size)
                                guard failure == nil else { break taking }
                            }
                            let readBack = store.capabilities.contains(.rangedReads) ? readBack : nil
                            group.addTask {
                                var verdict = await Self.check(check, in: store)
                                if case .verified(let head?) = verdict, let readBack {
                                    verdict = await Self.readBack(check, head: head, in: store, with: readBack, progress: progress, stop: stop)
                                }
                                return (verdict, check.size)
                            }
                            inFlight += 1
                        }
                    }
                }
            }
            while let (verdict, size) = await group.next() { settle(verdict, size: size) }
        }
        return failure
    }

    /// What the journal says of a file just read: a verdict, or the object to check.
    static func judge(_ read: CardFileRead, _ entry: CardJournalEntry?) -> CardJudgement {
        func problem(_ code: CardVerificationProblem.Code, _ message: String, upload: UploadRecord? = nil) -> CardJudgement {
            .settled(.problem(CardVerificationProblem(
                code: code, path: read.path, message: message, size: read.size, fingerprint: read.fingerprint,
                key: upload?.key, uploadID: upload?.id)))
        }
        guard let fingerprint = read.fingerprint else {
            return problem(.unreadable, "cannot be read: \(read.failure ?? "unknown error"); it was not checked")
        }
        guard let entry else {
            return problem(.notInJournal, "not in the journal: never ingested from this card (ingest it: ingest PATH)")
        }
        if entry.size != read.size || entry.mtime != read.mtime {
            return problem(
                .changed,
                "changed on the card since it was ingested: now \(read.size) bytes, modified \(Self.time(read.mtime)); "
                    + "the journal has \(entry.size) bytes, modified \(Self.time(entry.mtime)) (ingest the card again)")
        }
        if entry.state == .forgotten {
            return problem(.pending, "given up with `ingest forget`: not in the bucket")
        }
        if let lost = entry.objectLost {
            return problem(
                .objectMissing,
                "its object was verified, then found not as verified in the bucket (\(lost)), and its staged copy is "
                    + "gone: keep the card, and ingest it again to send the file")
        }
        guard let recorded = entry.fingerprint.flatMap(Fingerprint.init(hex:)) else {
            let why = entry.lastError.map { " (last error: \($0))" } ?? ""
            return problem(.notInJournal, "known to the journal but not staged yet\(why); ingest the card again")
        }
        if recorded != fingerprint {
            return problem(
                .changed,
                "its bytes changed since it was ingested, with the same size and time: its fingerprint is now "
                    + "\(fingerprint.hex), the journal has \(recorded.hex). The card may be failing, or the file was "
                    + "rewritten in place; an ingest does not read it again while its size and time stay the same")
        }
        guard entry.state == .uploaded else {
            guard let upload = entry.upload else {
                return problem(.pending, "staged but not uploaded: ingest the card again (uploading) to send it")
            }
            return problem(
                .pending,
                "staged, its upload \(upload.id) is \(upload.phase.rawValue): run `ingest resume \(upload.id)` "
                    + "or ingest the card again",
                upload: upload)
        }
        guard let upload = entry.upload else {
            return problem(.pending, "the journal marks it uploaded but records no upload of it: no object to check")
        }
        guard upload.phase == .completed else {
            return problem(
                .pending, "its upload \(upload.id) is \(upload.phase.rawValue), not completed: run `ingest resume \(upload.id)`",
                upload: upload)
        }
        return .check(CardObjectCheck(
            path: read.path, size: read.size, fingerprint: fingerprint, key: upload.key, uploadID: upload.id,
            target: upload.target, recorded: upload.recordedObject, headers: upload.requestHeaders))
    }

    /// `HEAD` of the file's object: the same object as the one its completion recorded
    /// (``StoredObject``: ETag, size, checksum, version), and its fingerprint label (metadata,
    /// or its tag) the card's. The label alone proves nothing (anyone who can write the bucket
    /// can copy it); the recorded identity is the server's word on the bytes.
    /// A verified object's verdict carries its `HEAD`, for a read-back to follow.
    static func check(_ check: CardObjectCheck, in store: any ObjectStore) async -> CardVerdict {
        func problem(_ code: CardVerificationProblem.Code, _ message: String) -> CardVerdict {
            .problem(CardVerificationProblem(
                code: code, path: check.path, message: message, size: check.size, fingerprint: check.fingerprint,
                key: check.key, uploadID: check.uploadID))
        }
        let place = check.target.isTus ? check.recorded?.etag ?? check.key : "s3://\(check.target.bucket)/\(check.key)"
        do throws(S3ClientError) {
            let found: ObjectHead?
            if let recorded = check.recorded {
                found = try await store.headObject(recorded: recorded, key: check.key, headers: check.headers)
            } else {
                found = try await store.headObject(key: check.key)
            }
            guard let head = found else {
                return problem(
                    .objectMissing, "no object at \(place) (at \(check.target.endpoint)): the destination lost it")
            }
            guard head.size == check.size else {
                return problem(
                    .objectDiffers, "the object at \(place) holds \(head.size) bytes, the card's file \(check.size)")
            }
            guard let recorded = try await store.recordedFingerprint(of: head, key: check.key) else {
                return problem(
                    .noFingerprint,
                    "the object at \(place) carries no xxh128 fingerprint (metadata or tag): it is not the one ingest uploaded")
            }
            guard Fingerprint(hex: recorded) == check.fingerprint else {
                return problem(
                    .objectDiffers,
                    "the object at \(place) records fingerprint \(recorded), the card's file has \(check.fingerprint.hex)")
            }
            if let difference = check.recorded?.difference(from: head) {
                return problem(
                    .objectDiffers,
                    "the object at \(place) is not the one verified when it was uploaded (\(difference)): it was replaced; "
                        + "keep the card, and run ingest status --check-bucket to send the file to its alternative key")
            }
            return .verified(head: head)
        } catch {
            let sorted = UploadError(error, what: "checking \(place)", target: check.target)
            if sorted.scope == .destination { return .destination(sorted) }
            return problem(.objectUnchecked, "could not be checked: \(sorted.message)")
        }
    }

    /// A time from the journal or the card, for people: UTC, to the second.
    static func time(_ nanoseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(nanoseconds / 1_000_000_000)).formatted(.iso8601)
    }
}

/// The object a file's upload made, to look at.
struct CardObjectCheck: Sendable {
    var path: CardPath
    var size: Int64
    var fingerprint: Fingerprint
    var key: String
    var uploadID: String
    var target: S3Destination
    /// The object's identity as its completion recorded it; nil for a journal older than v15
    /// (then only the size and the label are compared).
    var recorded: StoredObject?
    /// What its upload was created with (a tus store, which cannot read every label back,
    /// keeps them).
    var headers: [SigV4Header] = []
}

enum CardVerdict: Sendable {
    /// In the bucket with the card's size and fingerprint label, as its `HEAD` showed.
    case verified(head: ObjectHead?)
    /// Read back too: every byte, this many, hashed to the card's fingerprint.
    case readBack(bytes: Int64)
    case problem(CardVerificationProblem)
    /// The destination cannot be asked (unreachable, credentials, no bucket): the check stops.
    case destination(UploadError)
}

enum CardJudgement: Sendable {
    case settled(CardVerdict)
    case check(CardObjectCheck)
}
