// The configuration of a run: its settings, loaded from the file and the environment. The file's
// parsing is in Config+Parsing.swift, the sections' own types in ConfigSections.swift.

import Foundation

/// The settings of a run, from `/etc/ingest/ingest.toml` (or `--config`), then environment
/// variables, then command-line flags, each overriding the one before.
///
/// ```toml
/// state_dir = "/var/lib/ingest"   # journal and staging
///
/// [scan]
/// include = ["DCIM/**"]           # only these (default: everything)
/// exclude = ["*.tmp", "MISC"]     # never these; a matching directory is not entered
///
/// [staging]
/// reserve = "1GiB"                # free space to leave on the staging disk
/// verify = "off"                  # off | staged | both: read back after copying
/// retention = "0s"                # keep staged copies this long after their upload verified
///
/// [s3]
/// endpoint = "https://s3.example.net"
/// bucket = "field-cards"
/// region = "us-east-1"
/// prefix = "cards/"
/// key_template = "{device}/{card_date}/{label}-{card_id}/{path}"
///
/// [tus]                           # instead of [s3], for a tus server
/// url = "https://uploads.example.net/files/"
/// headers_file = "/etc/ingest/tus-headers"   # Name: value lines, mode 600
/// chunk_size = "16MiB"            # each PATCH; the part size of a tus destination
///
/// [upload]
/// part_size = "16MiB"
/// max_rate = "2MiB/s"             # all uploads together; staging is not slowed
///
/// [device]
/// id = "station-7"
/// tags = { site = "north-dock" }
///
/// [scene]
/// name = "daily-survey"           # default scene when neither --scene nor the card names one
///
/// [watch]
/// max_cards = 2                   # cards `ingest watch` ingests at once
/// [rescan]
/// roots = ["/srv/incoming"]       # directories `ingest rescan` ingests besides known cards
/// metrics_file = "/var/lib/prometheus/node-exporter/ingest.prom"
/// orphan_upload_age = "1d"        # abort multipart uploads no journal knows once this old
///
/// [hooks]
/// on_card_done = "/usr/local/bin/card-done"   # run once per card, its summary as JSON on stdin
/// timeout = "30s"                 # then it is killed, with whatever it started
/// ```
public struct Config: Sendable, Equatable {
    public static let defaultPath = "/etc/ingest/ingest.toml"

    /// Environment variables that override the file, and the key each one sets.
    public static let environmentOverrides: [(variable: String, key: String)] = [
        ("INGEST_STATE_DIR", "state_dir"),
        ("INGEST_STAGING_RESERVE", "staging.reserve"),
        ("INGEST_STAGING_VERIFY", "staging.verify"),
        ("INGEST_ENDPOINT", "s3.endpoint"),
        ("INGEST_BUCKET", "s3.bucket"),
        ("AWS_REGION", "s3.region"),
        ("INGEST_TUS_HEADERS_FILE", "tus.headers_file"),
    ]

    public var stateDirectory: String?
    public var scan = ScanRules()
    public var staging = StageSettings()
    public var s3 = S3Settings()
    public var tus = TusSettings()
    /// `[upload]` as the file set it; ``upload`` is what uploads read.
    var uploadSection = UploadSettings()
    public var device = DeviceSettings()
    public var scene = SceneSettings()
    public var watch = WatchSettings()
    public var rescan = RescanSettings()
    public var hooks = HookSettings()
    /// The file the settings came from, if any.
    public var source: String?

    public init() {}

    /// Loads the configuration: `explicitPath` (from `--config` or `INGEST_CONFIG`) must
    /// exist; without one, the default path is read if it exists. Environment overrides apply.
    ///
    /// The file is read as ``BoundedFile`` reads what configures ingest: a link is followed,
    /// `/dev/null` reads as an empty configuration, and anything but a regular file (a FIFO
    /// that would block the open forever, `/dev/zero` that would never end, a directory) or a
    /// file over 1 MiB is refused before anything of it is read.
    public static func load(explicitPath: String?, environment: [String: String]) throws(IngestError) -> Config {
        let path = explicitPath ?? defaultPath
        var config = Config()
        let read: BoundedFile?
        do { read = try BoundedFile.read(path, links: .follow) } catch {
            let fix =
                explicitPath != nil
                ? "point --config or INGEST_CONFIG at the configuration itself, a regular TOML file of at most 1 MiB"
                : "make it a regular TOML file of at most 1 MiB, or remove it to use the defaults"
            switch error {
            case .failed(let failure): throw .config(file: path, key: nil, problem: "cannot be read: \(failure.reason)")
            case .symbolicLink, .notRegular, .tooLarge: throw .config(file: path, key: nil, problem: "\(error); \(fix)")
            }
        }
        if let read {
            // A regular file is checked; /dev/null ("no configuration") is the system's.
            if let info = read.status, let reason = untrustedReason(info) {
                throw .config(
                    file: path, key: nil, problem: "is not trusted: \(reason.replacingOccurrences(of: "FILE", with: path))")
            }
            config = try parse(String(decoding: read.bytes, as: UTF8.self), file: path)
        } else if explicitPath != nil {
            throw .config(file: path, key: nil, problem: "no such file (check --config or INGEST_CONFIG)")
        }
        try config.applyEnvironment(environment)
        return config
    }

    mutating func applyEnvironment(_ environment: [String: String]) throws(IngestError) {
        func value(_ variable: String) -> String? { environment[variable].flatMap { $0.isEmpty ? nil : $0 } }
        if let dir = value("INGEST_STATE_DIR") {
            guard dir.hasPrefix("/") else {
                throw .config(file: nil, key: "INGEST_STATE_DIR", problem: Self.relativePathProblem(dir, example: "/var/lib/ingest"))
            }
            stateDirectory = dir
        }
        if let reserve = value("INGEST_STAGING_RESERVE") {
            staging.reserve = try Self.parseSize(reserve, key: "INGEST_STAGING_RESERVE", file: nil)
        }
        if let verify = value("INGEST_STAGING_VERIFY") {
            staging.verify = try Self.parseVerify(verify, key: "INGEST_STAGING_VERIFY", file: nil)
        }
        if let endpoint = value("INGEST_ENDPOINT") { s3.endpoints = S3Settings.endpointList(endpoint) }
        if let bucket = value("INGEST_BUCKET") {
            if let problem = BucketName.problem(bucket) {
                throw .config(file: nil, key: "INGEST_BUCKET", problem: BucketName.fix(bucket, problem: problem, origin: "INGEST_BUCKET"))
            }
            s3.bucket = bucket
        }
        if let region = value("AWS_REGION") ?? value("AWS_DEFAULT_REGION") { s3.region = region }
        if let headers = value("INGEST_TUS_HEADERS_FILE") {
            guard headers.hasPrefix("/") else {
                throw .config(
                    file: nil, key: "INGEST_TUS_HEADERS_FILE", problem: Self.relativePathProblem(headers, example: "/etc/ingest/tus-headers"))
            }
            tus.headersFile = headers
        }
    }

    /// The limits of uploads, from `[upload]`. For a tus destination (an endpoint starting
    /// with `tus+`, from `[tus] url`, `[s3] endpoint`, `INGEST_ENDPOINT` or `--endpoint`,
    /// whichever set it last) its ``UploadSettings/partSize`` is `[tus] chunk_size`
    /// (``TusSettings/chunkSize``), the size of each `PATCH`, and setting it sets the chunk
    /// size; `[upload] part_size` is S3's. So whatever reads `config.upload` gets the part
    /// size of the destination it uploads to, whichever way the destination was chosen.
    public var upload: UploadSettings {
        get {
            var settings = uploadSection
            if s3.isTus {
                settings.partSize = tus.chunkSize
                // A file sent in one request (with its creation) is at most one chunk: a lost
                // answer then costs no more than a lost PATCH.
                settings.singlePutThreshold = min(settings.singlePutThreshold, tus.chunkSize)
            }
            return settings
        }
        set {
            var settings = newValue
            if s3.isTus {
                let handedOut = min(uploadSection.singlePutThreshold, tus.chunkSize)
                tus.chunkSize = newValue.partSize
                settings.partSize = uploadSection.partSize
                // The threshold handed out for tus, set back unchanged, is `[upload]`'s still.
                if newValue.singlePutThreshold == handedOut { settings.singlePutThreshold = uploadSection.singlePutThreshold }
            }
            uploadSection = settings
        }
    }

    /// Why `path`, a relative path given where an absolute one is needed, is refused, and the fix.
    static func relativePathProblem(_ path: String, example: String) -> String {
        "'\(path)' is a relative path, which would be taken from whatever directory ingest was started in "
            + "(a shell's, systemd's /, cron's home); write it as an absolute path, from /, like \"\(example)\""
    }

    /// The transport of the upload service: `[s3]`'s limits, and `[upload] max_rate` on the
    /// bodies it sends.
    public var uploadTransport: TransportSettings {
        var settings = s3.transport
        settings.maxSendRate = upload.maxRate
        return settings
    }
}
