import Foundation

/// The handover of a multipart upload between stations: before this station creates an
/// upload for a key, and once more right after, it looks for an upload of the same key in
/// progress. Under a key template that any station computes alike (no `{device}`), that is
/// another station with the same card (a card handed over after a crash, or a clone read
/// at the same time), or a process of this station killed between creating an upload and
/// journalling it.
///
/// The coordination lives in the store, through what S3 guarantees, not in a coordinator
/// of ours:
/// - the uploads of a key are ordered by when they began (then by id), the same order for
///   every station, so of two stations that create one at once, exactly one finds the
///   other's first and gives its own up;
/// - an upload found is waited for while its sender is sending it (a part stored within
///   `[upload] adopt_after`), so a file goes about once, not once per station;
/// - once its sender is quiet, the upload is taken over: each of its parts counts only when
///   its digest equals this station's own read of the same bytes
///   (``adopt(_:plan:)``), the rest is sent, and the upload is completed under
///   `If-None-Match: *`. Two stations that take one over at once send the missing parts
///   both; one `Complete` makes the object, the other finds it theirs (same size and
///   fingerprint) and ends without error.
///
/// An upload is never aborted here unless it is this station's own, created a moment ago
/// and found behind another: one that another station may still be sending is left alone
/// (the orphan sweep aborts what no journal knows, once older than `[rescan]
/// orphan_upload_age`).
extension ObjectUploader {
    /// What the look for an upload in progress found.
    enum Handover: Sendable {
        /// None, or this station's own is the first: go on.
        case none
        /// The first upload of the key, quiet now: take it over.
        case takeOver(uploadID: String)
        /// The upload waited for ended (completed, or abandoned by its sender).
        case ended
        /// The process is stopping.
        case stopped
    }

    /// Looks for an upload of the key in progress that began before `ours` (nil: before
    /// this station creates one), waits while it is being sent, and says what to do. When
    /// `ours` is behind another, it is aborted first: it was created a moment ago, and
    /// nothing was sent to it.
    ///
    /// A store that cannot list uploads, or a listing that fails, finds nothing: the
    /// handover only saves bytes, and the conditional `Complete` keeps the key's one
    /// object whatever happens.
    ///
    /// `passedOver`: uploads of the key this run has worked on already and left (the server
    /// said one was gone): never taken over again, even if a listing still shows them.
    func handover(behind ours: String? = nil, passedOver: Set<String> = []) async -> Handover {
        guard record.partSize != nil,
            let first = await client.uploadAhead(of: ours, key: record.key, passedOver: passedOver)
        else { return .none }
        if let ours { try? await client.abortMultipartUpload(key: record.key, uploadID: ours) }
        return await waitWhileSent(first)
    }

    /// Waits while `upload` is being sent: until it ends, or no part of it was stored for
    /// `[upload] adopt_after` (its sender stopped, or is too slow to wait for). A part's
    /// time is the server's (`LastModified`), the upload's start when it has none; it is
    /// compared with this station's clock, so a clock ahead of the server's takes over
    /// sooner, one behind waits longer (`ingest check` reports the skew).
    func waitWhileSent(_ upload: ListedUpload) async -> Handover {
        var announced = false
        let quiet = settings.adoptAfter.inSeconds
        polling: while true {
            if stop.isRaised { return .stopped }
            let parts: [ListedPart]
            do {
                parts = try await client.listParts(
                    key: record.key, uploadID: upload.uploadID, partSize: record.partSize ?? record.size)
            } catch .uploadGone {
                return .ended
            } catch {
                // Its parts cannot be seen now: taking it over lists them again, and fails there in words.
                break polling
            }
            let last = parts.compactMap(\.lastModified).max().map { max($0, upload.initiated) } ?? upload.initiated
            let idle = Date().timeIntervalSince(last)
            if idle >= quiet { break polling }
            if !announced {
                sink.emit(.upload(.waitingForUpload(record, uploadID: upload.uploadID)))
                announced = true
            }
            // Poll often enough to take over soon after its sender stops, rarely enough to
            // cost the server nothing: one ListParts every few seconds.
            let pause = min(max(quiet - idle, 0.2), 5)
            try? await Task.sleep(for: .milliseconds(Int(pause * 1000)))
        }
        sink.emit(.upload(.takingOver(record, uploadID: upload.uploadID)))
        return .takeOver(uploadID: upload.uploadID)
    }
}

extension ObjectStore {
    /// The first upload in progress at exactly `key`, when it is not `ours`: the one that
    /// began first, then the smallest id, an order every station sees alike. `ours` nil:
    /// the first of any. nil when there is none, when `ours` is the first (or not listed
    /// yet), or when the store cannot list uploads or the listing fails: the handover
    /// only saves bytes, and the conditional `Complete` keeps the key's one object
    /// whatever happens.
    /// Uploads in `passedOver` count as not there.
    func uploadAhead(of ours: String?, key: String, passedOver: Set<String> = []) async -> ListedUpload? {
        guard capabilities.contains(.listing),
            let listing = try? await listUploads(prefix: key, keeping: { $0.key == key && !passedOver.contains($0.uploadID) }),
            let first = listing.uploads.min(by: { ($0.initiated, $0.uploadID) < ($1.initiated, $1.uploadID) })
        else { return nil }
        guard let ours else { return first }
        guard first.uploadID != ours, listing.uploads.contains(where: { $0.uploadID == ours }) else { return nil }
        return first
    }
}
