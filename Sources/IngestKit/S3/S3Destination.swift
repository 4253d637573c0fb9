/// Where objects go: an S3-compatible endpoint, a bucket, the region requests are signed
/// for, and how the bucket is addressed. What the journal records with every upload, so
/// `ingest resume` reaches the bucket again with no configuration.
///
/// The endpoint is kept as the URL it was given (and journalled); ``S3Client`` parses it
/// (``S3Endpoint``), and the configuration refuses one that does not parse.
public struct S3Destination: Sendable, Hashable, Codable {
    public var endpoint: String
    public var bucket: String
    public var region: String
    public var addressing: S3AddressingStyle

    public init(endpoint: String, bucket: String, region: String, addressing: S3AddressingStyle) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.addressing = addressing
    }

    /// How people read it: `s3://cards at http://127.0.0.1:8333`.
    public var displayName: String { "s3://\(bucket) at \(endpoint)" }
}
