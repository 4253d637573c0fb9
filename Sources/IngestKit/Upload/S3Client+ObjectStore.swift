/// The S3 destination: every operation of ``ObjectStore`` is the S3 request of the same
/// name, and S3 can do everything a store may (``StoreCapabilities``).
extension S3Client: ObjectStore {
    /// Everything a store may do.
    public static let capabilities: StoreCapabilities = .all

    public var capabilities: StoreCapabilities { Self.capabilities }

    public var uploadListingBound: ListingBound { ListingBound(pages: Self.maxListPages, kept: Self.maxKeptUploads) }

    public var bodiesCrossPlainHTTP: Bool { gateways.all.contains { $0.endpoint.isPlainHTTPOverNetwork } }

    /// ListObjectsV2, page by page (at most ``maxObjectListPages``).
    public func listObjects(prefix: String, page: ([ListedObject]) async -> Void) async throws(S3ClientError) {
        try await listObjectsV2(prefix: prefix, page: page)
    }

    /// ListMultipartUploads (at most ``maxListPages`` pages and ``maxKeptUploads`` kept).
    public func listUploads(prefix: String, keeping: (ListedUpload) -> Bool) async throws(S3ClientError)
        -> MultipartUploadListing
    {
        try await listMultipartUploads(prefix: prefix, keeping: keeping)
    }

    /// CreateMultipartUpload: S3 learns the size from the parts.
    public func createMultipartUpload(key: String, size: Int64, headers: [SigV4Header]) async throws(S3ClientError) -> String {
        try await createMultipartUpload(key: key, headers: headers)
    }

    /// UploadPart: S3 places a part by its number.
    public func uploadPart(
        key: String, uploadID: String, partNumber: Int, offset: Int64, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header]
    ) async throws(S3ClientError) -> String {
        try await uploadPart(
            key: key, uploadID: uploadID, partNumber: partNumber, body: body, payloadHash: payloadHash, headers: headers)
    }

    /// ListParts: S3 lists each part with its size.
    public func listParts(key: String, uploadID: String, partSize: Int64) async throws(S3ClientError) -> [ListedPart] {
        try await listParts(key: key, uploadID: uploadID)
    }
}
