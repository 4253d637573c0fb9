import Logging

/// What a run found of its configured destination before anything is sent: which gateways
/// belong (those showing the bucket id the journal recorded, ``GatewayMembership``), the name
/// the journal knows it by, and whether it is new to this station.
public struct DestinationIdentity: Sendable, Equatable {
    /// The destination under its journal name, its gateways those configured that are not
    /// foreign, in the configured order.
    public var target: S3Destination
    /// The bucket's id (``S3Gateways/markerKey``); nil for a tus server, or when no gateway
    /// answered and the journal records none.
    public var bucketID: String?
    /// No configured gateway, and no bucket id they show, is known to the journal: cards
    /// ingested before went elsewhere.
    public var isNew: Bool
    /// The configured gateways that show another bucket, and what they show: never written
    /// through.
    public var foreign: [(url: String, shows: MarkerSight)]
    /// Whether a gateway answered: false when the decision waits for the first requests.
    public var answered: Bool

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.target == rhs.target && lhs.target.gateways == rhs.target.gateways && lhs.bucketID == rhs.bucketID
            && lhs.isNew == rhs.isNew && lhs.foreign.map(\.url) == rhs.foreign.map(\.url)
            && lhs.foreign.map(\.shows) == rhs.foreign.map(\.shows) && lhs.answered == rhs.answered
    }
}

extension DestinationIdentity {
    /// The decision on the gateways at `urls` (``GatewayMembership``), from what they showed
    /// (`sights`, in the same order) and what the journal records of the bucket (`records`):
    /// the id recorded for a configured gateway, else for the destination a configured
    /// gateway is recorded under; and every id recorded, by destination name.
    public static func membership(of urls: [String], records: [GatewayRecord], sights: [MarkerSight]) -> GatewayMembership {
        let known = urls.compactMap { url in records.first { $0.url == url } }
        let recorded =
            known.first { $0.bucketID != nil }?.bucketID
            ?? known.lazy.compactMap { gateway in records.first { $0.name == gateway.name && $0.bucketID != nil }?.bucketID }
            .first
        var recognised: [[UInt8]: String] = [:]
        for record in records {
            if let id = record.bucketID, recognised[Array(id.utf8)] == nil { recognised[Array(id.utf8)] = record.name }
        }
        return GatewayMembership(
            recorded: recorded.map { Array($0.utf8) }, recognised: recognised, anyGatewayKnown: !known.isEmpty,
            sights: sights)
    }
}

extension UploadService {
    /// Identifies the configured destination `configured`, on every run that uploads: each
    /// configured gateway is asked alone what it shows at ``S3Gateways/markerKey``
    /// (``S3Client/sights(of:)``), and ``GatewayMembership`` decides against what the
    /// journal records. Then:
    /// - no gateway answering has the bucket: the run is refused (78), whether or not the
    ///   journal knows its cards;
    /// - gateways answered and none shows the recorded id: refused (78), naming the id and
    ///   the fix;
    /// - a gateway showing another id, none, or no bucket is foreign: told (`sink`) with
    ///   its URL and both ids, left out of the destination, never written through;
    /// - a marker is written (through the first gateway that belongs) only where none is
    ///   shown and the journal records none for the destination;
    /// - a destination new to the journal is told in one line.
    ///
    /// The gateways that belong are recorded under the destination's journal name (the name
    /// the journal records for the id, else for a configured gateway, else the first usable
    /// gateway), with the id they showed. When no gateway answers, the destination is named
    /// by its URLs and its gateways are checked by their first requests. A tus server is
    /// named as configured.
    public func identify(_ configured: S3Destination, sink: any EventSink) async throws(IngestError) -> DestinationIdentity {
        let identity = try await DestinationIdentity.identify(configured, stores: stores, journal: journal, logger: logger)
        for (url, shows) in identity.foreign {
            sink.emit(.upload(.foreignGateway(identity.target, gateway: url, shows: shows, bucketID: identity.bucketID)))
        }
        if identity.isNew { sink.emit(.upload(.newDestination(identity.target, bucketID: identity.bucketID))) }
        await destinations.note(identity)
        return identity
    }
}

extension DestinationIdentity {
    static func identify(
        _ configured: S3Destination, stores: StoreFactory, journal: Journal, logger: Logger
    ) async throws(IngestError) -> DestinationIdentity {
        if configured.isTus {
            return DestinationIdentity(target: configured, bucketID: nil, isNew: false, foreign: [], answered: false)
        }
        guard let client = try stores.store(configured) as? S3Client else {
            let named: S3Destination
            do { named = try await journal.nameDestination(configured) } catch { throw .journal(error) }
            return DestinationIdentity(target: named, bucketID: nil, isNew: false, foreign: [], answered: false)
        }
        let urls = configured.gatewayURLs
        let records: [GatewayRecord]
        do { records = try await journal.gatewayRecords(bucket: configured.bucket) } catch { throw .journal(error) }
        let known = urls.compactMap { url in records.first { $0.url == url } }
        let sights: [MarkerSight]
        do { sights = try await client.sights(of: urls) } catch {
            throw .config(file: nil, key: "s3.endpoint", problem: "\(error)")
        }
        var membership = Self.membership(of: urls, records: records, sights: sights)
        let recorded = membership.basis == .recorded ? membership.id.map { String(decoding: $0, as: UTF8.self) } : nil
        switch membership.refusal {
        case .missingBucket:
            throw .upload(.missingBucket(configured))
        case .noGatewayShows(let id):
            throw .upload(.noGatewayShows(String(decoding: id, as: UTF8.self), configured, sights: Array(zip(urls, sights))))
        case nil:
            break
        }
        var shown = Set(zip(urls, membership.verdicts).filter { $0.1 == .belongs }.map(\.0))
        if membership.needsMarker, let first = membership.verdicts.firstIndex(of: .belongs) {
            // A marker that cannot be written now is written by a later run: the gateways
            // showing none stay those of the destination, as they would without it.
            do {
                membership.markerWritten(try await client.writeMarker(through: urls[first]), through: first)
                shown = [urls[first]]
            } catch {
                logger.warning(
                    "cannot write the bucket's marker now; a later run writes it",
                    metadata: ["key": "\(S3Gateways.markerKey)", "gateway": "\(urls[first])", "error": "\(error)"])
            }
        }
        let usable = zip(urls, membership.verdicts).filter {
            if case .foreign = $0.1 { return false }
            return true
        }.map(\.0)
        let name: String =
            if case .recognised(let name) = membership.basis {
                name
            } else {
                known.first { usable.contains($0.url) }?.name ?? usable.first ?? configured.endpoint
            }
        let id = membership.id.map { String(decoding: $0, as: UTF8.self) }
        do {
            try await journal.recordGateways(usable, shown: shown, id: id, bucket: configured.bucket, name: name)
        } catch { throw .journal(error) }
        var named = configured
        named.endpoint = name
        named.gateways = usable
        if let pool = (try stores.store(named) as? S3Client)?.gateways { pool.apply(membership, to: urls) }
        return DestinationIdentity(
            target: named, bucketID: id ?? recorded, isNew: membership.isNew && membership.anyAnswered,
            foreign: zip(urls, membership.verdicts).compactMap { url, verdict in
                if case .foreign(let shows) = verdict { return (url, shows) }
                return nil
            },
            answered: membership.anyAnswered)
    }
}
