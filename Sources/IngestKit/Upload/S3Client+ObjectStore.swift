/// The S3 destination: every operation of ``ObjectStore`` is the S3 request of the same
/// name, and S3 can do everything a store may (``StoreCapabilities``).
extension S3Client: ObjectStore {
    public var capabilities: StoreCapabilities { [.listing, .tagging] }

    public var uploadListingBound: ListingBound { ListingBound(pages: Self.maxListPages, kept: Self.maxKeptUploads) }

    public var bodiesCrossPlainHTTP: Bool { endpoint.isPlainHTTPOverNetwork }

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
}
