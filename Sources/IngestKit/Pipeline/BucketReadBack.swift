import Foundation

/// What one night's read-back (`[rescan] read_back_bytes`) read and found.
public struct ReadBackOutcome: Sendable, Equatable {
    /// The night's budget; 0: the read-back is off.
    public var budget: Int64 = 0
    /// Objects read back whole, and their bytes.
    public var objects = 0
    public var bytes: Int64 = 0
    /// Objects whose bytes are not the ones ingested (or that are gone): their uploads start
    /// again, to the file's alternative key.
    public var problems: [BucketProblem] = []
    /// Destinations that cannot read objects back (a tus server): their objects were passed by.
    public var unavailable: [String] = []
    /// What stopped the read-back before the objects it took were all read.
    public var error: UploadError?

    public init(budget: Int64 = 0) { self.budget = budget }

    /// 76 when an object's bytes are not the ones ingested; the error's status when one
    /// stopped it; else success.
    public var exitStatus: ExitStatus {
        if !problems.isEmpty { return .integrity }
        return error?.exitStatus ?? .success
    }
}

/// The nightly read-back: a budget of bytes read back from the bucket every rescan, rotating
/// through the verified objects of the cards seen in the last `days` days, the
/// objects read back longest ago (or never) first, so that successive nights cover them all
/// (``Journal/readBackCandidates(seenSince:budget:)``). Each object is looked at (`HEAD`),
/// read in ranges and fingerprinted (``ObjectReadBack``), and its read-back time journalled
/// when its bytes are the ones ingested.
///
/// An object whose bytes are other ones, though its size and label may match, is a problem
/// that names its card and key, and its upload starts again at the file's alternative key
/// (``KeyTemplate/alternativeKey(_:fingerprint:)``): its own key is held by other bytes,
/// whose copied label would make a repair there see "the same fingerprint, done". The object
/// there is journalled as foreign (``Journal/noteForeignObject(key:etag:target:)``), so that an
/// upload that meets the copied label there later (the file planned afresh from the card, its staged
/// copy gone) moves aside too. The upload is sent from its staged copy when that is still
/// there, else from the card at its next ingest. Either way the card is not safe to erase
/// meanwhile.
extension UploadService {
    public func readBack(budget: Int64, days: Int, reader: ObjectReadBack = ObjectReadBack(), now: Date = Date()) async
        -> ReadBackOutcome
    {
        var outcome = ReadBackOutcome(budget: budget)
        guard budget > 0, days > 0 else { return outcome }
        let candidates: [ReadBackCandidate]
        do {
            candidates = try await journal.readBackCandidates(
                seenSince: now.addingTimeInterval(-Double(days) * 86_400), budget: budget)
        } catch {
            outcome.error = .journal(error)
            return outcome
        }
        let stop = StopFlag()
        var passedBy: Set<S3Destination> = []
        for candidate in candidates {
            guard !passedBy.contains(candidate.target) else { continue }
            let client: any ObjectStore
            switch await destinations.reader(for: candidate.target) {
            case .success(let store): client = store
            case .failure(let error):
                outcome.error = outcome.error ?? error
                passedBy.insert(candidate.target)
                continue
            }
            guard client.capabilities.contains(.rangedReads) else {
                passedBy.insert(candidate.target)
                outcome.unavailable.append(candidate.target.displayName)
                logger.info(
                    "the destination cannot read objects back: not read back",
                    metadata: ["destination": "\(candidate.target.displayName)"])
                continue
            }
            do throws(UploadError) {
                try await readBack(candidate, from: client, reader: reader, stop: stop, into: &outcome, now: now)
            } catch {
                outcome.error = outcome.error ?? error
                if error.scope == .destination { passedBy.insert(candidate.target) }
                logger.warning(
                    "could not read an object back", metadata: ["key": "\(candidate.key)", "error": "\(error.message)"])
            }
        }
        return outcome
    }

    private func readBack(
        _ candidate: ReadBackCandidate, from client: any ObjectStore, reader: ObjectReadBack, stop: StopFlag,
        into outcome: inout ReadBackOutcome, now: Date
    ) async throws(UploadError) {
        let place = "s3://\(candidate.target.bucket)/\(candidate.key)"
        let found: ObjectReadBack.Outcome
        let head: ObjectHead?
        do throws(S3ClientError) {
            head = try await client.headObject(key: candidate.key)
            if let head, head.size == candidate.size {
                found = try await reader.read(key: candidate.key, size: head.size, etag: head.etag, in: client, stop: stop)
            } else {
                found = .missing
            }
        } catch {
            throw UploadError(error, what: "reading \(place) back", target: candidate.target)
        }
        switch found {
        case .read(let fingerprint) where fingerprint.hex == candidate.fingerprint:
            outcome.objects += 1
            outcome.bytes = outcome.bytes.addingSaturating(candidate.size)
            do { try await journal.noteReadBack(ofUpload: candidate.uploadID, at: now) } catch { throw .journal(error) }
        case .read(let fingerprint):
            outcome.objects += 1
            outcome.bytes = outcome.bytes.addingSaturating(candidate.size)
            try await repair(
                candidate, .changed,
                "card \(candidate.cardName), \(candidate.path.display): read back, its bytes hash to \(fingerprint.hex), "
                    + "\(candidate.fingerprint) ingested", found: head?.etag, into: &outcome)
        case .replaced:
            // The object that holds the key now is the one to record as foreign.
            let now = try? await client.headObject(key: candidate.key)
            try await repair(
                candidate, .changed,
                "card \(candidate.cardName), \(candidate.path.display): replaced while it was read back",
                found: now?.etag, into: &outcome)
        case .missing:
            let detail = head.map { "\($0.size) bytes, \(candidate.size) ingested" } ?? "gone"
            try await repair(candidate, head == nil ? .missing : .changed,
                "card \(candidate.cardName), \(candidate.path.display): \(detail)", found: head?.etag, into: &outcome)
        case .stopped:
            return
        }
    }

    /// The object is not the one ingested: a problem, and its upload starts again, at the
    /// file's alternative key when other bytes hold its own. `found`: the ETag of the object
    /// that holds the key now, recorded as foreign (``Journal/noteForeignObject(key:etag:target:)``).
    private func repair(
        _ candidate: ReadBackCandidate, _ kind: BucketProblem.Kind, _ detail: String, found: String?,
        into outcome: inout ReadBackOutcome
    ) async throws(UploadError) {
        let problem = BucketProblem(
            kind: kind, volumeKey: candidate.volumeKey, path: candidate.path, key: candidate.key, detail: detail)
        outcome.problems.append(problem)
        logger.warning(
            "an object read back is not the one ingested",
            metadata: ["card": "\(candidate.cardName)", "key": "\(candidate.key)", "problem": "\(kind.rawValue)"])
        try await repairObject(ObjectRepair(
            problem: problem, uploadID: candidate.uploadID, fingerprint: candidate.fingerprint, target: candidate.target,
            found: found, restart: .atAlternativeKey))
    }
}
