import Foundation

/// An object the journal says is verified, found missing or changed in the bucket.
public struct BucketProblem: Sendable, Equatable {
    public enum Kind: String, Sendable { case missing, changed }
    public var kind: Kind
    public var volumeKey: String
    public var path: CardPath
    public var key: String
    public var detail: String

    public var text: String { "\(key): \(kind == .missing ? "missing from the bucket" : "changed in the bucket") (\(detail))" }
}

/// What a check of the cards' folders found.
public struct BucketCheckOutcome: Sendable, Equatable {
    public var cards = 0
    public var objects = 0
    public var problems: [BucketProblem] = []
    /// A folder could not be listed; the others were checked.
    public var error: UploadError?
    public init() {}
}

/// The bucket is checked, not trusted: each card seen lately has its folder listed
/// (`ListObjectsV2`, one request per 1,000 keys) and compared with the journal. An object
/// missing, of another size, or with another ETag than the one its completion recorded
/// (``StoredObject``), is a problem: its upload starts again (the file waits for it, so the
/// card is not safe to erase), to be sent from its staged copy, or from the card when that
/// is gone. A changed object is recorded as foreign first (``Journal/noteForeignObject(key:etag:target:)``),
/// so the repair never takes it for ours, whatever metadata was copied onto it: the file goes
/// to its alternative key. What the check finds is compared, never adopted. Only an upload
/// whose completion recorded no ETag (a journal older than v15) is looked at once (`HEAD`:
/// size and recorded fingerprint) and its ETag kept as learned.
extension UploadService {
    public func checkBucket(days: Int, now: Date = Date()) async -> BucketCheckOutcome {
        var outcome = BucketCheckOutcome()
        guard days > 0 else { return outcome }
        let cards: [(volumeKey: String, folder: String)]
        do { cards = try await journal.cardsToCheck(seenSince: now.addingTimeInterval(-Double(days) * 86_400)) } catch {
            outcome.error = .journal(error)
            return outcome
        }
        for card in cards {
            do throws(UploadError) {
                try await check(card.volumeKey, folder: card.folder, into: &outcome)
            } catch {
                if outcome.error == nil { outcome.error = error }
                logger.warning("could not check a card's folder in the bucket", metadata: ["volume": "\(card.volumeKey)", "error": "\(error)"])
            }
        }
        return outcome
    }

    /// The same check of one card, as its rerun begins (before its scan, so that a file whose
    /// object went missing or changed is copied from the card again in this run when its
    /// staged copy is gone): a rerun never believes the journal's word that the card's
    /// objects are there.
    public func checkCard(_ volumeKey: String) async -> BucketCheckOutcome {
        var outcome = BucketCheckOutcome()
        do throws(UploadError) {
            let folder: String?
            do { folder = try await journal.cardFolder(ofVolume: volumeKey) } catch { throw .journal(error) }
            guard let folder else { return outcome }
            try await check(volumeKey, folder: folder, eachUnlisted: false, into: &outcome)
        } catch {
            outcome.error = error
            logger.warning("could not check the card's objects in the bucket", metadata: ["volume": "\(volumeKey)", "error": "\(error)"])
        }
        return outcome
    }

    /// `eachUnlisted`: a destination that cannot list has each object looked at, one request
    /// each (the nightly check and `status --check-bucket`; a card's rerun passes it by).
    private func check(_ volumeKey: String, folder: String, eachUnlisted: Bool = true, into outcome: inout BucketCheckOutcome)
        async throws(UploadError)
    {
        let records: [ObjectOnRecord]
        do { records = try await journal.objectsOnRecord(ofVolume: volumeKey) } catch { throw .journal(error) }
        guard !records.isEmpty else { return }
        outcome.cards += 1
        for (target, records) in Dictionary(grouping: records, by: \.target) {
            let client: any ObjectStore
            switch await destinations.reader(for: target) {
            case .success(let store): client = store
            case .failure(let error): throw error
            }
            guard client.capabilities.contains(.listing) else {
                if eachUnlisted { try await lookAtEach(records, volumeKey: volumeKey, client: client, into: &outcome) }
                continue
            }
            var listed: [String: ListedObject] = [:]
            do {
                try await client.listObjects(prefix: folder) { page in
                    for object in page { listed[object.key] = object }
                }
            } catch { throw UploadError(error, what: "ListObjectsV2 \(folder)", target: target) }
            // Keys outside the card's folder (an earlier template) are not in its listing.
            for record in records where record.key.hasPrefix(folder) {
                outcome.objects += 1
                guard let object = listed[record.key] else {
                    try await problem(.missing, record, volumeKey, "not listed", into: &outcome)
                    continue
                }
                if object.size != record.size {
                    try await problem(
                        .changed, record, volumeKey, "\(object.size) bytes, \(record.size) ingested", found: object.etag, into: &outcome)
                } else if let etag = record.etag {
                    if ETag.unquoted(etag) != ETag.unquoted(object.etag) {
                        try await problem(
                            .changed, record, volumeKey, "ETag \(object.etag), \(etag) when verified", found: object.etag, into: &outcome)
                    }
                } else {
                    try await lookOnce(record, object: object, volumeKey: volumeKey, client: client, into: &outcome)
                }
            }
        }
    }

    /// A destination that cannot list (a tus server) is asked for each object where its
    /// completion recorded it (``ObjectStore/headObject(recorded:key:headers:)``: a tus
    /// upload's URL): one request per object rather than per 1,000, and only for objects
    /// with a recorded identity (an older journal's are passed by, said once).
    private func lookAtEach(
        _ records: [ObjectOnRecord], volumeKey: String, client: any ObjectStore, into outcome: inout BucketCheckOutcome
    ) async throws(UploadError) {
        var unrecorded = 0
        for record in records {
            guard let etag = record.etag else {
                unrecorded += 1
                continue
            }
            outcome.objects += 1
            let recorded = StoredObject(etag: etag, size: record.size)
            let head: ObjectHead?
            do { head = try await client.headObject(recorded: recorded, key: record.key, headers: []) } catch {
                throw UploadError(error, what: "looking at \(record.key)", target: record.target)
            }
            guard let head else {
                try await problem(.missing, record, volumeKey, "no whole object where it was verified", into: &outcome)
                continue
            }
            if let difference = recorded.difference(from: head) {
                try await problem(.changed, record, volumeKey, difference, found: head.etag, into: &outcome)
            }
        }
        if unrecorded > 0 {
            logger.info(
                "objects verified before their identity was recorded cannot be looked at on this destination: not checked",
                metadata: ["objects": "\(unrecorded)", "destination": "\(records[0].target.displayName)"])
        }
    }

    /// An object whose completion recorded no ETag (a journal older than v15): a `HEAD`
    /// finds it ours by size and recorded fingerprint, and its ETag is kept, as learned, for
    /// the listings of later checks.
    private func lookOnce(
        _ record: ObjectOnRecord, object: ListedObject, volumeKey: String, client: any ObjectStore,
        into outcome: inout BucketCheckOutcome
    ) async throws(UploadError) {
        do {
            guard let head = try await client.headObject(key: record.key) else {
                try await problem(.missing, record, volumeKey, "gone since listed", into: &outcome)
                return
            }
            let found = try await client.recordedFingerprint(of: head, key: record.key)
            guard head.size == record.size, found == record.fingerprint else {
                try await problem(
                    .changed, record, volumeKey, "fingerprint \(found ?? "none"), \(record.fingerprint) ingested",
                    found: head.etag, into: &outcome)
                return
            }
            if let etag = head.etag {
                do { try await journal.learnObjectETag(etag, ofUpload: record.uploadID) } catch { throw UploadError.journal(error) }
            }
        } catch let error as UploadError {
            throw error
        } catch let error as S3ClientError {
            throw UploadError(error, what: "HeadObject \(record.key)", target: record.target)
        } catch {
            throw UploadError(exitStatus: .software, scope: .object, message: "\(error)")
        }
    }

    /// `found`: the ETag of the object that holds the key now, for a changed one.
    private func problem(
        _ kind: BucketProblem.Kind, _ record: ObjectOnRecord, _ volumeKey: String, _ detail: String,
        found: String? = nil, into outcome: inout BucketCheckOutcome
    ) async throws(UploadError) {
        let problem = BucketProblem(kind: kind, volumeKey: volumeKey, path: record.path, key: record.key, detail: detail)
        outcome.problems.append(problem)
        logger.warning("an object of a card is not in the bucket as verified", metadata: ["key": "\(record.key)", "problem": "\(kind.rawValue)"])
        // A changed object's key is held by other bytes, recorded as foreign: the upload's own
        // look at its key moves the file to its alternative key.
        try await repairObject(ObjectRepair(
            problem: problem, uploadID: record.uploadID, fingerprint: record.fingerprint, target: record.target, found: found,
            restart: .atItsKey))
    }
}
