import Logging

extension StoreFactory {
    /// S3 stores, all signing with `credentials` and sending over `transport` (one
    /// `credential_process` while its credentials are valid, one connection pool): the one
    /// place an ``S3Client`` is made. `cutTransfers` cuts the transport.
    public static func s3(credentials: CredentialsProvider, transport: CurlTransport, logger: Logger) -> StoreFactory {
        StoreFactory(
            store: { target throws(IngestError) in
                do {
                    return try S3Client(destination: target, credentials: credentials, transport: transport, logger: logger)
                } catch {
                    throw .config(file: nil, key: "s3.endpoint", problem: "\(error)")
                }
            },
            cutTransfers: { transport.cut() })
    }
}
