// The S3 listings, each followed page by page within its bound: ListParts,
// ListMultipartUploads, ListObjectsV2.

import Logging

extension S3Client {
    /// The most pages `ListParts` follows. An upload holds at most 10,000 parts and servers
    /// send up to 1,000 a page (AWS and SeaweedFS both), so 10 pages hold any upload; 1,000
    /// leaves room for servers that send as few as 10 a page, and stops one that pages forever.
    public static let maxListPartsPages = 1_000

    /// ListParts, every page of it (at most ``maxListPartsPages``).
    public func listParts(key: String, uploadID: String) async throws(S3ClientError) -> [ListedPart] {
        var parts: [ListedPart] = []
        var marker: String?
        var pages = ListingPages(
            "ListParts", limit: Self.maxListPartsPages, pastLimitNote: "more than an upload of at most "
                + "\(S3UploadLimits.maxPartCount) parts needs: the server pages forever")
        while true {
            var query = [S3QueryItem("uploadId", uploadID)]
            if let marker { query.append(S3QueryItem("part-number-marker", marker)) }
            let response = try await perform("GET", key: key, query: query)
            pages.read()
            guard let document = S3XMLDocument.parse(response.body, records: ["Part"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListPartsResult is not XML")
            }
            for record in document.records["Part", default: []] {
                guard let number = record["PartNumber"].flatMap(Int.init), let etag = record["ETag"],
                    let size = record["Size"].flatMap(Int64.init)
                else { throw .unexpectedAnswer(status: response.status, detail: "a Part without PartNumber, ETag or Size") }
                parts.append(ListedPart(
                    number: number, etag: etag, size: size,
                    lastModified: record["LastModified"].flatMap(ServerClock.parseISO8601),
                    crc32c: record["ChecksumCRC32C"]))
            }
            guard parts.count <= S3UploadLimits.maxPartCount else {
                throw .unexpectedAnswer(
                    status: response.status,
                    detail: "ListParts listed more than \(S3UploadLimits.maxPartCount) parts, more than any upload holds")
            }
            guard document.fields["IsTruncated"] == "true" else { return parts }
            guard let next = document.fields["NextPartNumberMarker"] else {
                throw .unexpectedAnswer(status: response.status, detail: "a truncated ListParts page without a marker")
            }
            try pages.follow(next, status: response.status)
            marker = next
        }
    }

    /// The most pages a listing follows: a server (or something posing as one) that answers
    /// truncated page after truncated page, each with new markers, would otherwise be
    /// followed forever. 100 pages of the default 1,000 entries hold 100,000 unfinished
    /// uploads, far beyond what one station leaves.
    public static let maxListPages = 100

    /// The most uploads a ``listMultipartUploads(prefix:pageSize:maxPages:keeping:)`` keeps;
    /// the listing stops there as at its page bound. With keys and upload ids of at most
    /// ``maxListedNameBytes`` each, what is kept stays under 25 MB whatever the server sends.
    public static let maxKeptUploads = 10_000

    /// The longest key or upload id a listing accepts: S3 keys are at most 1,024 bytes
    /// (``S3UploadLimits/maxKeyBytes``), upload ids far shorter.
    static let maxListedNameBytes = S3UploadLimits.maxKeyBytes

    /// ListMultipartUploads under `prefix`: the uploads begun and neither completed nor
    /// aborted (a rescan aborts the ones no journal knows). Only those `keeping` accepts are
    /// kept, so a long listing costs the memory of what is kept, not of what is listed; at
    /// most `maxPages` pages are followed (``MultipartUploadListing/isTruncated`` then says
    /// the server had more).
    ///
    /// Keys are asked for as they are, not URL-encoded (`encoding-type=url`): SeaweedFS 4.48
    /// answers `<EncodingType>url</EncodingType>` to that but sends the keys unencoded, so
    /// decoding them would turn `+` into a space and break on `%`. Spaces, `+`, `%`, `&` and
    /// any non-ASCII text come back exactly; what the encoding would add is only the control
    /// characters XML 1.0 cannot carry, so object keys must be built without them.
    ///
    /// Pages follow `NextKeyMarker` and `NextUploadIdMarker`, each sent when the server gave
    /// it: AWS orders by key and sends both; SeaweedFS orders by upload ID and sends only the
    /// second. `pageSize` (`max-uploads`, at most 1,000) is for tests; the server's default
    /// is 1,000.
    public func listMultipartUploads(
        prefix: String = "", pageSize: Int? = nil, maxPages: Int = S3Client.maxListPages,
        keeping: (ListedUpload) -> Bool = { _ in true }
    ) async throws(S3ClientError) -> MultipartUploadListing {
        var listing = MultipartUploadListing()
        var markers: (key: String?, uploadID: String?) = (nil, nil)
        var pages = ListingPages(
            "ListMultipartUploads", limit: maxPages, pastLimitNote: "more unfinished uploads than a station leaves")
        while true {
            var query = [S3QueryItem("uploads")]
            if !prefix.isEmpty { query.append(S3QueryItem("prefix", prefix)) }
            if let pageSize { query.append(S3QueryItem("max-uploads", String(pageSize))) }
            if let key = markers.key { query.append(S3QueryItem("key-marker", key)) }
            if let uploadID = markers.uploadID { query.append(S3QueryItem("upload-id-marker", uploadID)) }
            let response = try await perform("GET", key: "", query: query)
            pages.read()
            listing.pages = pages.count
            guard let document = S3XMLDocument.parse(response.body, records: ["Upload"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListMultipartUploadsResult is not XML")
            }
            for record in document.records["Upload", default: []] {
                guard let key = record["Key"], let uploadID = record["UploadId"], !uploadID.isEmpty,
                    let initiated = record["Initiated"].flatMap(ServerClock.parseISO8601)
                else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "an Upload without Key, UploadId or an ISO 8601 Initiated")
                }
                guard key.utf8.count <= Self.maxListedNameBytes, uploadID.utf8.count <= Self.maxListedNameBytes else {
                    throw .unexpectedAnswer(
                        status: response.status,
                        detail: "an Upload whose Key or UploadId is longer than \(Self.maxListedNameBytes) bytes")
                }
                let upload = ListedUpload(key: key, uploadID: uploadID, initiated: initiated)
                listing.listed += 1
                if listing.uploads.count < Self.maxKeptUploads, keeping(upload) { listing.uploads.append(upload) }
            }
            guard document.fields["IsTruncated"] == "true" else { return listing }
            let next = (key: document.fields["NextKeyMarker"], uploadID: document.fields["NextUploadIdMarker"])
            guard next.key != nil || next.uploadID != nil else {
                throw .unexpectedAnswer(
                    status: response.status, detail: "a truncated ListMultipartUploads page without markers")
            }
            guard !pages.isAtLimit, listing.uploads.count < Self.maxKeptUploads else {
                listing.isTruncated = true
                logger.warning(
                    "ListMultipartUploads has more than is followed",
                    metadata: ["prefix": "\(prefix)", "pages": "\(listing.pages)", "kept": "\(listing.uploads.count)"])
                return listing
            }
            try pages.follow([next.key, next.uploadID], status: response.status)
            markers = next
        }
    }

    /// ListObjectsV2 under `prefix`, every page of it.
    ///
    /// Keys are asked for URL-encoded (`encoding-type=url`), the one form in which any key,
    /// even one with characters XML 1.0 cannot carry, survives, and decoded when the answer
    /// says `<EncodingType>url</EncodingType>`: `+` is a space (S3 encodes as HTML forms do),
    /// `%XX` a byte of the UTF-8 form. AWS and SeaweedFS both encode this listing's keys.
    ///
    /// Pages follow `NextContinuationToken`, which is opaque and never encoded. `pageSize`
    /// (`max-keys`, at most 1,000) is for tests; the server's default is 1,000.
    public func listObjectsV2(prefix: String = "", pageSize: Int? = nil) async throws(S3ClientError) -> [ListedObject] {
        var objects: [ListedObject] = []
        try await listObjectsV2(prefix: prefix, pageSize: pageSize) { objects += $0 }
        return objects
    }

    /// The most pages ``listObjectsV2(prefix:pageSize:maxPages:page:)`` follows: 10,000,000
    /// objects at the usual 1,000 a page, more than `ingest ls` (a HeadObject each) lists in
    /// a day; it stops a server that pages forever.
    public static let maxObjectListPages = 10_000

    /// ListObjectsV2 page by page: `page` takes each page's objects before the next is asked
    /// for, so a listing of any length holds one page in memory. More than `maxPages` pages
    /// is an error.
    public func listObjectsV2(
        prefix: String = "", pageSize: Int? = nil, maxPages: Int = S3Client.maxObjectListPages,
        page: ([ListedObject]) async -> Void
    ) async throws(S3ClientError) {
        var token: String?
        var pages = ListingPages(
            "ListObjectsV2", limit: maxPages,
            pastLimitNote: "a listing too long to follow or a server that pages forever: list a narrower prefix")
        while true {
            var query = [S3QueryItem("list-type", "2"), S3QueryItem("encoding-type", "url")]
            if !prefix.isEmpty { query.append(S3QueryItem("prefix", prefix)) }
            if let pageSize { query.append(S3QueryItem("max-keys", String(pageSize))) }
            if let token { query.append(S3QueryItem("continuation-token", token)) }
            let response = try await perform("GET", key: "", query: query)
            pages.read()
            guard let document = S3XMLDocument.parse(response.body, records: ["Contents"]) else {
                throw .unexpectedAnswer(status: response.status, detail: "ListBucketResult is not XML")
            }
            let encoded = document.fields["EncodingType"] == "url"
            var objects: [ListedObject] = []
            for record in document.records["Contents", default: []] {
                guard let rawKey = record["Key"], let size = record["Size"].flatMap(Int64.init),
                    let etag = record["ETag"], let lastModified = record["LastModified"].flatMap(ServerClock.parseISO8601)
                else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "a Contents without Key, Size, ETag or an ISO 8601 LastModified")
                }
                guard let key = encoded ? S3Encoding.formDecoded(rawKey) : rawKey else {
                    throw .unexpectedAnswer(
                        status: response.status, detail: "the key '\(rawKey)' is not URL-encoded UTF-8")
                }
                objects.append(ListedObject(key: key, size: size, etag: etag, lastModified: lastModified))
            }
            await page(objects)
            guard document.fields["IsTruncated"] == "true" else { return }
            guard let next = document.fields["NextContinuationToken"] else {
                throw .unexpectedAnswer(status: response.status, detail: "a truncated ListObjectsV2 page without a token")
            }
            try pages.follow(next, status: response.status)
            token = next
        }
    }
}
