import Logging

extension StoreFactory {
    /// The stores of destinations across the network, each of the kind its endpoint says:
    /// an S3 bucket (signing with `credentials`), or a tus server (its endpoint
    /// `tus+https://…`, every request carrying `tusHeaders`), all sending over `transport`
    /// (one `credential_process` while its credentials are valid, one connection pool): the
    /// one place an ``S3Client`` or a ``TusStore`` is made. `cutTransfers` cuts the transport.
    public static func network(
        credentials: CredentialsProvider, tusHeaders: [(name: String, value: String)] = [], transport: CurlTransport,
        logger: Logger
    ) -> StoreFactory {
        StoreFactory(
            store: { target throws(IngestError) -> any ObjectStore in
                if let creationURL = target.tusCreationURL {
                    do {
                        return TusStore(
                            client: try TusClient(creationURL: creationURL, headers: tusHeaders, transport: transport, logger: logger))
                    } catch {
                        throw .config(file: nil, key: "tus.url", problem: "\(error)")
                    }
                }
                do {
                    return try S3Client(destination: target, credentials: credentials, transport: transport, logger: logger)
                } catch {
                    throw .config(file: nil, key: "s3.endpoint", problem: "\(error)")
                }
            },
            capabilities: { target in target.isTus ? TusStore.capabilities : S3Client.capabilities },
            cutTransfers: { transport.cut() })
    }
}
