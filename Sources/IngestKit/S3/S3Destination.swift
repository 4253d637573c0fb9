/// Where objects go: an S3-compatible endpoint, a bucket, the region requests are signed
/// for, and how the bucket is addressed. What the journal records with every upload, so
/// `ingest resume` reaches the bucket again with no configuration.
///
/// The endpoint is kept as the URL it was given (and journalled); ``S3Client`` parses it
/// (``S3Endpoint``), and the configuration refuses one that does not parse.
///
/// A bucket may be reached through several gateways (`[s3] endpoint` as a list): they are
/// ``gateways``, in the order requests try them (``S3Gateways``). `endpoint` is then the
/// destination's name, what the journal records: the first gateway listed, or the one the
/// journal already knew for this bucket. The gateways are not part of the destination's
/// identity (they take no part in `==`, hashing or coding), so a journalled destination,
/// read back with none, is the same destination as the configured one.
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
    /// The S3 gateways of the bucket, in the order requests try them; empty means `endpoint`
    /// alone. Not journalled: see the type's documentation.
    public var gateways: [String] = []

    public init(
        endpoint: String, bucket: String, region: String, addressing: S3AddressingStyle, gateways: [String] = []
    ) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.addressing = addressing
        self.gateways = gateways
    }

    private enum CodingKeys: String, CodingKey { case endpoint, bucket, region, addressing }

    public static func == (lhs: S3Destination, rhs: S3Destination) -> Bool {
        lhs.endpoint == rhs.endpoint && lhs.bucket == rhs.bucket && lhs.region == rhs.region
            && lhs.addressing == rhs.addressing
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(endpoint)
        hasher.combine(bucket)
        hasher.combine(region)
        hasher.combine(addressing)
    }

    /// The URLs requests may go through, in order: ``gateways``, or `endpoint` when none are
    /// listed.
    public var gatewayURLs: [String] { gateways.isEmpty ? [endpoint] : gateways }

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
