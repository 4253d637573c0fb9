import ArgumentParser
import Foundation
import IngestKit
import Logging

/// Where objects go, for the commands that talk to S3 or a tus server; each flag overrides
/// the configuration file and the environment.
struct DestinationOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "S3 endpoint URL, like https://s3.example.net, or tus+https://HOST/PATH/ for a tus server (INGEST_ENDPOINT, [s3] endpoint, [tus] url). Give it again for each further S3 gateway of the same bucket: requests go through the first that answers, among those showing the bucket id (.ingest/bucket-id) the journal recorded.",
            valueName: "url"))
    var endpoint: [String] = []

    @Option(name: .long, help: ArgumentHelp("Bucket (INGEST_BUCKET, [s3] bucket); not used with a tus endpoint.", valueName: "name"))
    var bucket: String?

    @Option(name: .long, help: ArgumentHelp("Region for signing (AWS_REGION, [s3] region; default us-east-1).", valueName: "name"))
    var region: String?

    func apply(to config: inout Config) {
        if !endpoint.isEmpty { config.s3.endpoints = endpoint }
        if let bucket { config.s3.bucket = bucket }
        if let region { config.s3.region = region }
    }
}

/// The cap on the upload rate, for the commands that upload; overrides `[upload] max_rate`.
struct UploadRateOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Cap on the upload rate for the whole station (every ingest process on it, all transfers together), like 2MiB/s, or off ([upload] max_rate; default off). Copying from the card is not slowed.",
            valueName: "rate"))
    var maxRate: String?

    func apply(to config: inout Config) throws(IngestError) {
        if let maxRate { config.upload.maxRate = try Config.parseRate(maxRate, key: "--max-rate", file: nil) }
    }
}

extension CommonOptions {
    /// The process's one upload service, whatever the command: S3 stores with credentials
    /// as the AWS tools read them, over one libcurl transport (under `[upload] max_rate`),
    /// the limits of `[upload]`. `events` hears what concerns a destination rather than one
    /// run; `wire` counts the bytes the transport sends, for the job's progress
    /// (``JobProgress/wire``).
    ///
    /// A destination's store goes through every gateway the journal records for it
    /// (``knownGateways(config:journal:)``), the configured ones among them.
    func makeUploadService(
        config: Config, state: StateDirectory, journal: Journal, events: any EventSink, wire: WireMeter = WireMeter(),
        logger: Logger
    ) async throws(IngestError) -> UploadService {
        let known = try await knownGateways(config: config, journal: journal)
        var settings = config.uploadTransport
        settings.stationRateFile = StationRateFile.path(environment: environment)
        let transport = CurlTransport(settings: settings, meter: wire)
        if let problem = transport.stationRateProblem, let rate = config.upload.maxRate {
            logger.notice(
                "max_rate \(rate) holds for this process only: the station's upload-rate file could not be used (\(problem)); other ingest processes on this machine are not counted. The ingest@ services share /run/ingest/upload-rate; set INGEST_RATE_FILE to a writable file to share it by hand.")
        }
        return try UploadService(
            journal: journal, state: state, settings: config.upload,
            stores: .network(
                credentials: CredentialsProvider(environment: environment) { events.emit(.upload(.refreshingCredentials)) },
                tusHeaders: try config.tus.headers(), transport: transport, known: known, journal: journal,
                logger: logger),
            events: events, logger: logger, keyPrefix: config.s3.prefix)
    }

    /// The stores of the destinations a command sends single requests to (`ls`, `abort`,
    /// `verify-card`, the orphan sweep): credentials as the AWS tools read them, the tus
    /// headers of `[tus]`, one libcurl transport of `[s3]`'s settings, shared by the
    /// destinations it makes.
    /// With a `journal`, a destination's store goes through every gateway the journal records
    /// for it (``knownGateways(config:journal:)``); a read-only journal records none.
    func makeStores(config: Config, journal: Journal? = nil, logger: Logger) async throws(IngestError) -> StoreFactory {
        let known = if let journal { try await knownGateways(config: config, journal: journal) } else { KnownGateways() }
        return .network(
            credentials: CredentialsProvider(environment: environment), tusHeaders: try config.tus.headers(),
            transport: CurlTransport(settings: config.s3.transport), known: known,
            journal: journal.flatMap { $0.isReadOnly ? nil : $0 }, logger: logger)
    }

    /// Every gateway the journal records, by destination: the store of a journalled
    /// destination goes through its recorded gateways, and each must show the bucket id the
    /// journal recorded. The configured gateways are recorded only by a run that found them
    /// showing the destination's bucket (``UploadService/identify(_:sink:)``): a gateway of
    /// another cluster is never recorded as one of the destination's.
    func knownGateways(config: Config, journal: Journal) async throws(IngestError) -> KnownGateways {
        do { return try await journal.knownGateways() } catch { throw .journal(error) }
    }

    /// The lock of an upload a command acts on; refused while another process runs it.
    func lockUpload(_ record: UploadRecord, in state: StateDirectory) throws(IngestError) -> VolumeLock {
        guard let lock = try state.lockUpload(record.id) else {
            throw .uploadRefused(id: record.id, reason: "another ingest process is running it; try again when it ends")
        }
        return lock
    }

    /// Removes an upload from the journal; its files stay staged and keep `note` as their
    /// last word.
    func removeUpload(_ record: UploadRecord, note: String, from journal: Journal) async throws(IngestError) {
        do { try await journal.removeUpload(id: record.id, note: note) } catch {
            throw .journal(error)
        }
    }

    /// Refuses what `abort` and `forget` would do to a completed upload: its object is in the
    /// bucket, and the journal's record of it is what says its files are uploaded (and their
    /// cards safe to erase). Nothing is pending there to abort or forget.
    func refuseCompleted(_ record: UploadRecord) throws(IngestError) {
        guard record.phase == .completed else { return }
        throw .uploadRefused(
            id: record.id,
            reason: "it is completed: \(record.key) is in \(record.target.displayName), and the journal's record of it "
                + "is what says its files are uploaded; there is nothing pending to abort or forget. "
                + "Delete the object with an S3 client if it is unwanted.")
    }

    /// Finds one upload by its id or a unique prefix of it.
    func findUpload(_ id: String, in journal: Journal) async throws(IngestError) -> UploadRecord {
        let matches: [UploadRecord]
        do { matches = try await journal.uploads(idPrefix: id) } catch {
            throw .journal(error)
        }
        guard !id.isEmpty, let first = matches.first else { throw .unknownUpload(id) }
        guard matches.count == 1 else { throw .ambiguousUpload(id, matches: matches.map(\.id)) }
        return first
    }
}
