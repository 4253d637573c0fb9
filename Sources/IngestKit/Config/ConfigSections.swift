// The sections of the configuration whose settings have no home of their own elsewhere:
// `[s3]`, `[device]`, `[watch]`, `[scene]`, `[rescan]`, `[hooks]`.

import Foundation

/// Where objects go, from `[s3]`, `INGEST_ENDPOINT`/`INGEST_BUCKET`/`AWS_REGION` and the flags.
public struct S3Settings: Sendable, Equatable {
    /// The gateways of the bucket, in the order requests try them (`[s3] endpoint` as a
    /// string or a list, `--endpoint` given more than once, `INGEST_ENDPOINT` separated by
    /// commas); a tus endpoint stands alone.
    public var endpoints: [String] = []
    /// The first of ``endpoints``; setting it replaces them all.
    public var endpoint: String? {
        get { endpoints.first }
        set { endpoints = newValue.map { [$0] } ?? [] }
    }
    public var bucket: String?
    public var region = "us-east-1"
    /// Path-style unless configured: what S3-compatible servers expect, and it works with
    /// any bucket name.
    public var addressing: S3AddressingStyle = .path
    public var prefix = ""
    public var keyTemplate = KeyTemplate.defaultTemplate
    public var objectTagKeys = LabelPolicy.defaultObjectTagKeys
    public var connectTimeout: Duration = .seconds(10)
    /// A transfer that moves less than 1 KiB/s for this long is cut and retried.
    public var stallTimeout: Duration = .seconds(30)
    /// Whether a plain `http://` endpoint on another host is accepted (loopback always is).
    public var allowHTTP = false

    public init() {}

    /// Whether ``endpoint`` is a tus server's creation URL (`tus+https://HOST/PATH/`,
    /// ``S3Destination/tusScheme``) rather than an S3 service.
    public var isTus: Bool { endpoint.map { S3Destination.tusCreationURL(of: $0) != nil } ?? false }

    /// The upload target, or an error naming what is missing and how to set it.
    ///
    /// An endpoint starting with ``S3Destination/tusScheme`` (`tus+https://HOST/PATH/`, in
    /// any case) is a tus server's creation URL: it takes no bucket (one given too is an
    /// error naming both), must be an `http(s)` URL ``TusEndpoint`` accepts, and plain
    /// `http` to another host than this one needs ``allowHTTP`` as S3's does.
    /// - Parameter alternative: what else the command can do without a destination, added
    ///   to that error (`ingest PATH` has "use --no-upload to stage only"; `ls` has nothing).
    public func target(alternative: String? = nil) throws(IngestError) -> S3Destination {
        let orElse = alternative.map { ", or \($0)" } ?? ""
        guard let endpoint, !endpoint.isEmpty else {
            throw .config(
                file: nil, key: "s3.endpoint",
                problem: "no S3 endpoint: give --endpoint URL (or INGEST_ENDPOINT, or [s3] endpoint), "
                    + "or [tus] url for a tus server\(orElse)")
        }
        if endpoints.count > 1, let tus = endpoints.first(where: { S3Destination.tusCreationURL(of: $0) != nil }) {
            throw .config(
                file: nil, key: "s3.endpoint",
                problem: "'\(tus)' is a tus server, but several endpoints are given (\(endpoints.joined(separator: ", "))): "
                    + "a tus server stands alone; list only the S3 gateways of one bucket, or give the tus endpoint alone")
        }
        if let creationURL = S3Destination.tusCreationURL(of: endpoint) {
            return try tusTarget(endpoint: endpoint, creationURL: creationURL)
        }
        guard let bucket, !bucket.isEmpty else {
            throw .config(
                file: nil, key: "s3.bucket",
                problem: "no bucket: give --bucket NAME (or INGEST_BUCKET, or [s3] bucket)\(orElse)")
        }
        // Checked here too, after the flags: --bucket is the last word.
        if let problem = BucketName.problem(bucket) {
            throw .config(
                file: nil, key: "s3.bucket",
                problem: BucketName.fix(bucket, problem: problem, origin: "--bucket, INGEST_BUCKET or [s3] bucket"))
        }
        var seen: [S3Endpoint] = []
        for gateway in endpoints {
            let parsed: S3Endpoint
            do { parsed = try S3Endpoint(gateway) } catch {
                throw .config(file: nil, key: "s3.endpoint", problem: "\(error)")
            }
            // Compared parsed, so that `http://h:80` and `http://h/` are the one gateway they are.
            if seen.contains(parsed) {
                throw .config(
                    file: nil, key: "s3.endpoint",
                    problem: "the gateway \(gateway) is listed twice (\(endpoints.joined(separator: ", "))): list each gateway once")
            }
            seen.append(parsed)
            if parsed.isPlainHTTPOverNetwork, !allowHTTP {
                throw .config(
                    file: nil, key: "s3.allow_http",
                    problem: "the endpoint \(gateway) is plain http to another host: anyone on the way can read the "
                        + "cards' contents and change them. Use https, or set [s3] allow_http = true on a network you "
                        + "trust (bodies are then signed with their SHA-256, which costs CPU)")
            }
        }
        return S3Destination(
            endpoint: endpoint, bucket: bucket, region: region, addressing: addressing,
            gateways: endpoints.count > 1 ? endpoints : [])
    }

    /// The gateways `INGEST_ENDPOINT` names: one URL, or several separated by commas (a URL
    /// holds no comma in practice, and a comma survives a systemd `Environment=` line where
    /// spaces need quoting); blanks around each are ignored, empty items dropped.
    public static func endpointList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The target of a tus endpoint (`tus+` and `creationURL`): no bucket, no region, path
    /// addressing; the endpoint is kept as given, prefix and all, which is what the journal
    /// records.
    private func tusTarget(endpoint: String, creationURL: String) throws(IngestError) -> S3Destination {
        if let bucket, !bucket.isEmpty {
            throw .config(
                file: nil, key: "s3.bucket",
                problem: "the endpoint \(endpoint) is a tus server, which has no buckets, but the bucket '\(bucket)' "
                    + "is set too (--bucket, INGEST_BUCKET or [s3] bucket): remove the bucket, or give an S3 "
                    + "endpoint instead of the tus one (--endpoint, INGEST_ENDPOINT, [s3] endpoint or [tus] url)")
        }
        do { _ = try TusEndpoint(creationURL) } catch {
            throw .config(file: nil, key: "s3.endpoint", problem: "'\(endpoint)': \(error), after tus+ (tus+https://HOST/PATH/)")
        }
        if Self.isPlainHTTPOverNetwork(creationURL), !allowHTTP {
            throw .config(
                file: nil, key: "tus.allow_http",
                problem: "the endpoint \(endpoint) is plain http to another host: anyone on the way can read the "
                    + "cards' contents and the headers sent with them (a bearer token) and change them. Use "
                    + "tus+https, or set [tus] allow_http = true on a network you trust")
        }
        return S3Destination(endpoint: endpoint, bucket: "", region: "", addressing: .path)
    }

    /// Whether an `http(s)` URL that ``TusEndpoint`` accepted is plain http to another host
    /// than this one: decided by ``S3Endpoint`` from its scheme and authority (loopback is
    /// 127.0.0.0/8, `[::1]` and `localhost`), as for an S3 endpoint.
    static func isPlainHTTPOverNetwork(_ url: String) -> Bool {
        guard let separator = url.range(of: "://") else { return true }
        let authority = url[separator.upperBound...].prefix { !"/?#".contains($0) }
        guard let parsed = try? S3Endpoint(String(url[..<separator.upperBound]) + String(authority)) else { return true }
        return parsed.isPlainHTTPOverNetwork
    }

    public var transport: TransportSettings {
        var settings = TransportSettings()
        settings.connectTimeout = connectTimeout
        settings.lowSpeedTime = stallTimeout
        return settings
    }
}

/// This station, from `[device]`: its id and tags go on every object.
public struct DeviceSettings: Sendable, Equatable {
    public var id: String?
    public var tags: [String: String] = [:]
    /// The file-system types ingest lets the kernel parse from a card (``MountPolicy``).
    public var fileSystems = MountPolicy.standardFileSystems
    public init() {}
}

/// `ingest watch`, from `[watch]`.
public struct WatchSettings: Sendable, Equatable {
    /// Cards ingested at once; more wait their turn (`--max-cards`).
    public var maxCards = 2
    public static let maxCardsRange = 1...16
    public init() {}
}

/// The default scene, from `[scene]`, used when neither `--scene` nor the card names one.
public struct SceneSettings: Sendable, Equatable {
    public var name: String?
    public var tags: [String: String] = [:]
    public init() {}
}

/// What `ingest rescan` does besides resuming uploads and re-scanning the known cards that
/// are mounted, from `[rescan]`.
public struct RescanSettings: Sendable, Equatable {
    /// Directories ingested on every rescan, like `ingest PATH` (absolute paths).
    public var roots: [String] = []
    /// Where to write Prometheus text-format metrics (node_exporter's textfile collector);
    /// nil: none are written.
    public var metricsFile: String?
    /// Multipart uploads under the destinations' prefix that the journal does not know (a
    /// run killed between creating one and journalling its id) are aborted once they are
    /// this old; nil (`"off"`): never. Old enough that a run of another station, or of
    /// another journal, writing under the same prefix has long finished with its uploads.
    public var orphanUploadAge: Duration? = RescanSettings.defaultOrphanUploadAge
    public static let defaultOrphanUploadAge: Duration = .seconds(86400)
    /// Cards seen in this many days have their folder in the bucket listed by every rescan
    /// and compared with the journal (``UploadService/checkBucket(days:)``); 0: never.
    public var bucketCheckDays = 30
    /// Bytes every rescan reads back from the bucket and fingerprints
    /// (``UploadService/readBack(budget:days:reader:now:)``), rotating through the verified
    /// objects of the cards seen in the last 30 days, those read back longest ago first; 0
    /// (`"off"`): none. Off by default: on a cloud store every byte read back is billed
    /// (egress, and a request per 8 MiB), so the station's owner chooses the budget.
    public var readBackBytes: Int64 = 0
    public init() {}
}

/// Programs run when something is done, from `[hooks]`: station configuration, which a
/// card's scene file can never set.
public struct HookSettings: Sendable, Equatable {
    /// Run through `/bin/sh -c` once per card, after its ingest ended, with the card's
    /// summary as JSON on its standard input (``CardDoneHook``); nil: none.
    public var onCardDone: String?
    /// How long a hook may run before its process group is killed.
    public var timeout: Duration = .seconds(30)
    public static let timeoutRange: ClosedRange<Duration> = .milliseconds(100)...(.seconds(3600))
    public init() {}

    /// The program `command` runs when it is a relative path (`./card-done`, `bin/done`),
    /// which the shell would look for from ingest's working directory; nil when it is an
    /// absolute path or a bare name the shell finds in `PATH`. Leading `NAME=value`
    /// assignments are skipped, and quotes around the program's word are ignored.
    static func relativeProgram(_ command: String) -> String? {
        for word in command.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
            let program = word.trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
            if let equals = program.firstIndex(of: "="), !program[..<equals].isEmpty,
                program[..<equals].allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) })
            {
                continue
            }
            return program.contains("/") && !program.hasPrefix("/") && !program.hasPrefix("~") ? program : nil
        }
        return nil
    }
}
