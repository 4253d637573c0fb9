/// Limits of one process's uploads, from the `[upload]` configuration.
public struct UploadSettings: Sendable, Equatable {
    public var partSize = PartPlan.defaultPartSize
    public var singlePutThreshold = PartPlan.defaultSinglePutThreshold
    /// New multipart uploads after `NoSuchUpload`, per logical upload.
    public var maxRestarts = 3
    /// Files uploading at once. A small file is one request with journal writes around it,
    /// and its upload spends most of its time waiting for the server, whose own cost per
    /// request falls as more come at once: on a card of small files, 64 at once beat 16 in
    /// wall time and in the server's CPU time, the more so with 64 bodies on the wire.
    /// Each holds a connection
    /// (``TransportSettings/maxConnections``).
    public var filesInFlight = 64
    /// Bodies (parts and single PUTs) on the wire at once, over all files; up to eight times
    /// as many small ones (``TransferLimiter``). 16 large ones made the benchmark's large
    /// files no faster than 8, and held more memory.
    public var partsInFlight = 8
    /// Their total size.
    public var bytesInFlight: Int64 = 256 << 20
    /// The digest sent with every part and checked by the server: CRC32C costs next to
    /// nothing (ISA-L); MD5 (`Content-MD5`) is for servers that check nothing else.
    public var checksum: PartDigestAlgorithm = .crc32c
    /// How long a staged copy is kept after its object verified (0: deleted at once).
    public var stagingRetention: Duration = .zero
    /// Runs in a row a file or an upload may fail before it is quarantined: shown by
    /// `ingest status` and the metrics, and a non-zero exit status for every run that meets
    /// it, until it succeeds or is forgotten.
    public var quarantineAfter = 5
    /// A cap on the bytes per second of all bodies together, over every transfer of every
    /// ingest process of the station (`[upload] max_rate`, `--max-rate`; ``StationRateBucket``);
    /// nil: none. Staging is not slowed by it.
    public var maxRate: ByteRate?
    /// Sign every body with its SHA-256 even over TLS (it always is over plain HTTP to
    /// another host): costs one more read and hash of each part.
    public var signPayloads = false
    /// Send a large file's parts while it is staged (`[upload] stream_parts`): its upload
    /// ends about when its last byte is read. Its fingerprint then goes in the object's
    /// `xxh128` tag, set once the object is complete, rather than in its metadata.
    public var streamParts = true

    /// How long an upload of a key in progress, found where this station would create its
    /// own (another station with the same card), may store no part before it is taken over;
    /// until then it is waited for (``ObjectUploader/handover(behind:)``). Longer than a
    /// part takes to send at the slowest uplink of the fleet, or two stations both send it.
    public var adoptAfter: Duration = .seconds(60)

    public var cut: UploadCut { UploadCut(partSize: partSize, singlePutThreshold: singlePutThreshold) }

    public init() {}
}
