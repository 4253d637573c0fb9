import GRDB

/// The S3 gateways the journal records, by destination: read once when a process makes its
/// stores, so that the store of a journalled destination (resume, abort, a rerun) goes
/// through every gateway of its bucket, not only the one that names it.
public struct KnownGateways: Sendable, Equatable {
    /// Gateway URLs in the order recorded, by `"\(name)\n\(bucket)"`.
    var byDestination: [String: [String]]
    /// The bucket's identity (``S3Gateways/markerKey``) a gateway showed, by the same.
    var clusters: [String: String]

    public init() {
        byDestination = [:]
        clusters = [:]
    }

    init(rows: [(url: String, bucket: String, name: String, cluster: String?)]) {
        var byDestination: [String: [String]] = [:]
        var clusters: [String: String] = [:]
        for row in rows {
            byDestination["\(row.name)\n\(row.bucket)", default: []].append(row.url)
            if let cluster = row.cluster { clusters["\(row.name)\n\(row.bucket)"] = cluster }
        }
        self.byDestination = byDestination
        self.clusters = clusters
    }

    /// The bucket identity recorded for `target`, nil before a gateway showed one.
    public func bucketID(for target: S3Destination) -> String? { clusters["\(target.endpoint)\n\(target.bucket)"] }

    /// The gateways recorded under the name and bucket of `target` (none for a tus server).
    public func urls(for target: S3Destination) -> [String] {
        byDestination["\(target.endpoint)\n\(target.bucket)"] ?? []
    }
}

extension Journal {
    /// The configured destination `target` under the name the journal knows it by, with
    /// every gateway it lists recorded under that name.
    ///
    /// The name (`endpoint`, the column every upload, stream and custody generation records)
    /// is the first listed gateway that the journal already records for this bucket, by the
    /// name it records it under; else the first gateway listed. So a configuration that
    /// names a bucket's gateways in another order, or only some of them, still names the
    /// destination of its pending uploads. The gateways of `target` stay as configured; a
    /// tus server is returned as it is.
    public func nameDestination(_ target: S3Destination) async throws(JournalError) -> S3Destination {
        guard !target.isTus else { return target }
        let urls = target.gatewayURLs
        let name = try await writing { db -> String in
            var name: String?
            for url in urls {
                name = try String.fetchOne(
                    db, sql: "SELECT endpoint FROM gateway WHERE url = ? AND bucket = ?", arguments: [url, target.bucket])
                if name != nil { break }
            }
            let chosen = name ?? urls[0]
            for url in urls {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO gateway (url, bucket, endpoint) VALUES (?, ?, ?)",
                    arguments: [url, target.bucket, chosen])
            }
            return chosen
        }
        var named = target
        named.endpoint = name
        named.gateways = urls
        return named
    }

    /// Records `url` as a gateway of the journalled destination `target` (`ingest resume
    /// --endpoint`). A gateway already recorded for the bucket under another name keeps it.
    public func recordGateway(_ url: String, of target: S3Destination) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO gateway (url, bucket, endpoint) VALUES (?, ?, ?)",
                arguments: [url, target.bucket, target.endpoint])
        }
    }

    /// Whether the journal was opened for reading only (``openForReading(path:)``).
    public var isReadOnly: Bool { database.configuration.readonly }

    /// Every gateway the journal records, by destination; none in a journal opened for
    /// reading that predates them.
    public func knownGateways() async throws(JournalError) -> KnownGateways {
        try await reading { db in
            guard try db.tableExists("gateway") else { return KnownGateways() }
            let rows = try Row.fetchAll(db, sql: "SELECT url, bucket, endpoint, cluster FROM gateway ORDER BY rowid")
            return KnownGateways(rows: rows.map { (url: $0[0], bucket: $0[1], name: $0[2], cluster: $0[3]) })
        }
    }

    /// Records the bucket identity a gateway of `target` showed (the cluster's identity):
    /// from now on, a gateway of the destination that shows another is refused. An identity
    /// already recorded stays.
    public func recordBucketID(_ id: String, of target: S3Destination) async throws(JournalError) {
        try await writing { db in
            try db.execute(
                sql: "UPDATE gateway SET cluster = ? WHERE endpoint = ? AND bucket = ? AND cluster IS NULL",
                arguments: [id, target.endpoint, target.bucket])
        }
    }

    /// The gateways the journal records for `bucket`: each URL, the name of the destination
    /// it is recorded under, and the bucket id it showed (nil when none is recorded). What a
    /// run identifies its configured gateways against (``GatewayMembership``).
    public func gatewayRecords(bucket: String) async throws(JournalError) -> [GatewayRecord] {
        try await reading { db in
            guard try db.tableExists("gateway") else { return [] }
            return try Row.fetchAll(
                db, sql: "SELECT url, endpoint, cluster FROM gateway WHERE bucket = ? ORDER BY rowid", arguments: [bucket]
            ).map { GatewayRecord(url: $0[0], name: $0[1], bucketID: $0[2]) }
        }
    }

    /// Records the gateways at `urls` as gateways of `bucket` under the destination `name`,
    /// those of `shown` with the bucket id they showed (`id`): what a run found of its
    /// configured gateways (``DestinationIdentity``). A gateway already recorded keeps its
    /// name; its id is set where none was recorded.
    public func recordGateways(
        _ urls: [String], shown: Set<String>, id: String?, bucket: String, name: String
    ) async throws(JournalError) {
        try await writing { db in
            for url in urls {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO gateway (url, bucket, endpoint) VALUES (?, ?, ?)",
                    arguments: [url, bucket, name])
                if let id, shown.contains(url) {
                    try db.execute(
                        sql: "UPDATE gateway SET cluster = ? WHERE url = ? AND bucket = ? AND cluster IS NULL",
                        arguments: [id, url, bucket])
                }
            }
        }
    }
}

/// One gateway the journal records (``Journal/gatewayRecords(bucket:)``).
public struct GatewayRecord: Sendable, Equatable {
    public var url: String
    /// The destination it is recorded under (the `endpoint` column of uploads).
    public var name: String
    /// The bucket id it showed; nil before one was recorded.
    public var bucketID: String?

    public init(url: String, name: String, bucketID: String?) {
        self.url = url
        self.name = name
        self.bucketID = bucketID
    }
}
