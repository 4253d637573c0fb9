import Logging
import Synchronization

extension StoreFactory {
    /// The stores of destinations across the network, each of the kind its endpoint says:
    /// an S3 bucket (signing with `credentials`), or a tus server (its endpoint
    /// `tus+https://…`, every request carrying `tusHeaders`), all sending over `transport`
    /// (one `credential_process` while its credentials are valid, one connection pool): the
    /// one place an ``S3Client`` or a ``TusStore`` is made. `cutTransfers` cuts the transport.
    ///
    /// The stores of one S3 destination share one ``S3Gateways`` (a gateway found down by
    /// one request is skipped by all); its gateways are those of every target of that
    /// destination asked for, in the order first seen, and `knownGateways(target)`: those
    /// the journal records under the destination's name.
    public static func network(
        credentials: CredentialsProvider, tusHeaders: [(name: String, value: String)] = [], transport: CurlTransport,
        knownGateways: @escaping @Sendable (S3Destination) -> [String] = { _ in [] }, logger: Logger
    ) -> StoreFactory {
        let shared = Mutex<[String: S3Gateways]>([:])
        return StoreFactory(
            store: { target throws(IngestError) -> any ObjectStore in
                if let creationURL = target.tusCreationURL {
                    do {
                        return TusStore(
                            client: try TusClient(creationURL: creationURL, headers: tusHeaders, transport: transport, logger: logger))
                    } catch {
                        throw .config(file: nil, key: "tus.url", problem: "\(error)")
                    }
                }
                do throws(S3AddressError) {
                    let urls = target.gatewayURLs + knownGateways(target)
                    let gateways = try shared.withLock { pools throws(S3AddressError) -> S3Gateways in
                        let name = "\(target.endpoint)\n\(target.bucket)"
                        if let pool = pools[name] {
                            try pool.add(urls: urls)
                            return pool
                        }
                        let pool = try S3Gateways(urls: urls, logger: logger)
                        pools[name] = pool
                        return pool
                    }
                    return S3Client(
                        destination: target, gateways: gateways, credentials: credentials, transport: transport, logger: logger)
                } catch {
                    throw .config(file: nil, key: "s3.endpoint", problem: "\(error)")
                }
            },
            capabilities: { target in target.isTus ? TusStore.capabilities : S3Client.capabilities },
            cutTransfers: { transport.cut() })
    }
}
