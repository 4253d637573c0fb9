import Logging

/// One store per destination, made by the process's ``StoreFactory`` and checked once (that
/// it is there, then whether it honours `If-None-Match`) before its first upload, and
/// stopped for good after a failure that concerns the whole destination.
actor Destinations {
    private let stores: StoreFactory
    private let sink: any EventSink
    private let logger: Logger
    private let probeKey: String
    private var ready: [S3Destination: Task<Result<ReadyDestination, UploadError>, Never>] = [:]
    private var readers: [S3Destination: Task<Result<any ObjectStore, UploadError>, Never>] = [:]
    private var stopped: [S3Destination: UploadError] = [:]
    /// What ``UploadService/identify(_:sink:)`` found of each destination it identified.
    private var identities: [S3Destination: DestinationIdentity] = [:]

    /// Cuts every transfer of every store, for good: the process is stopping.
    nonisolated func cutTransfers() { stores.cutTransfers() }

    init(stores: StoreFactory, sink: any EventSink, logger: Logger, probeKey: String) {
        self.stores = stores
        self.sink = sink
        self.logger = logger
        self.probeKey = probeKey
    }

    func client(for target: S3Destination) async -> Result<ReadyDestination, UploadError> {
        if let error = stopped[target] { return .failure(error) }
        let task: Task<Result<ReadyDestination, UploadError>, Never>
        if let existing = ready[target] {
            task = existing
        } else {
            let (stores, sink, logger, probeKey) = (self.stores, self.sink, self.logger, self.probeKey)
            task = Task { await Self.connect(target, stores: stores, sink: sink, logger: logger, probeKey: probeKey) }
            ready[target] = task
        }
        var result = await task.value
        if case .failure(let error) = result { stopped[target] = error }
        if case .success(var ready) = result, let identity = identities[target] {
            ready.identity = identity
            result = .success(ready)
        }
        return result
    }

    /// The store of `target` for looking only (listings and `HEAD`s: the bucket check, the
    /// read-back): the bucket must be there, and nothing is written to find out more, so a
    /// check, or a known card's rerun that sends nothing, writes nothing. A destination made
    /// ready for uploads already gives its store.
    func reader(for target: S3Destination) async -> Result<any ObjectStore, UploadError> {
        if let error = stopped[target] { return .failure(error) }
        if let uploading = ready[target] { return await uploading.value.map(\.client) }
        let task: Task<Result<any ObjectStore, UploadError>, Never>
        if let existing = readers[target] {
            task = existing
        } else {
            let stores = self.stores
            task = Task { await Self.look(at: target, stores: stores) }
            readers[target] = task
        }
        let result = await task.value
        if case .failure(let error) = result { stopped[target] = error }
        return result
    }

    /// The store of `target`, once `HeadBucket` found the bucket there.
    static func look(at target: S3Destination, stores: StoreFactory) async -> Result<any ObjectStore, UploadError> {
        let client: any ObjectStore
        do { client = try stores.store(target) } catch {
            return .failure(UploadError(exitStatus: error.exitStatus, scope: .destination, message: "\(error)"))
        }
        do {
            guard try await client.headBucket().exists else { return .failure(.missingBucket(target)) }
        } catch {
            return .failure(UploadError(error, what: "HeadBucket \(target.bucket)", target: target))
        }
        return .success(client)
    }

    /// Keeps what the run found of a destination, for its ``ReadyDestination``.
    func note(_ identity: DestinationIdentity) {
        identities[identity.target] = identity
    }

    func stop(_ target: S3Destination, because error: UploadError) {
        if stopped[target] == nil { stopped[target] = error }
    }

    static func connect(
        _ target: S3Destination, stores: StoreFactory, sink: any EventSink, logger: Logger, probeKey: String
    ) async -> Result<ReadyDestination, UploadError> {
        let client: any ObjectStore
        switch await look(at: target, stores: stores) {
        case .success(let store): client = store
        case .failure(let error): return .failure(error)
        }
        let trial = await client.tryConditionalWrite(key: probeKey)
        if let error = trial.leftInPlace {
            logger.info("the probe object stays", metadata: ["key": "\(probeKey)", "error": "\(error)"])
        }
        var conditionalWrites = true
        if case .notHonoured(let reason) = trial.conditionalWrites(key: probeKey) {
            logger.warning("conditional writes not honoured", metadata: ["bucket": "\(target.bucket)", "reason": "\(reason)"])
            sink.emit(.upload(.conditionalWritesNotHonoured(target, reason: reason)))
            conditionalWrites = false
        }
        let ready = ReadyDestination(
            client: client, conditionalWrites: conditionalWrites, keepsChecksums: trial.echoedCRC32C != false)
        if !ready.keepsChecksums {
            logger.notice("checksums not kept: parts go with Content-MD5", metadata: ["bucket": "\(target.bucket)"])
            sink.emit(.upload(.checksumsNotKept(target)))
        }
        return .success(ready)
    }
}
