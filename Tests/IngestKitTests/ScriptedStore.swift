import Foundation
import Synchronization

@testable import IngestKit

/// A bucket in memory that keeps the S3 contract the uploader relies on, and fails on cue.
///
/// What it keeps: objects with their bytes, `x-amz-meta-*` metadata and tags; `If-None-Match: *`
/// refused with 412 when the key holds an object (or ignored, as some servers do, when made
/// with `honoursConditionalWrites: false`); multipart uploads with their parts by
/// number (a part sent again replaces the earlier one), listed by `ListParts`, completed
/// only with the ETags the parts were given, gone once completed or aborted; part ETags
/// are the MD5 of the part, a multipart object's ETag is the MD5 of the parts' MD5s with
/// `-N`, as S3 makes them.
///
/// It lists its objects and unfinished uploads, keeps tags (``StoreCapabilities`` as given),
/// answers the look at the destination, and probes conditional writes as it keeps them.
///
/// What it scripts: the `n`th call of an operation can fail before it acts (the request
/// never reached the server) or after (it acted, and the answer was lost on the way back),
/// with any ``S3ClientError``. Every call is counted.
final class ScriptedStore: ObjectStore {
    enum Operation: Hashable, Sendable, CaseIterable {
        case head, put, create, uploadPart, listParts, complete, abort, abortUploads, getTagging, putTagging, copy, uploadPartCopy
        case headBucket, probe, putDocument, getDocument, listObjects, listUploads, getRange
    }

    /// When a scripted failure strikes.
    enum Fault: Sendable {
        /// The request never reached the server.
        case before(S3ClientError)
        /// The server did what was asked; its answer was lost.
        case after(S3ClientError)
        /// Another writer puts an object at `key` just before this request arrives.
        case anotherWriter(key: String, bytes: [UInt8], metadata: [String: String])
    }

    struct Object: Equatable, Sendable {
        var bytes: [UInt8]
        var metadata: [String: String]
        var etag: String
        var tags: [String: String] = [:]
        /// A multipart object's CRC32C in the store's ``ChecksumForm``, when its parts were
        /// completed with theirs (reported to a HEAD in checksum mode, as S3 servers do).
        var checksumCRC32C: String? = nil
    }

    struct Upload: Sendable {
        var key: String
        var metadata: [String: String]
        var parts: [Int: [UInt8]] = [:]
        var initiated = Date()
    }

    private struct State {
        var objects: [String: Object] = [:]
        var uploads: [String: Upload] = [:]
        var nextUploadID = 1
        var calls: [Operation: Int] = [:]
        var script: [Operation: [Int: Fault]] = [:]
        var partsSent: [Int] = []
    }

    private let state = Mutex(State())
    let bodiesCrossPlainHTTP = false
    /// Whether a PUT's answer carries the CRC32C of what was stored, as S3 and SeaweedFS
    /// do; a store that does not makes the uploader look at the object (`HeadObject`).
    let echoesChecksums: Bool
    /// Whether `If-None-Match: *` is honoured; a server that ignores it writes over the key.
    let honoursConditionalWrites: Bool
    let capabilities: StoreCapabilities
    let uploadListingBound = ListingBound(pages: 100, kept: 10_000)
    /// Whether the destination is there (`HeadBucket`).
    let bucketExists: Bool
    /// The form a multipart object's CRC32C takes, for parts completed with theirs.
    let multipartChecksums: ChecksumForm
    /// Whether `Complete`'s answer names the object's ETag (Ceph RGW 16 sends `<ETag></ETag>`).
    let completeNamesETag: Bool

    /// How a server reports a multipart object's CRC32C.
    enum ChecksumForm: Sendable, CaseIterable {
        /// The CRC of the parts' CRCs with `-N`: S3's default, SeaweedFS.
        case composite
        /// The CRC of every byte: moto, or S3 asked for `FULL_OBJECT`.
        case fullObject
        /// None at all: Ceph RGW before Squid.
        case none
    }

    init(
        echoesChecksums: Bool = true, honoursConditionalWrites: Bool = true,
        capabilities: StoreCapabilities = .all, bucketExists: Bool = true,
        multipartChecksums: ChecksumForm = .composite, completeNamesETag: Bool = true
    ) {
        self.echoesChecksums = echoesChecksums
        self.honoursConditionalWrites = honoursConditionalWrites
        self.capabilities = capabilities
        self.bucketExists = bucketExists
        self.multipartChecksums = multipartChecksums
        self.completeNamesETag = completeNamesETag
    }

    // MARK: the script and what happened

    /// The `call`th call (from 1, counted from now on) of `operation` fails with `fault`.
    func script(_ operation: Operation, call: Int = 1, _ fault: Fault) {
        state.withLock { $0.script[operation, default: [:]][($0.calls[operation] ?? 0) + call] = fault }
    }

    func calls(_ operation: Operation) -> Int { state.withLock { $0.calls[operation] ?? 0 } }
    /// The part numbers of every `UploadPart` that reached the server, in order.
    var partsSent: [Int] { state.withLock { $0.partsSent } }
    var objects: [String: Object] { state.withLock { $0.objects } }
    /// Multipart uploads neither completed nor aborted.
    var openUploads: [String: Upload] { state.withLock { $0.uploads } }

    /// Puts an object there as another writer would.
    func place(_ key: String, bytes: [UInt8], metadata: [String: String] = [:], tags: [String: String] = [:]) {
        state.withLock { $0.objects[key] = Object(bytes: bytes, metadata: metadata, etag: Self.etag(of: bytes), tags: tags) }
    }

    /// Takes the fingerprint off an object, from its metadata and its tags, as a kill between
    /// a `Complete` and its tagging, or a copy made by an older ingest, leaves it.
    func unlabel(_ key: String) {
        state.withLock {
            $0.objects[key]?.metadata[ObjectLabelKeys.fingerprint] = nil
            $0.objects[key]?.tags[ObjectLabelKeys.fingerprint] = nil
        }
    }

    /// Makes the object at `key` hold `bytes` instead, with its metadata and tags kept and its
    /// ETag and CRC32C those of a multipart object of `bytes` cut in `partSize` parts, in
    /// the store's form: what a server that assembled other bytes than the parts it
    /// acknowledged, or a writer that copied our label, leaves.
    func replaceBytes(_ key: String, with bytes: [UInt8], partSize: Int) {
        let parts = stride(from: 0, to: bytes.count, by: partSize).map { Array(bytes[$0..<min($0 + partSize, bytes.count)]) }
        let md5s = parts.flatMap { PartDigest.compute(.md5, bytes: $0).bytes }
        let crcs = parts.map { PartDigest.compute(.crc32c, bytes: $0) }
        let checksum: String? =
            switch multipartChecksums {
            case .composite: "\(PartDigest.compute(.crc32c, bytes: crcs.flatMap(\.bytes)).base64)-\(parts.count)"
            case .fullObject: PartDigest.compute(.crc32c, bytes: bytes).base64
            case .none: nil
            }
        state.withLock {
            $0.objects[key]?.bytes = bytes
            $0.objects[key]?.etag = "\"\(lowercaseHex(PartDigest.compute(.md5, bytes: md5s).bytes))-\(parts.count)\""
            $0.objects[key]?.checksumCRC32C = checksum
        }
    }

    /// Deletes an object, as a lifecycle rule or a person would.
    func remove(_ key: String) {
        state.withLock { $0.objects[key] = nil }
    }

    static func preconditionFailed() -> S3ClientError {
        .server(S3Error(status: 412, code: .preconditionFailed, message: "At least one of the pre-conditions you specified did not hold"), attempts: 1)
    }
    static func serverError(attempts: Int = 3) -> S3ClientError {
        .server(S3Error(status: 500, code: .internalError, message: "We encountered an internal error"), attempts: attempts)
    }
    static func connectionReset() -> S3ClientError {
        .transport(TransportError(kind: .connectionReset, code: 56, message: "Connection reset by peer"), attempts: 3)
    }
    static func noSuchUpload() -> S3ClientError {
        .uploadGone(S3Error(status: 404, code: .noSuchUpload, message: "The specified upload does not exist"))
    }

    // MARK: ObjectStore

    func headBucket() async throws(S3ClientError) -> BucketHead {
        let exists = bucketExists
        return try perform(.headBucket) { _ throws(S3ClientError) in BucketHead(exists: exists, serverDate: nil, receivedAt: Date()) }
    }

    /// The probe as S3 answers it: the second conditional write is refused where the store
    /// honours the condition, and the probe object goes; the first write's answer echoes its
    /// CRC32C where the store keeps checksums (``echoesChecksums``).
    func tryConditionalWrite(key: String) async -> ConditionalWriteTrial {
        let (honours, echoes) = (honoursConditionalWrites, echoesChecksums)
        do {
            return try perform(.probe) { _ throws(S3ClientError) in
                ConditionalWriteTrial(answer: honours ? .honoured : .ignored, echoedCRC32C: echoes)
            }
        } catch {
            return ConditionalWriteTrial(answer: .failed(error))
        }
    }

    func putDocument(key: String, bytes: [UInt8], headers: [SigV4Header]) async throws(S3ClientError) -> ObjectWritten {
        let honours = honoursConditionalWrites
        return try perform(.putDocument) { state throws(S3ClientError) in
            if honours, headers.contains(.ifNoneMatchAny), state.objects[key] != nil { throw Self.preconditionFailed() }
            if let match = headers.first(where: { $0.name == "If-Match" }), state.objects[key]?.etag != match.value {
                throw Self.preconditionFailed()
            }
            let object = Object(bytes: bytes, metadata: Self.metadata(headers), etag: Self.etag(of: bytes))
            state.objects[key] = object
            return ObjectWritten(etag: object.etag)
        }
    }

    func getDocument(key: String) async throws(S3ClientError) -> StoredDocument? {
        try perform(.getDocument) { state throws(S3ClientError) in
            state.objects[key].map { StoredDocument(bytes: $0.bytes, etag: $0.etag) }
        }
    }

    func listObjects(prefix: String, page: ([ListedObject]) async -> Void) async throws(S3ClientError) {
        let listed = try perform(.listObjects) { state throws(S3ClientError) in
            state.objects.filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }.map {
                ListedObject(key: $0.key, size: Int64($0.value.bytes.count), etag: $0.value.etag, lastModified: Date())
            }
        }
        await page(listed)
    }

    func listUploads(prefix: String, keeping: (ListedUpload) -> Bool) async throws(S3ClientError) -> MultipartUploadListing {
        let open = try perform(.listUploads) { state throws(S3ClientError) in
            state.uploads.filter { $0.value.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }.map {
                ListedUpload(key: $0.value.key, uploadID: $0.key, initiated: $0.value.initiated)
            }
        }
        var listing = MultipartUploadListing()
        listing.pages = 1
        listing.listed = open.count
        listing.uploads = open.filter(keeping)
        return listing
    }

    func headObject(key: String, checksumMode: Bool) async throws(S3ClientError) -> ObjectHead? {
        try perform(.head) { state throws(S3ClientError) in
            state.objects[key].map {
                ObjectHead(
                    size: Int64($0.bytes.count), etag: $0.etag, metadata: $0.metadata,
                    checksumCRC32C: checksumMode ? $0.checksumCRC32C : nil, tagCount: $0.tags.count)
            }
        }
    }

    func putObject(key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header]) async throws(S3ClientError)
        -> ObjectWritten
    {
        let bytes = try Self.read(body)
        let (echoes, honours) = (echoesChecksums, honoursConditionalWrites)
        return try perform(.put) { state throws(S3ClientError) in
            try Self.checkDigests(of: bytes, payloadHash: payloadHash, headers: headers)
            if honours, headers.contains(.ifNoneMatchAny), state.objects[key] != nil { throw Self.preconditionFailed() }
            let object = Object(bytes: bytes, metadata: Self.metadata(headers), etag: Self.etag(of: bytes))
            state.objects[key] = object
            // As S3 does: the CRC32C of the bytes stored, when the request carried one.
            let sent = headers.contains { $0.name.lowercased() == "x-amz-checksum-crc32c" }
            let stored = bytes.withUnsafeBytes { PartDigest(crc32c: CRC32C.update(0, $0)).base64 }
            return ObjectWritten(etag: object.etag, checksumCRC32C: echoes && sent ? stored : nil)
        }
    }

    func createMultipartUpload(key: String, size: Int64, headers: [SigV4Header]) async throws(S3ClientError) -> String {
        try perform(.create) { state throws(S3ClientError) in
            let id = "upload-\(state.nextUploadID)"
            state.nextUploadID += 1
            state.uploads[id] = Upload(key: key, metadata: Self.metadata(headers))
            return id
        }
    }

    func uploadPart(
        key: String, uploadID: String, partNumber: Int, offset: Int64, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header]
    ) async throws(S3ClientError) -> String {
        let bytes = try Self.read(body)
        return try perform(.uploadPart) { state throws(S3ClientError) in
            guard state.uploads[uploadID]?.key == key else { throw Self.noSuchUpload() }
            state.uploads[uploadID]?.parts[partNumber] = bytes
            state.partsSent.append(partNumber)
            return Self.etag(of: bytes)
        }
    }

    func listParts(key: String, uploadID: String, partSize: Int64) async throws(S3ClientError) -> [ListedPart] {
        try perform(.listParts) { state throws(S3ClientError) in
            guard let upload = state.uploads[uploadID], upload.key == key else { throw Self.noSuchUpload() }
            return upload.parts.sorted { $0.key < $1.key }.map {
                ListedPart(number: $0.key, etag: Self.etag(of: $0.value), size: Int64($0.value.count))
            }
        }
    }

    func completeMultipartUpload(key: String, uploadID: String, parts: [CompletedPart], headers: [SigV4Header])
        async throws(S3ClientError) -> String?
    {
        let (honours, report, namesETag) = (honoursConditionalWrites, multipartChecksums, completeNamesETag)
        return try perform(.complete) { state throws(S3ClientError) in
            guard let upload = state.uploads[uploadID], upload.key == key else { throw Self.noSuchUpload() }
            if honours, headers.contains(.ifNoneMatchAny), state.objects[key] != nil { throw Self.preconditionFailed() }
            var bytes: [UInt8] = []
            var md5s: [UInt8] = []
            for part in parts.sorted(by: { $0.number < $1.number }) {
                guard let held = upload.parts[part.number], Self.etag(of: held) == part.etag else {
                    throw .server(S3Error(status: 400, code: .invalidPart, message: "part \(part.number)"), attempts: 1)
                }
                bytes += held
                md5s += PartDigest.compute(.md5, bytes: held).bytes
            }
            let etag = "\"\(lowercaseHex(PartDigest.compute(.md5, bytes: md5s).bytes))-\(parts.count)\""
            var checksum: String?
            let digests = parts.sorted(by: { $0.number < $1.number }).compactMap(\.digest)
            if digests.count == parts.count, digests.allSatisfy({ $0.algorithm == .crc32c }) {
                switch report {
                case .composite:
                    let crcs = digests.flatMap(\.bytes).withUnsafeBytes { PartDigest(crc32c: CRC32C.update(0, $0)).base64 }
                    checksum = "\(crcs)-\(parts.count)"
                case .fullObject:
                    checksum = bytes.withUnsafeBytes { PartDigest(crc32c: CRC32C.update(0, $0)).base64 }
                case .none:
                    checksum = nil
                }
            }
            state.objects[key] = Object(bytes: bytes, metadata: upload.metadata, etag: etag, checksumCRC32C: checksum)
            state.uploads[uploadID] = nil
            return namesETag ? etag : nil
        }
    }

    /// As S3 does with `x-amz-metadata-directive: REPLACE` and `x-amz-tagging-directive:
    /// REPLACE`: the source's bytes, ETag and checksum (as SeaweedFS keeps them), the
    /// request's metadata and tags.
    func copyObject(key: String, from source: String, sourceETag: String, headers: [SigV4Header]) async throws(S3ClientError)
        -> String
    {
        let honours = honoursConditionalWrites
        return try perform(.copy) { state throws(S3ClientError) in
            guard let bytes = state.objects[source]?.bytes else {
                throw .server(S3Error(status: 404, code: .noSuchKey, message: "The specified key does not exist."), attempts: 1)
            }
            guard state.objects[source]?.etag == sourceETag else { throw Self.preconditionFailed() }
            if honours, headers.contains(.ifNoneMatchAny), state.objects[key] != nil { throw Self.preconditionFailed() }
            let original = state.objects[source]
            let object = Object(
                bytes: bytes, metadata: Self.metadata(headers), etag: original?.etag ?? Self.etag(of: bytes),
                tags: Self.tags(headers), checksumCRC32C: original?.checksumCRC32C)
            state.objects[key] = object
            return object.etag
        }
    }

    func uploadPartCopy(
        key: String, uploadID: String, partNumber: Int, from source: String, sourceETag: String, range: ClosedRange<Int64>
    ) async throws(S3ClientError) -> String {
        try perform(.uploadPartCopy) { state throws(S3ClientError) in
            guard let bytes = state.objects[source]?.bytes, range.upperBound < bytes.count else {
                throw .server(S3Error(status: 404, code: .noSuchKey, message: "The specified key does not exist."), attempts: 1)
            }
            guard state.objects[source]?.etag == sourceETag else { throw Self.preconditionFailed() }
            guard state.uploads[uploadID]?.key == key else { throw Self.noSuchUpload() }
            let part = Array(bytes[Int(range.lowerBound)...Int(range.upperBound)])
            state.uploads[uploadID]?.parts[partNumber] = part
            return Self.etag(of: part)
        }
    }

    func abortMultipartUpload(key: String, uploadID: String) async throws(S3ClientError) {
        try perform(.abort) { state throws(S3ClientError) in state.uploads[uploadID] = nil }
    }

    func abortUploads(key: String, known: String?, othersBefore: Date) async throws(S3ClientError) -> Int {
        try perform(.abortUploads) { state throws(S3ClientError) in
            let ids = state.uploads.filter { $0.key == known || ($0.value.key == key && $0.value.initiated < othersBefore) }.map(\.key)
            for id in ids { state.uploads[id] = nil }
            return ids.count
        }
    }

    func getObject(key: String, range: ClosedRange<Int64>, ifMatch: String?) async throws(S3ClientError) -> ObjectRange? {
        try perform(.getRange) { state throws(S3ClientError) in
            guard let object = state.objects[key] else { return nil }
            if let ifMatch, ifMatch != object.etag { throw Self.preconditionFailed() }
            guard range.lowerBound >= 0, range.upperBound < object.bytes.count else {
                throw .server(S3Error(status: 416, code: nil, message: "InvalidRange"), attempts: 1)
            }
            return ObjectRange(bytes: Array(object.bytes[Int(range.lowerBound)...Int(range.upperBound)]), etag: object.etag)
        }
    }

    func getObjectTagging(key: String) async throws(S3ClientError) -> [String: String]? {
        try perform(.getTagging) { state throws(S3ClientError) in state.objects[key]?.tags }
    }

    func putObjectTagging(key: String, tags: [String: String]) async throws(S3ClientError) {
        try perform(.putTagging) { state throws(S3ClientError) in
            guard state.objects[key] != nil else {
                throw .server(S3Error(status: 404, code: nil, message: "NoSuchKey"), attempts: 1)
            }
            state.objects[key]?.tags = tags
        }
    }

    // MARK: helpers

    /// Counts the call, then acts, failing before or after as scripted.
    private func perform<T>(_ operation: Operation, _ act: (inout State) throws(S3ClientError) -> T) throws(S3ClientError)
        -> T
    {
        try state.withLock { state throws(S3ClientError) -> T in
            let call = (state.calls[operation] ?? 0) + 1
            state.calls[operation] = call
            let fault = state.script[operation]?[call]
            if case .before(let error) = fault { throw error }
            if case let .anotherWriter(key, bytes, metadata) = fault {
                state.objects[key] = Object(bytes: bytes, metadata: metadata, etag: Self.etag(of: bytes))
            }
            let result = try act(&state)
            if case .after(let error) = fault { throw error }
            return result
        }
    }

    /// As S3 checks a body: a signed payload against its SHA-256 (`XAmzContentSHA256Mismatch`),
    /// and a `Content-MD5` against its MD5 (`BadDigest`).
    private static func checkDigests(of bytes: [UInt8], payloadHash: PayloadHash, headers: [SigV4Header]) throws(S3ClientError) {
        if payloadHash != .unsigned, payloadHash != PayloadHash(sha256Of: bytes) {
            throw .server(S3Error(status: 400, code: .xAmzContentSHA256Mismatch, message: "The provided 'x-amz-content-sha256' header does not match what was computed."), attempts: 1)
        }
        let md5 = PartDigest.compute(.md5, bytes: bytes).headers
        if let sent = headers.first(where: { $0.name.lowercased() == "content-md5" }), [sent] != md5 {
            throw .server(S3Error(status: 400, code: .badDigest, message: "The Content-MD5 you specified did not match what we received."), attempts: 1)
        }
    }

    private static func read(_ body: HTTPBody) throws(S3ClientError) -> [UInt8] {
        switch body {
        case .empty: return []
        case .bytes(let bytes): return bytes
        case let .file(path, offset, length):
            guard let handle = FileHandle(forReadingAtPath: path) else { throw .request("cannot open \(path)") }
            defer { try? handle.close() }
            do {
                try handle.seek(toOffset: UInt64(offset))
                return Array(try handle.read(upToCount: Int(length)) ?? Data())
            } catch {
                throw .request("cannot read \(path): \(error)")
            }
        }
    }

    private static func metadata(_ headers: [SigV4Header]) -> [String: String] {
        var metadata: [String: String] = [:]
        for header in headers where header.name.lowercased().hasPrefix("x-amz-meta-") {
            metadata[String(header.name.lowercased().dropFirst("x-amz-meta-".count))] = header.value
        }
        return metadata
    }

    /// The tags of an `x-amz-tagging` header.
    private static func tags(_ headers: [SigV4Header]) -> [String: String] {
        guard let header = headers.first(where: { $0.name.lowercased() == ObjectLabels.taggingHeader }) else { return [:] }
        var tags: [String: String] = [:]
        for pair in header.value.split(separator: "&") {
            let sides = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = sides.first?.removingPercentEncoding else { continue }
            tags[key] = sides.count == 2 ? (sides[1].removingPercentEncoding ?? "") : ""
        }
        return tags
    }

    static func etag(of bytes: [UInt8]) -> String {
        "\"\(lowercaseHex(PartDigest.compute(.md5, bytes: bytes).bytes))\""
    }
}
