// The S3 operations on objects and multipart uploads: PutObject, the multipart upload's steps,
// HeadBucket, HeadObject, and the GetObject of a small document.

import Foundation

extension S3Client {
    /// PutObject: the whole body in one request. Returns the ETag as sent.
    ///
    /// A conditional one (`If-None-Match: *`) of a body of ``expectContinueThreshold`` or
    /// more asks for `100 Continue` first, so that a server that checks the condition on
    /// the headers refuses a key taken (412) before the body is sent, not after.
    public func putObject(
        key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> ObjectWritten {
        let expectContinue = body.length >= Self.expectContinueThreshold && headers.contains(.ifNoneMatchAny)
        return try await put(
            key: key, body: body, payloadHash: payloadHash, headers: headers, isPayload: true, expectContinue: expectContinue)
    }

    /// The smallest conditional PutObject body sent after `100 Continue`. Below it the round
    /// trip costs more than the body it could spare (see docs/benchmarks.md); parts are never
    /// conditional, and never wait.
    public static let expectContinueThreshold: Int64 = 4 * S3UploadLimits.mebibyte

    /// PutObject of a document of ingest's own (a card's ASC MHL manifest or chain), not a
    /// file's content: not counted as the job's bytes on the wire (``WireMeter``).
    public func putDocument(key: String, bytes: [UInt8], headers: [SigV4Header]) async throws(S3ClientError) -> ObjectWritten {
        try await put(key: key, body: .bytes(bytes), payloadHash: PayloadHash(sha256Of: bytes), headers: headers, isPayload: false)
    }

    /// GetObject of a document of ingest's own (a card's ASC MHL chain or a manifest another
    /// station wrote); nil when there is no object at `key`. Bounded by the transport's
    /// largest answer (``CurlTransport/Settings/maxResponseBytes``): a document is never a
    /// file's content.
    public func getDocument(key: String) async throws(S3ClientError) -> StoredDocument? {
        let response = try await perform("GET", key: key, notFoundIsAnswer: true)
        if response.status == 404 { return nil }
        return StoredDocument(bytes: response.body, etag: try etag(of: response))
    }

    private func put(
        key: String, body: HTTPBody, payloadHash: PayloadHash, headers: [SigV4Header], isPayload: Bool,
        expectContinue: Bool = false
    ) async throws(S3ClientError) -> ObjectWritten {
        let response = try await perform(
            "PUT", key: key, headers: headers, body: body, payloadHash: payloadHash, policy: .part, isPayload: isPayload,
            expectContinue: expectContinue)
        return ObjectWritten(
            etag: try etag(of: response), checksumCRC32C: response[header: "x-amz-checksum-crc32c"],
            serverSideEncryption: response[header: "x-amz-server-side-encryption"],
            customerKeyAlgorithm: response[header: "x-amz-server-side-encryption-customer-algorithm"])
    }

    /// CreateMultipartUpload. Returns the server's upload ID. An upload whose parts carry
    /// CRC32C digests is created with ``PartDigestAlgorithm/createMultipartUploadHeaders``.
    public func createMultipartUpload(key: String, headers: [SigV4Header] = []) async throws(S3ClientError) -> String {
        let response = try await perform("POST", key: key, query: [S3QueryItem("uploads")], headers: headers)
        guard let document = S3XMLDocument.parse(response.body), let id = document.fields["UploadId"], !id.isEmpty else {
            throw .unexpectedAnswer(status: response.status, detail: "no UploadId in InitiateMultipartUploadResult")
        }
        return id
    }

    /// UploadPart. Returns the part's ETag exactly as the server sent it.
    public func uploadPart(
        key: String, uploadID: String, partNumber: Int, body: HTTPBody, payloadHash: PayloadHash,
        headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> String {
        let response = try await perform(
            "PUT", key: key, query: [S3QueryItem("partNumber", String(partNumber)), S3QueryItem("uploadId", uploadID)],
            headers: headers, body: body, payloadHash: payloadHash, policy: .part, isPayload: true)
        return try etag(of: response)
    }

    /// CompleteMultipartUpload, with the parts' ETags as the server gave them (and their
    /// CRC32C checksums, for an upload created with that algorithm). Returns the object's
    /// ETag, or nil where the result names none: Ceph RGW 16 answers `<ETag></ETag>` for an
    /// object that is whole, so the look at the object that follows every `Complete` gives
    /// it. An `<Error>` in a 200 answer is an error, never a success, and so is an answer
    /// that is not a `CompleteMultipartUploadResult`.
    public func completeMultipartUpload(
        key: String, uploadID: String, parts: [CompletedPart], headers: [SigV4Header] = []
    ) async throws(S3ClientError) -> String? {
        let body = "<CompleteMultipartUpload>"
            + parts.sorted { $0.number < $1.number }.map { part in
                var element = "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(xmlEscaped(part.etag))</ETag>"
                if let digest = part.digest, let name = digest.algorithm.completeElementName {
                    element += "<\(name)>\(digest.base64)</\(name)>"
                }
                return element + "</Part>"
            }.joined() + "</CompleteMultipartUpload>"
        let bytes = Array(body.utf8)
        let response = try await perform(
            "POST", key: key, query: [S3QueryItem("uploadId", uploadID)],
            headers: [SigV4Header("Content-Type", "application/xml")] + headers, body: .bytes(bytes),
            payloadHash: PayloadHash(sha256Of: bytes))
        guard let document = S3XMLDocument.parse(response.body), document.root == "CompleteMultipartUploadResult" else {
            throw .unexpectedAnswer(status: response.status, detail: "no CompleteMultipartUploadResult in the answer")
        }
        return document.fields["ETag"]
    }

    /// AbortMultipartUpload. An upload the server no longer knows counts as aborted.
    public func abortMultipartUpload(key: String, uploadID: String) async throws(S3ClientError) {
        do {
            _ = try await perform("DELETE", key: key, query: [S3QueryItem("uploadId", uploadID)])
        } catch .uploadGone {
            return
        }
    }

    /// HeadBucket: whether the bucket exists (and these credentials may use it). Ask before
    /// uploading: some servers (SeaweedFS among them) create a missing bucket on the first
    /// PutObject instead of refusing it, which would hide a mistyped bucket name.
    public func bucketExists() async throws(S3ClientError) -> Bool {
        try await headBucket().exists
    }

    /// HeadBucket, with the server's clock: whether the bucket exists, and the time its
    /// answer's `Date` header gives (`ingest check` compares it with ours).
    public func headBucket() async throws(S3ClientError) -> BucketHead {
        let response = try await perform("HEAD", key: "", notFoundIsAnswer: true)
        return BucketHead(
            exists: response.status != 404, serverDate: response[header: "date"].flatMap(ServerClock.parseHTTPDate),
            receivedAt: Date())
    }

    /// HeadObject; nil when there is no such object.
    ///
    /// With `checksumMode` the request asks for the object's checksums
    /// (`x-amz-checksum-mode: ENABLED`), which S3 reports only then: the whole-object check
    /// of CRC32C uploads needs it (``WholeObjectDigest/needsChecksumMode``). It is not the
    /// default because on AWS it also needs `kms:Decrypt` for SSE-KMS objects.
    public func headObject(key: String, checksumMode: Bool = false) async throws(S3ClientError) -> ObjectHead? {
        let headers = checksumMode ? [SigV4Header("x-amz-checksum-mode", "ENABLED")] : []
        let response = try await perform("HEAD", key: key, headers: headers, notFoundIsAnswer: true)
        if response.status == 404 { return nil }
        guard let size = response[header: "content-length"].flatMap(Int64.init) else {
            throw .unexpectedAnswer(status: response.status, detail: "no Content-Length")
        }
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        return ObjectHead(
            size: size, etag: response[header: "etag"], metadata: metadata,
            checksumCRC32C: response[header: "x-amz-checksum-crc32c"],
            checksumType: response[header: "x-amz-checksum-type"],
            serverSideEncryption: response[header: "x-amz-server-side-encryption"],
            customerKeyAlgorithm: response[header: "x-amz-server-side-encryption-customer-algorithm"],
            tagCount: response[header: "x-amz-tagging-count"].flatMap { Int($0) },
            versionID: response[header: "x-amz-version-id"].flatMap { $0 == "null" ? nil : $0 })
    }

    private func etag(of response: HTTPResponse) throws(S3ClientError) -> String {
        guard let etag = response[header: "etag"] else {
            throw .unexpectedAnswer(status: response.status, detail: "no ETag header")
        }
        return etag
    }
}
