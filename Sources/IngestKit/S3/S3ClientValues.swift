// What the S3 client's operations take and return: objects, parts, uploads and listings as the
// server describes them.

import Foundation

/// A part the server holds for an upload, as `ListParts` reports it.
public struct ListedPart: Sendable, Equatable {
    public var number: Int
    /// Exactly as the server sent it, quotes included: it goes back in Complete unchanged.
    public var etag: String
    public var size: Int64
    /// When the server stored the part, where it says: how a station tells an upload still
    /// being sent from one left behind (``ObjectUploader/waitWhileSent(_:)``).
    public var lastModified: Date?
    /// The part's CRC32C as the server computed it (base64), where it returns one.
    public var crc32c: String?

    public init(number: Int, etag: String, size: Int64, lastModified: Date? = nil, crc32c: String? = nil) {
        self.number = number
        self.etag = etag
        self.size = size
        self.lastModified = lastModified
        self.crc32c = crc32c
    }
}

/// ETags as servers write them: quoted by most, bare in some answers (SeaweedFS's
/// `ListParts`). An ETag goes back to the server exactly as received; only comparisons
/// look at it without its quotes.
enum ETag {
    /// The ETag without one pair of surrounding quotes.
    static func unquoted(_ etag: String) -> Substring {
        var bare = Substring(etag)
        if bare.count >= 2, bare.first == "\"", bare.last == "\"" { bare = bare.dropFirst().dropLast() }
        return bare
    }
}

/// What `HeadObject` says of an object.
/// What the answer to a `PutObject` says of the object it wrote. S3 (and SeaweedFS since
/// 4.x) answers a PUT that carried `x-amz-checksum-crc32c` with the checksum it computed of
/// the bytes it stored; its ETag is their MD5 unless encryption hides it.
public struct ObjectWritten: Sendable, Equatable {
    /// Exactly as the server sent it, quotes included.
    public var etag: String
    public var checksumCRC32C: String?
    public var serverSideEncryption: String?
    public var customerKeyAlgorithm: String?

    public init(etag: String, checksumCRC32C: String? = nil, serverSideEncryption: String? = nil, customerKeyAlgorithm: String? = nil) {
        self.etag = etag
        self.checksumCRC32C = checksumCRC32C
        self.serverSideEncryption = serverSideEncryption
        self.customerKeyAlgorithm = customerKeyAlgorithm
    }

    /// Whether the server's own digest of what it stored is `expected`: then the object
    /// holds exactly the bytes sent, and no `HeadObject` is needed to know it.
    public func confirms(_ expected: WholeObjectDigest) -> Bool {
        // The check reads the digests and the encryption only, never the size.
        let head = ObjectHead(
            size: 0, etag: etag, checksumCRC32C: checksumCRC32C, serverSideEncryption: serverSideEncryption,
            customerKeyAlgorithm: customerKeyAlgorithm)
        return expected.check(head) == .matches
    }
}

public struct ObjectHead: Sendable, Equatable {
    public var size: Int64
    /// Exactly as the server sent it, quotes included.
    public var etag: String?
    /// `x-amz-meta-*` headers, by name without the prefix, lowercased.
    public var metadata: [String: String]
    /// `x-amz-checksum-crc32c`: base64, with `-N` for a multipart object's composite
    /// checksum. Servers send it only to a HEAD that asks with `x-amz-checksum-mode: ENABLED`,
    /// and only for objects uploaded with CRC32C checksums.
    public var checksumCRC32C: String?
    /// `x-amz-checksum-type`: `COMPOSITE` or `FULL_OBJECT`, when the server says.
    public var checksumType: String?
    /// `x-amz-server-side-encryption`: `AES256`, `aws:kms`, `aws:kms:dsse`, when the server says.
    public var serverSideEncryption: String?
    /// `x-amz-server-side-encryption-customer-algorithm`: set for objects encrypted with a
    /// key the client provides (SSE-C).
    public var customerKeyAlgorithm: String?
    /// `x-amz-tagging-count`: how many tags the object has; nil when the server does not say.
    public var tagCount: Int?
    /// `x-amz-version-id`: the version this look found, where the bucket keeps versions.
    public var versionID: String?

    public init(
        size: Int64, etag: String?, metadata: [String: String] = [:], checksumCRC32C: String? = nil,
        checksumType: String? = nil, serverSideEncryption: String? = nil, customerKeyAlgorithm: String? = nil,
        tagCount: Int? = nil, versionID: String? = nil
    ) {
        self.tagCount = tagCount
        self.versionID = versionID
        self.size = size
        self.etag = etag
        self.metadata = metadata
        self.checksumCRC32C = checksumCRC32C
        self.checksumType = checksumType
        self.serverSideEncryption = serverSideEncryption
        self.customerKeyAlgorithm = customerKeyAlgorithm
    }

    /// The encryption that makes the ETag something other than the content's MD5, if any:
    /// SSE-KMS (and DSSE-KMS) and SSE-C do; SSE-S3 (`AES256`) does not.
    var encryptionHidingMD5: String? {
        if let customerKeyAlgorithm { return "SSE-C (\(customerKeyAlgorithm))" }
        if let serverSideEncryption, serverSideEncryption.hasPrefix("aws:kms") { return "SSE-KMS (\(serverSideEncryption))" }
        return nil
    }
}

/// What `HeadBucket` says: whether the bucket is there, and the server's time.
public struct BucketHead: Sendable, Equatable {
    public var exists: Bool
    /// The answer's `Date` header (whole seconds), if it had a readable one.
    public var serverDate: Date?
    /// The local time the answer arrived.
    public var receivedAt: Date

    /// How far the server's clock is ahead of ours (negative: behind), from `Date`. The
    /// header names the second the answer was made in, so its middle is the best guess.
    public var clockOffset: Duration? {
        serverDate.map { ServerClock.offset(server: $0.addingTimeInterval(0.5), local: receivedAt) }
    }
}

/// A part of a multipart upload as `CompleteMultipartUpload` lists it.
public struct CompletedPart: Sendable, Hashable {
    public var number: Int
    /// Exactly as `UploadPart` returned it, quotes included.
    public var etag: String
    /// The digest sent with the part. A CRC32C one is listed as `<ChecksumCRC32C>`, which S3
    /// requires for uploads created with a checksum algorithm; an MD5 one is not listed (S3
    /// knows it through the ETag).
    public var digest: PartDigest?

    public init(number: Int, etag: String, digest: PartDigest? = nil) {
        self.number = number
        self.etag = etag
        self.digest = digest
    }
}

/// An unfinished multipart upload, as `ListMultipartUploads` reports it.
public struct ListedUpload: Sendable, Hashable {
    public var key: String
    public var uploadID: String
    public var initiated: Date

    public init(key: String, uploadID: String, initiated: Date) {
        self.key = key
        self.uploadID = uploadID
        self.initiated = initiated
    }
}

/// What `ListMultipartUploads` showed: the uploads kept, out of how many listed.
public struct MultipartUploadListing: Sendable, Equatable {
    /// The uploads the caller kept, in the server's order.
    public var uploads: [ListedUpload] = []
    /// Every upload listed, kept or not.
    public var listed = 0
    public var pages = 0
    /// The listing stopped at its bound of pages or of uploads kept while the server said
    /// there was more.
    public var isTruncated = false

    public init() {}
}

/// An object, as `ListObjectsV2` reports it.
public struct ListedObject: Sendable, Hashable {
    public var key: String
    public var size: Int64
    /// Exactly as the server sent it, quotes included.
    public var etag: String
    public var lastModified: Date

    public init(key: String, size: Int64, etag: String, lastModified: Date) {
        self.key = key
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }
}

/// A small object read whole: a document of ingest's own, such as a card's ASC MHL chain.
public struct StoredDocument: Sendable, Equatable {
    public var bytes: [UInt8]
    /// Exactly as the server sent it, quotes included: what a write that replaces this
    /// document names in `If-Match`.
    public var etag: String

    public init(bytes: [UInt8], etag: String) {
        self.bytes = bytes
        self.etag = etag
    }
}
