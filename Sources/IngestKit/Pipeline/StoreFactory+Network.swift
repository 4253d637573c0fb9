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
    /// `known` records under the destination's name (the journal's, read at the start). With
    /// several gateways, the bucket's identity `known` records is the one each must show; one
    /// learned from a gateway is recorded in `journal`.
    public static func network(
        credentials: CredentialsProvider, tusHeaders: [(name: String, value: String)] = [], transport: CurlTransport,
        known: KnownGateways = KnownGateways(), journal: Journal? = nil, logger: Logger
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
                    let urls = target.gatewayURLs + known.urls(for: target)
                    let gateways = try shared.withLock { pools throws(S3AddressError) -> S3Gateways in
                        let name = "\(target.endpoint)\n\(target.bucket)"
                        if let pool = pools[name] {
                            try pool.add(urls: urls)
                            return pool
                        }
                        let pool = try S3Gateways(urls: urls, logger: logger, identified: { id in
                            guard let journal else { return }
                            // Not awaited by the request that learned it: a lost record costs
                            // only the check against it, and the next process learns it again.
                            Task {
                                do { try await journal.recordBucketID(String(decoding: id, as: UTF8.self), of: target) } catch {
                                    logger.warning("cannot record the bucket's identity", metadata: ["error": "\(error)"])
                                }
                            }
                        })
                        if let id = known.bucketID(for: target) { pool.expect(bucketID: Array(id.utf8)) }
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
