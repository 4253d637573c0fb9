/// Reads objects back from their destination and fingerprints their bytes (XXH3-128): the
/// proof of an object that its labels are not. Anyone who can write the bucket can put other
/// bytes of the same size at a key and copy its `x-amz-meta-xxh128`; only the bytes, read
/// and hashed, show it.
///
/// An object is read in ranges of ``rangeSize`` bytes (ranged `GetObject`), up to
/// ``rangesPerObject`` of them in flight, and hashed in order as they arrive; every range
/// asks `If-Match` with the ETag the object showed when it was looked at, so a replacement
/// while it is read is seen, not mixed into the hash. Objects are read a few at once, as
/// their bytes allow: an object holds room for the ranges it may have in flight (its size,
/// at most ``rangesPerObject`` ranges) in a limiter of ``bytesInMemory``, so the memory held
/// is bounded whatever the objects' sizes and however many callers read at once. One object
/// larger than the room is still read, alone.
///
/// Shared by `verify-card --read-back` and the nightly read-back of `ingest rescan`.
public struct ObjectReadBack: Sendable {
    /// The size of each ranged read: a part of an upload of the default part size.
    public static let defaultRangeSize: Int64 = 8 << 20

    public let rangeSize: Int64
    public let rangesPerObject: Int
    /// The bytes the ranges in flight and waiting to be hashed may hold, over every object.
    public var bytesInMemory: Int64 { Int64(rangesPerObject) * rangeSize }
    private let room: TransferLimiter

    /// What reading an object back found.
    public enum Outcome: Sendable, Equatable {
        /// Every byte read; their fingerprint.
        case read(Fingerprint)
        /// There is no object at the key (any more).
        case missing
        /// The object's ETag is no longer the one it showed when looked at: it was replaced
        /// while it was read.
        case replaced
        /// A stop was asked for before every byte was read.
        case stopped
    }

    /// - Parameters:
    ///   - rangeSize: the bytes of each ranged read (at least 64 KiB).
    ///   - rangesPerObject: ranges of one object in flight at once (at least 1).
    ///   - objectsAtOnce: objects read at once at most, when they are small.
    public init(rangeSize: Int64 = defaultRangeSize, rangesPerObject: Int = 4, objectsAtOnce: Int = 8) {
        self.rangeSize = max(64 << 10, rangeSize)
        self.rangesPerObject = max(1, rangesPerObject)
        room = TransferLimiter(maxRequests: max(1, objectsAtOnce), maxBytes: Int64(max(1, rangesPerObject)) * self.rangeSize)
    }

    /// Reads the `size` bytes of the object at `key` in `store`, only while its ETag is
    /// `etag` (when given), and fingerprints them. `counted` hears the bytes of each range as
    /// it is hashed. Throws what the store threw after its own retries.
    public func read(
        key: String, size: Int64, etag: String?, in store: any ObjectStore, stop: StopFlag,
        counted: @escaping @Sendable (Int64) -> Void = { _ in }
    ) async throws(S3ClientError) -> Outcome {
        let hasher = FingerprintHasher()
        // An empty object has no range to ask for (S3 answers 416): its fingerprint is the
        // empty one, and its size was looked at already.
        guard size > 0 else { return .read(hasher.finalize()) }
        let weight = min(size, bytesInMemory)
        await room.acquire(weight)
        let result = await read(key: key, size: size, etag: etag, store: store, hasher: hasher, stop: stop, counted: counted)
        await room.release(weight)
        return try result.get()
    }

    private func read(
        key: String, size: Int64, etag: String?, store: any ObjectStore, hasher: FingerprintHasher, stop: StopFlag,
        counted: @escaping @Sendable (Int64) -> Void
    ) async -> Result<Outcome, S3ClientError> {
        let rangeSize = rangeSize
        let count = (size + rangeSize - 1) / rangeSize
        func range(_ index: Int64) -> ClosedRange<Int64> {
            let start = index * rangeSize
            return start...(min(start + rangeSize, size) - 1)
        }
        return await withTaskGroup(of: (Int64, Result<ObjectRange?, S3ClientError>).self) { group in
            var started: Int64 = 0
            var hashed: Int64 = 0
            // Ranges that arrived before the one to hash next: at most rangesPerObject - 1.
            var early: [Int64: [UInt8]] = [:]
            var outcome: Result<Outcome, S3ClientError>?
            while hashed < count, outcome == nil {
                while started < count, started - hashed < Int64(rangesPerObject), !stop.isRaised {
                    let index = started
                    let bytes = range(index)
                    // The result is made first and returned after the `do`: Swift 6.3.1's release
                    // build returned index 0 from every child that returned its tuple from
                    // inside a typed-throws `do` (the ranges were hashed out of order).
                    group.addTask {
                        let result: Result<ObjectRange?, S3ClientError>
                        do throws(S3ClientError) {
                            result = .success(try await store.getObject(key: key, range: bytes, ifMatch: etag))
                        } catch {
                            result = .failure(error)
                        }
                        return (index, result)
                    }
                    started += 1
                }
                if stop.isRaised {
                    outcome = .success(.stopped)
                    break
                }
                guard let (index, result) = await group.next() else { break }
                switch result {
                case .failure(let error) where error.isPreconditionFailed:
                    outcome = .success(.replaced)
                case .failure(let error):
                    outcome = .failure(error)
                case .success(nil):
                    outcome = .success(.missing)
                case .success(let found?):
                    if let etag, let shown = found.etag, ETag.unquoted(shown) != ETag.unquoted(etag) {
                        outcome = .success(.replaced)  // a server that does not honour If-Match
                        break
                    }
                    early[index] = found.bytes
                    while let bytes = early.removeValue(forKey: hashed) {
                        bytes.withUnsafeBytes { hasher.update($0) }
                        counted(Int64(bytes.count))
                        hashed += 1
                    }
                }
            }
            // Ranges still in flight end (or fail) on their own; none is hashed any more.
            group.cancelAll()
            while await group.next() != nil {}
            return outcome ?? .success(.read(hasher.finalize()))
        }
    }
}
