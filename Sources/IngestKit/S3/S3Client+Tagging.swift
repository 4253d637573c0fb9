extension S3Client {
    /// The most tags an answer to `GetObjectTagging` is read for: S3 allows 10 per object
    /// (``ObjectTagging/maximumTags``); a server that sends more is not believed past this.
    static let maxReadTags = 50

    /// GetObjectTagging: the object's tags, by key; nil when there is no object at `key`.
    public func getObjectTagging(key: String) async throws(S3ClientError) -> [String: String]? {
        let response: HTTPResponse
        do {
            response = try await perform("GET", key: key, query: [S3QueryItem("tagging")])
        } catch .server(let error, _) where error.status == 404 {
            return nil
        }
        guard let document = S3XMLDocument.parse(response.body, records: ["Tag"]) else {
            throw .unexpectedAnswer(status: response.status, detail: "no Tagging document in the GetObjectTagging answer")
        }
        var tags: [String: String] = [:]
        for tag in (document.records["Tag"] ?? []).prefix(Self.maxReadTags) {
            if let name = tag["Key"] { tags[name] = tag["Value"] ?? "" }
        }
        return tags
    }

    /// PutObjectTagging: replaces the object's whole tag set with `tags`. Sent with its
    /// `Content-MD5`, which S3 requires of this request.
    public func putObjectTagging(key: String, tags: [String: String]) async throws(S3ClientError) {
        let body = "<Tagging><TagSet>"
            + tags.sorted { $0.key < $1.key }.map { "<Tag><Key>\(xmlEscaped($0.key))</Key><Value>\(xmlEscaped($0.value))</Value></Tag>" }
            .joined() + "</TagSet></Tagging>"
        let bytes = Array(body.utf8)
        let md5 = PartDigest.compute(.md5, bytes: bytes)
        _ = try await perform(
            "PUT", key: key, query: [S3QueryItem("tagging")],
            headers: [SigV4Header("Content-Type", "application/xml")] + md5.headers, body: .bytes(bytes),
            payloadHash: PayloadHash(sha256Of: bytes))
    }
}
