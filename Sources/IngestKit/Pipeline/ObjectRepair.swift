import Foundation

/// The repair of an object a check found not as verified, one for every check that finds one
/// (the bucket check, the read-back): the object holding the key now, when it holds other
/// bytes, is recorded as foreign (``Journal/noteForeignObject(key:etag:target:)``) and the
/// file unlisted from that destination's history, since its object moves to another key; then
/// its upload starts again from the staged copy when that is still there, or the file goes
/// back to the card (``Journal/restage(uploadID:reason:objectLost:at:)``), which its next
/// ingest copies again. Either way the card is not safe to erase in that destination meanwhile.
struct ObjectRepair: Sendable {
    /// Where the upload starts again when other bytes hold the object's key (a missing
    /// object's comes back to its own key either way).
    enum Restart: Sendable {
        /// At its own key: the upload's look at the key finds the object recorded foreign and
        /// moves the file to its alternative key itself (the bucket check).
        case atItsKey
        /// Straight at the file's alternative key (``KeyTemplate/alternativeKey(_:fingerprint:)``):
        /// the read-back, whose finding is the bytes, not an ETag the look could go by.
        case atAlternativeKey
    }

    var problem: BucketProblem
    var uploadID: String
    var fingerprint: String
    var target: S3Destination
    /// The ETag of the object that holds the key now, for a changed one.
    var found: String?
    var restart: Restart
}

extension UploadService {
    /// Repairs the object of `repair`; the caller has counted and logged its problem.
    func repairObject(_ repair: ObjectRepair) async throws(UploadError) {
        let problem = repair.problem
        let fingerprint = Fingerprint(hex: repair.fingerprint)
        let staged = fingerprint.map(staging.path(for:))
        var key = problem.key
        if problem.kind == .changed, repair.restart == .atAlternativeKey, let fingerprint {
            do { key = try KeyTemplate.alternativeKey(problem.key, fingerprint: fingerprint) } catch {
                throw UploadError(exitStatus: .dataError, scope: .object, message: "\(error)")
            }
        }
        do {
            // Other bytes hold its key: it goes to its alternative key, which the card's next
            // generation lists. Missing, it comes back to the key its history lists already.
            if problem.kind == .changed {
                if let found = repair.found {
                    try await journal.noteForeignObject(key: problem.key, etag: found, target: repair.target)
                }
                try await journal.unlist(problem.path, ofVolume: problem.volumeKey, upload: repair.uploadID)
            }
            if let staged, System.exists(staged) {
                _ = try await journal.restartUpload(id: repair.uploadID, key: key)
            } else {
                try await journal.restage(uploadID: repair.uploadID, reason: problem.text, objectLost: true)
            }
        } catch { throw .journal(error) }
    }
}
