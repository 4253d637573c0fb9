import Foundation
import Logging

/// What the orphan sweep did at one destination.
public struct OrphanSweepOutcome: Sendable, Equatable {
    public var target: S3Destination
    /// The key prefix listed (`[s3] prefix`; empty: the whole bucket).
    public var prefix: String
    /// Unfinished multipart uploads listed under the prefix.
    public var listed = 0
    /// Uploads no journal knows, old enough, aborted now.
    public var aborted = 0
    /// Uploads no journal knows but younger than the age: kept, maybe a run still sending them.
    public var young = 0
    /// The bound the listing stopped at (``ObjectStore/uploadListingBound``); the rest
    /// waits for the next rescan. nil: listed to the end.
    public var truncatedAt: ListingBound?
    /// Why the sweep of this destination stopped, if it did.
    public var problem: String?

    public init(target: S3Destination, prefix: String) {
        self.target = target
        self.prefix = prefix
    }
}

/// What `ingest rescan` did about multipart uploads no journal knows.
public struct OrphanSweep: Sendable, Equatable {
    /// How old an unknown upload must be to be aborted; nil: the sweep is off.
    public var age: Duration?
    public var destinations: [OrphanSweepOutcome] = []
    /// Not due: the last sweep that reached every destination ran at `last`, and the next
    /// is due after `next` (see ``interval(age:)``).
    public var deferred: (last: Date, next: Date)?

    public init(age: Duration? = nil) { self.age = age }

    /// The longest a rescan waits between sweeps.
    public static let maxInterval: Duration = .seconds(86400)

    /// How long after a complete sweep the next one is due: the age, at most a day. An
    /// upload only becomes an orphan to abort once it is `age` old, so sweeping more often
    /// gains little, and a rescan run again soon after (by hand, or as tests do) then sends
    /// nothing when nothing is pending.
    public static func interval(age: Duration) -> Duration { min(age, maxInterval) }

    /// What the journal keeps of it.
    public var record: OrphanSweepRecord { OrphanSweepRecord(aborted: aborted, young: young, failures: failures) }

    public static func == (a: OrphanSweep, b: OrphanSweep) -> Bool {
        a.age == b.age && a.destinations == b.destinations && a.deferred?.last == b.deferred?.last
            && a.deferred?.next == b.deferred?.next
    }

    public var aborted: Int { destinations.reduce(0) { $0 + $1.aborted } }
    public var young: Int { destinations.reduce(0) { $0 + $1.young } }
    /// Destinations whose sweep stopped on an error.
    public var failures: Int { destinations.filter { $0.problem != nil }.count }
}

/// Aborts the multipart uploads that a destination holds under the prefix and that the
/// journal does not know, once they are older than `age`: what a run killed between
/// `CreateMultipartUpload` and journalling the upload's id leaves on the server, where it
/// would hold its parts' storage forever (until a lifecycle rule, if the bucket has one).
///
/// The journal knows an upload by its server id while the upload is pending. The age keeps
/// the sweep off uploads being created right now by another process (whose ids are not
/// journalled yet) and off those of other stations writing under the same prefix; it must
/// exceed the longest a run may take between creating an upload and journalling it.
public struct OrphanSweeper: Sendable {
    public let journal: Journal
    public let prefix: String
    public let age: Duration
    public let logger: Logger
    /// The store of one destination (``StoreFactory/store``).
    public let makeStore: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore

    public init(
        journal: Journal, prefix: String, age: Duration, logger: Logger,
        makeStore: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    ) {
        self.journal = journal
        self.prefix = prefix
        self.age = age
        self.logger = logger
        self.makeStore = makeStore
    }

    /// The destinations to sweep: `configured` (if any) first, then every one the journal has
    /// uploads for, each bucket once.
    public static func destinations(configured: S3Destination?, journal: [S3Destination]) -> [S3Destination] {
        var seen: Set<String> = []
        return ([configured].compactMap { $0 } + journal).filter { seen.insert("\($0.endpoint)\n\($0.bucket)").inserted }
    }

    /// The uploads to abort: those no journal knows, initiated at or before `cutoff`.
    public static func orphans(_ listed: [ListedUpload], known: Set<String>, cutoff: Date) -> [ListedUpload] {
        listed.filter { !known.contains($0.uploadID) && $0.initiated <= cutoff }
    }

    /// Sweeps each destination in turn; a destination that fails is reported and the rest go on.
    public func sweep(_ targets: [S3Destination], now: Date = Date()) async -> OrphanSweep {
        var sweep = OrphanSweep(age: age)
        for target in targets {
            sweep.destinations.append(await self.sweep(target, now: now))
        }
        return sweep
    }

    func sweep(_ target: S3Destination, now: Date) async -> OrphanSweepOutcome {
        var outcome = OrphanSweepOutcome(target: target, prefix: prefix)
        let cutoff = now.addingTimeInterval(-age.inSeconds)
        do throws(IngestError) {
            let client = try makeStore(target)
            // A destination that cannot list its unfinished uploads cannot be swept: it
            // expires them itself, or never leaves any.
            guard client.capabilities.contains(.listing) else {
                logger.info(
                    "the destination cannot list its unfinished uploads: not swept",
                    metadata: ["destination": "\(target.displayName)"])
                return outcome
            }
            // Only candidates are kept while listing (memory for what may be aborted, not for
            // what is listed); the journal is read again after the listing, so that an upload
            // created and journalled while the listing ran is known.
            let knownBefore = try await known(target)
            var young = 0
            let listing: MultipartUploadListing
            do {
                listing = try await client.listUploads(prefix: prefix) { upload in
                    let unknown = !knownBefore.contains(upload.uploadID)
                    if upload.initiated <= cutoff { return unknown }
                    if unknown { young += 1 }
                    return false
                }
            } catch {
                throw .upload(UploadError(error, what: "listing the multipart uploads under '\(prefix)'", target: target))
            }
            outcome.listed = listing.listed
            outcome.young = young
            if listing.isTruncated { outcome.truncatedAt = client.uploadListingBound }
            let orphans = Self.orphans(listing.uploads, known: try await known(target), cutoff: cutoff)
            for orphan in orphans {
                do { try await client.abortMultipartUpload(key: orphan.key, uploadID: orphan.uploadID) } catch {
                    let problem = UploadError(error, what: "aborting the upload of '\(orphan.key)'", target: target)
                    if problem.scope == .destination { throw .upload(problem) }
                    if outcome.problem == nil { outcome.problem = problem.message }
                    continue
                }
                outcome.aborted += 1
                logger.notice(
                    "aborted a multipart upload no journal knows",
                    metadata: [
                        "bucket": "\(target.bucket)", "key": "\(orphan.key)", "upload_id": "\(orphan.uploadID)",
                        "initiated": "\(orphan.initiated.formatted(.iso8601))",
                    ])
            }
        } catch {
            outcome.problem = error.description
            logger.warning(
                "the orphan sweep of a destination stopped",
                metadata: ["destination": "\(target.displayName)", "error": "\(error)"])
        }
        return outcome
    }

    private func known(_ target: S3Destination) async throws(IngestError) -> Set<String> {
        do { return try await journal.multipartUploadIDs(endpoint: target.endpoint, bucket: target.bucket) } catch {
            throw .journal(error)
        }
    }
}
