/// Where objects go: an S3-compatible endpoint, a bucket, the region requests are signed
/// for, and how the bucket is addressed. What the journal records with every upload, so
/// `ingest resume` reaches the bucket again with no configuration.
///
/// The endpoint is kept as the URL it was given (and journalled); ``S3Client`` parses it
/// (``S3Endpoint``), and the configuration refuses one that does not parse.
///
/// A tus server travels as one too, so that the journal needs no second schema: its
/// endpoint is the creation URL behind ``tusScheme`` (`tus+https://HOST/PATH/`), with no
/// bucket, no region and path addressing. The journalled endpoint says the kind
/// (``isTus``).
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

    /// What an endpoint starts with when it is a tus server's creation URL, not an S3
    /// service: `tus+https://HOST/PATH/`.
    public static let tusScheme = "tus+"

    /// Whether the endpoint is a tus creation URL (it starts with ``tusScheme``, in any case).
    public var isTus: Bool { Self.tusCreationURL(of: endpoint) != nil }

    /// The tus creation URL (the endpoint without ``tusScheme``); nil for an S3 endpoint.
    public var tusCreationURL: String? { Self.tusCreationURL(of: endpoint) }

    /// `endpoint` without ``tusScheme`` when it starts with it (in any case), else nil.
    static func tusCreationURL(of endpoint: String) -> String? {
        guard endpoint.prefix(tusScheme.count).lowercased() == tusScheme else { return nil }
        return String(endpoint.dropFirst(tusScheme.count))
    }

    /// How people read it: `s3://cards at http://127.0.0.1:8333`, `tus https://HOST/PATH/`.
    public var displayName: String {
        if let tusCreationURL { return "tus \(tusCreationURL)" }
        return "s3://\(bucket) at \(endpoint)"
    }
}
