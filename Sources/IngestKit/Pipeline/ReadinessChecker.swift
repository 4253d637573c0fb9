import Logging

/// `ingest check`: whether this station would ingest a card now, asked of every part a run
/// needs (``ReadinessCheck/Name``), without a card and without changing anything but two
/// small probe objects, which it deletes.
///
/// Every check that can run does, so one look shows everything to fix; a check that needs
/// one that failed (the bucket needs credentials) is skipped, saying why.
public struct ReadinessChecker: Sendable {
    /// Whether the station's own files (udev rule, units, timer) are looked at, and where.
    public enum StationFiles: Sendable, Equatable {
        /// Under this root (`/`, or a tree like a `make install DESTDIR=`).
        case under(root: String)
        /// Not looked at, for this reason.
        case notChecked(because: String)
    }

    /// The configuration, or why it could not be read.
    let config: Result<Config, IngestError>
    /// The state directory, absolute (nil when the configuration is unreadable).
    let statePath: String?
    let station: StationFiles
    let environment: [String: String]
    let logger: Logger

    public init(
        config: Result<Config, IngestError>, statePath: String?, station: StationFiles, environment: [String: String],
        logger: Logger
    ) {
        self.config = config
        self.statePath = statePath
        self.station = station
        self.environment = environment
        self.logger = logger
    }

    public func run() async -> ReadinessReport {
        var checks: [ReadinessCheck] = []
        let destinationNames: [ReadinessCheck.Name] = [.credentials, .bucket, .conditionalWrite, .checksums, .tagging, .clock]
        switch config {
        case .failure(let error):
            checks.append(configurationFailure(error))
            checks += [.stateDirectory, .stagingSpace].map { .skipped($0, because: "needs the configuration") }
            checks += destinationNames.map { .skipped($0, because: "needs the configuration") }
        case .success(let config):
            let target: S3Destination
            do { target = try config.s3.target() } catch {
                checks.append(configurationFailure(error, source: config.source))
                checks += await local(config)
                checks += destinationNames.map { .skipped($0, because: "needs an endpoint and a bucket") }
                break
            }
            checks.append(.passed(.configuration, "\(config.source ?? "no file, the defaults") with \(target.displayName)"))
            checks += await local(config)
            let credentials = CredentialsProvider(environment: environment)
            let stores: StoreFactory
            do {
                stores = StoreFactory.network(
                    credentials: credentials, tusHeaders: try config.tus.headers(),
                    transport: CurlTransport(settings: config.s3.transport), logger: logger)
            } catch {
                checks.append(configurationFailure(error, source: config.source))
                break
            }
            checks += await DestinationReadiness(
                target: target, credentials: credentials, stores: stores,
                probeKey: KeyTemplate.probeKey(prefix: config.s3.prefix),
                tusHeaders: config.tus.headersFile.map { "request headers from \($0)" } ?? "no extra request headers",
                records: target.isTus ? [] : await gatewayRecords(bucket: target.bucket)
            ).run()
        }
        switch station {
        case .under(let root):
            let files = StationReadiness(root: root, environment: environment)
            checks += await onDedicatedThread("ingest-check") { files.run() }
        case .notChecked(let reason):
            checks += [.udevRule, .units, .rescanTimer].map { .skipped($0, because: reason) }
        }
        return ReadinessReport(checks: checks)
    }

    /// What the journal records of the bucket's gateways, read without changing it: none
    /// without a journal. A journal that cannot be read counts as none here; the state
    /// directory's check says what is wrong with it.
    private func gatewayRecords(bucket: String) async -> [GatewayRecord] {
        guard let statePath else { return [] }
        let path = StateDirectory.journalPath(in: statePath)
        guard let journal = try? Journal.openForReading(path: path) else { return [] }
        do { return try await journal.gatewayRecords(bucket: bucket) } catch {
            logger.warning("cannot read the journal's gateways", metadata: ["journal": "\(path)", "error": "\(error)"])
            return []
        }
    }

    /// The configuration could not be read (`source` nil), or lacks what a run needs (read
    /// from `source`, nil when no file was found).
    private func configurationFailure(_ error: IngestError, source: String? = nil) -> ReadinessCheck {
        .failed(
            .configuration, error.description,
            remedy: Self.remedy(for: error, source: source, example: InstalledDocuments.named("ingest.toml.example")),
            status: error.exitStatus)
    }

    /// What to do about a configuration error: create a file that is missing (from the
    /// example), correct the key of a file, or set what is not set where it can be set.
    static func remedy(for error: IngestError, source: String?, example: String) -> String {
        let manual = "man ingest.toml lists every key"
        guard case let .config(file, key, _) = error else {
            return "correct it in the file, the environment or the options; \(manual)"
        }
        if let file {
            if !System.exists(file) {
                return "create \(file) from the example (install -m 0644 \(example) \(file)) and set [s3] endpoint "
                    + "and bucket in it, or name the right file with --config or INGEST_CONFIG"
            }
            return "correct \(key.map { "\($0) in " } ?? "")\(file); \(manual)"
        }
        let setting: (table: String, option: String, variable: String)? =
            switch key {
            case "s3.endpoint": ("[s3] endpoint", "--endpoint URL", "INGEST_ENDPOINT")
            case "s3.bucket": ("[s3] bucket", "--bucket NAME", "INGEST_BUCKET")
            default: nil
            }
        guard let setting else {
            return "correct it where it is set: \(source ?? "the environment"), or the options; \(manual)"
        }
        // /dev/null stands for no file (INGEST_CONFIG=/dev/null).
        guard let source, source != "/dev/null" else {
            let none =
                source == nil
                ? "no configuration file was found at \(Config.defaultPath)"
                : "the configuration is /dev/null (no file)"
            return "\(none): create \(Config.defaultPath) from the example "
                + "(install -m 0644 \(example) \(Config.defaultPath)) and set \(setting.table) in it, "
                + "or give \(setting.option) (\(setting.variable))"
        }
        return "set \(setting.table) in \(source), or give \(setting.option) (\(setting.variable))"
    }

    /// The state directory and the staging space; blocking calls, off the concurrency pool.
    private func local(_ config: Config) async -> [ReadinessCheck] {
        guard let statePath else {
            return [.stateDirectory, .stagingSpace].map { .skipped($0, because: "needs the configuration") }
        }
        let local = LocalReadiness(statePath: statePath, reserve: config.staging.reserve)
        return await onDedicatedThread("ingest-check") { [local.stateDirectory(), local.stagingSpace()] }
    }
}
