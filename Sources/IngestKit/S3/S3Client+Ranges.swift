// GetObject of a range of an object's bytes: what reads an object back (``ObjectReadBack``).

extension S3Client {
    /// GetObject of the bytes `range` of the object at `key` (`Range: bytes=a-b`), only while
    /// its ETag is `ifMatch` when one is given (`If-Match`: a `412` says the object was
    /// replaced since that ETag was seen); nil when there is no object at `key`. The range
    /// is held whole in memory: the caller bounds it (well under the transport's
    /// ``TransportSettings/maxResponseBytes``). Retried as a part is.
    public func getObject(key: String, range: ClosedRange<Int64>, ifMatch: String?) async throws(S3ClientError) -> ObjectRange? {
        var headers = [SigV4Header("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")]
        if let ifMatch { headers.append(SigV4Header("If-Match", ifMatch)) }
        let response = try await perform(
            "GET", key: key, headers: headers, policy: .part, notFoundIsAnswer: true, answerIsContent: true)
        if response.status == 404 { return nil }
        let expected = range.upperBound - range.lowerBound + 1
        // 206 with the range asked for; a 200 (a server that ignores Range) is the whole
        // object, which is right only when the range is the whole object.
        guard Int64(response.body.count) == expected, response.status == 206 || range.lowerBound == 0 else {
            throw .unexpectedAnswer(
                status: response.status,
                detail: "asked for bytes \(range.lowerBound)-\(range.upperBound) of \(key), got \(response.body.count) bytes"
                    + (response[header: "content-range"].map { " (Content-Range: \($0))" } ?? ""))
        }
        return ObjectRange(bytes: response.body, etag: response[header: "etag"])
    }
}

/// A range of an object's bytes, as read.
public struct ObjectRange: Sendable, Equatable {
    public var bytes: [UInt8]
    /// The object's ETag, as the server sent it with the range.
    public var etag: String?

    public init(bytes: [UInt8], etag: String?) {
        self.bytes = bytes
        self.etag = etag
    }
}
