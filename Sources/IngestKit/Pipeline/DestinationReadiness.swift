import Foundation

/// The checks of `ingest check` that talk to the destination, with the requests a run makes
/// and the same kind of store: the credentials (a `credential_process` is run), that the
/// destination is there (`HeadBucket`), a conditional write on the probe key, the checksums
/// and tags the server keeps (``features(_:)``), and the server's clock from the `Date` of
/// its answer.
struct DestinationReadiness {
    let target: S3Destination
    /// The credentials the stores of `stores` sign with, asked for first.
    let credentials: CredentialsProvider
    let stores: StoreFactory
    /// Where the conditional write goes: the uploader's own probe key, under the prefix.
    let probeKey: String
    /// For a tus destination, where its request headers come from (`[tus] headers_file`,
    /// already read when `stores` was made), for the credentials check.
    var tusHeaders = "no extra headers"
    /// What the journal records of the bucket's gateways (``Journal/gatewayRecords(bucket:)``):
    /// the bucket id its gateways must show.
    var records: [GatewayRecord] = []

    /// How far the clocks may be apart before S3 refuses a signed request
    /// (`RequestTimeTooSkewed`).
    static let signatureTolerance: Duration = .seconds(15 * 60)
    /// A clock this far off works, but is not kept by NTP: dates in keys and the journal drift.
    static let clockWarning: Duration = .seconds(60)

    /// Credentials, bucket, conditional write, checksums, tagging and clock, in that order.
    func run() async -> [ReadinessCheck] {
        if target.isTus { return await tusServer() }
        let resolved: ResolvedCredentials
        do { resolved = try await credentials.credentials() } catch {
            return [
                .failed(
                    .credentials, error.description,
                    remedy: "a service reads /etc/ingest/credentials (AWS_SHARED_CREDENTIALS_FILE) or "
                        + "/etc/ingest/environment; by hand, the variables and ~/.aws as the AWS CLI does",
                    status: .noPermission),
                .skipped(.bucket, because: "needs credentials"),
                .skipped(.conditionalWrite, because: "needs credentials"),
                .skipped(.checksums, because: "needs credentials"),
                .skipped(.tagging, because: "needs credentials"),
                .skipped(.clock, because: "needs an answer from the server"),
            ]
        }
        var found = "access key \(resolved.accessKeyID) from \(resolved.source)"
        if let expiration = resolved.expiration { found += ", expiring \(expiration.formatted(.iso8601))" }

        let client: any ObjectStore
        do { client = try stores.store(target) } catch {
            return [
                .passed(.credentials, found),
                .failed(
                    .bucket, "\(error)", remedy: "correct --endpoint (INGEST_ENDPOINT, [s3] endpoint)", status: .config),
                .skipped(.conditionalWrite, because: "needs the bucket"),
                .skipped(.checksums, because: "needs the bucket"),
                .skipped(.tagging, because: "needs the bucket"),
                .skipped(.clock, because: "needs an answer from the server"),
            ]
        }
        // What each gateway shows, decided against the journal before any request: the
        // requests below (the conditional write among them) go only through gateways that
        // belong to the destination.
        var membership: GatewayMembership?
        var sights: [MarkerSight] = []
        if let s3 = client as? S3Client {
            do { sights = try await s3.sights(of: target.gatewayURLs) } catch {
                return [
                    .passed(.credentials, found),
                    .failed(.bucket, "\(error)", remedy: "correct --endpoint (INGEST_ENDPOINT, [s3] endpoint)", status: .config),
                    .skipped(.conditionalWrite, because: "needs the bucket"),
                    .skipped(.checksums, because: "needs the bucket"),
                    .skipped(.tagging, because: "needs the bucket"),
                    .skipped(.clock, because: "needs an answer from the server"),
                ]
            }
            let decided = DestinationIdentity.membership(of: target.gatewayURLs, records: records, sights: sights)
            // A bucket missing everywhere is the bucket check's to say (HeadBucket: 404).
            if decided.refusal != .missingBucket {
                s3.gateways.apply(decided, to: target.gatewayURLs)
                membership = decided
            }
        }
        let gatewayLines = membership.map { gateways($0, sights: sights) } ?? []
        let head: BucketHead
        do { head = try await client.headBucket() } catch {
            let refused = UploadError(error, what: "HeadBucket", target: target).exitStatus == .noPermission
            return [
                refused
                    ? .failed(
                        .credentials, "\(found), refused by \(target.endpoint): \(error)",
                        remedy: "check the access key and its secret, and that they may use the bucket \(target.bucket)",
                        status: .noPermission)
                    : .passed(.credentials, found),
                refused ? .skipped(.bucket, because: "needs credentials the server accepts") : bucketFailure(error),
                .skipped(.conditionalWrite, because: "needs the bucket"),
                .skipped(.checksums, because: "needs the bucket"),
                .skipped(.tagging, because: "needs the bucket"),
                .skipped(.clock, because: "needs an answer from the server"),
            ] + gatewayLines
        }
        guard head.exists else {
            return [
                .passed(.credentials, found),
                .failed(
                    .bucket, "\(target.bucket) does not exist at \(target.endpoint) (HeadBucket: 404)",
                    remedy: "create it, or correct --bucket (INGEST_BUCKET, [s3] bucket); ingest never creates it",
                    status: .config),
                .skipped(.conditionalWrite, because: "needs the bucket"),
                .skipped(.checksums, because: "needs the bucket"),
                .skipped(.tagging, because: "needs the bucket"),
                clock(head),
            ]
        }
        var exists = "\(target.bucket) exists at \(s3Gateway(client) ?? target.endpoint)"
        if let membership, membership.isNew {
            exists += "; a new destination: no card ingested with this state directory went there"
        }
        let features: [ReadinessCheck] =
            if let s3 = client as? S3Client { await self.features(s3) } else {
                [.checksums, .tagging].map { .skipped($0, because: "not an S3 server") }
            }
        return [
            .passed(.credentials, found + ", accepted"),
            .passed(.bucket, exists),
            await conditionalWrite(client),
        ] + features + [clock(head)] + gatewayLines
    }

    /// The gateway requests go through now, for an S3 store.
    private func s3Gateway(_ client: any ObjectStore) -> String? { (client as? S3Client)?.gateways.pick()?.url }

    /// One line per gateway, with several gateways or one that is foreign: whether it
    /// answers, and whether it shows the bucket id that decides (``GatewayMembership``: the
    /// one the journal recorded, else the one its gateways show). A gateway showing another,
    /// none while there is one, or no bucket fails the check; one that does not answer is a
    /// warning while another belongs (requests go through the others).
    private func gateways(_ membership: GatewayMembership, sights: [MarkerSight]) -> [ReadinessCheck] {
        let urls = target.gatewayURLs
        let foreign = membership.verdicts.contains {
            if case .foreign = $0 { return true }
            return false
        }
        guard urls.count > 1 || foreign else { return [] }
        let id = membership.id.map { String(decoding: $0, as: UTF8.self) }
        let source =
            switch membership.basis {
            case .recorded: "the id the journal recorded for this destination"
            case .recognised(let name): "the id the journal recorded for \(name)"
            case .known, .new: "the id its other gateways show"
            }
        let remedy =
            "remove it from [s3] endpoint (--endpoint, INGEST_ENDPOINT), or point it at the cluster whose "
            + "\(S3Gateways.markerKey) is \(id ?? "the destination's")"
        let belongs = membership.verdicts.contains(.belongs)
        var lines: [ReadinessCheck] = []
        var dead: [ReadinessCheck] = []
        for (url, (verdict, sight)) in zip(urls, zip(membership.verdicts, sights)) {
            switch verdict {
            case .belongs:
                lines.append(.passed(
                    .gateway,
                    "\(url) answers; \(target.bucket) there has the bucket id "
                        + (id ?? "none yet (the first run writes one)")))
            case .foreign(.noBucket):
                lines.append(.failed(
                    .gateway, "\(url): \(target.bucket) does not exist there (404 NoSuchBucket): another cluster?",
                    remedy: remedy, status: .config))
            case .foreign(let shown):
                lines.append(.failed(
                    .gateway,
                    "\(url) shows another bucket (another cluster?): \(shown.description), not \(id ?? "none") "
                        + "(\(source)); runs never write through it",
                    remedy: remedy, status: .config))
            case .unchecked:
                let reason = if case .noAnswer(let reason) = sight { reason } else { sight.description }
                let detail = "\(url) does not answer: \(reason)"
                let fix = "check that gateway and the network to it"
                dead.append(
                    belongs
                        ? .warned(.gateway, detail + "; requests go through the others", remedy: fix)
                        : .failed(.gateway, detail, remedy: fix, status: .unavailable))
            }
        }
        return lines + dead
    }

    /// A tus server signs nothing and has no bucket: its credentials are the headers sent
    /// with every request, and the destination is there when it answers `OPTIONS` as a tus
    /// 1.0 server that creates uploads. It never writes over an upload (each creation is a
    /// new one), and no signature depends on the clocks.
    private func tusServer() async -> [ReadinessCheck] {
        let notSigned: [ReadinessCheck] = [
            .skipped(.conditionalWrite, because: "a tus server never writes over an upload: each is created anew"),
            .skipped(.checksums, because: "a tus upload is proven by its offset and length, and the staged copy's fingerprint"),
            .skipped(.tagging, because: "a tus server keeps no tags: files are sent from their staged copies"),
            .skipped(.clock, because: "tus requests are not signed"),
        ]
        let client: any ObjectStore
        do { client = try stores.store(target) } catch {
            return [
                .passed(.credentials, tusHeaders),
                .failed(.bucket, "\(error)", remedy: "correct --endpoint (INGEST_ENDPOINT, [tus] url)", status: .config),
            ] + notSigned
        }
        do { _ = try await client.headBucket() } catch {
            let status = UploadError(error, what: "OPTIONS", target: target).exitStatus
            if status == .noPermission {
                return [
                    .failed(
                        .credentials, "\(tusHeaders), refused by \(target.displayName): \(error)",
                        remedy: "check the token in [tus] headers_file", status: .noPermission),
                    .skipped(.bucket, because: "needs headers the server accepts"),
                ] + notSigned
            }
            return [
                .passed(.credentials, tusHeaders),
                .failed(
                    .bucket, "OPTIONS \(target.displayName): \(error)",
                    remedy: "check the network, the creation URL ([tus] url, --endpoint tus+https://HOST/PATH/) and that "
                        + "the server runs",
                    status: status),
            ] + notSigned
        }
        return [
            .passed(.credentials, tusHeaders + ", accepted"),
            .passed(.bucket, "\(target.displayName) answers as a tus 1.0 server that creates uploads"),
        ] + notSigned
    }

    /// HeadBucket failed otherwise than by refusing the credentials.
    private func bucketFailure(_ error: S3ClientError) -> ReadinessCheck {
        let status = UploadError(error, what: "HeadBucket", target: target).exitStatus
        if case .transport(let problem, _) = error, case .plainHTTP(let server) = problem.kind {
            return .failed(
                .bucket, "HeadBucket \(target.displayName): \(error)",
                remedy: "set the endpoint to http://\(server) (--endpoint, INGEST_ENDPOINT, [s3] endpoint)",
                status: status)
        }
        let remedy =
            switch status {
            case .unavailable:
                "check the network, the endpoint URL (--endpoint, INGEST_ENDPOINT, [s3] endpoint) and that the server runs"
            case .config: "create the bucket, or correct --bucket (INGEST_BUCKET, [s3] bucket)"
            default: "see the server's answer; its log may say more"
            }
        return .failed(.bucket, "HeadBucket \(target.displayName): \(error)", remedy: remedy, status: status)
    }

    /// The write every upload makes: `PutObject` with `If-None-Match: *`, which must be
    /// refused (`412`) where an object is; then the probe object is deleted.
    private func conditionalWrite(_ client: any ObjectStore) async -> ReadinessCheck {
        let trial = await client.tryConditionalWrite(key: probeKey)
        switch trial.answer {
        case .failed(let error):
            let status = UploadError(error, what: "PutObject", target: target).exitStatus
            return .failed(
                .conditionalWrite, "PutObject of \(probeKey) failed: \(error)",
                remedy: status == .noPermission
                    ? "let these credentials write (s3:PutObject) under the prefix ([s3] prefix)"
                    : "see the server's answer; its log may say more",
                status: status)
        case .ignored:
            return .warned(
                .conditionalWrite,
                "the server wrote over \(probeKey) despite If-None-Match: *; ingest then looks (HEAD) before each "
                    + "write, which a second station writing the same key at the same moment can outrun",
                remedy: "use a server version that honours conditional writes (If-None-Match: *)")
        case .honoured:
            if let error = trial.leftInPlace {
                return .warned(
                    .conditionalWrite,
                    "PutObject with If-None-Match: * honoured, but the probe object \(probeKey) could not be "
                        + "deleted: \(error)",
                    remedy: "nothing needed (it is empty, and runs leave it too); to remove it, allow "
                        + "s3:DeleteObject on \(probeKey) or delete it by hand")
            }
            return .passed(
                .conditionalWrite, "PutObject with If-None-Match: * refused to replace \(probeKey) (412); removed it")
        }
    }

    /// The server's clock against ours, from HeadBucket's `Date`.
    private func clock(_ head: BucketHead) -> ReadinessCheck {
        guard let offset = head.clockOffset else {
            return .skipped(.clock, because: "the server's answer had no Date header")
        }
        let size = offset < .zero ? .zero - offset : offset
        let found =
            size < .seconds(1)
            ? "within a second of the server's"
            : "\(Self.describe(size)) \(offset > .zero ? "behind" : "ahead of") the server's (its Date header)"
        let remedy = "set the time and keep it: enable NTP (timedatectl set-ntp true, or install chrony)"
        if size >= Self.signatureTolerance {
            return .failed(
                .clock,
                "this station's clock is \(found): beyond the 15 minutes S3 allows a signed request, so every "
                    + "first request is refused (RequestTimeTooSkewed), and the dates of keys and the journal are wrong",
                remedy: remedy, status: .noPermission)
        }
        if size >= Self.clockWarning {
            return .warned(
                .clock, "this station's clock is \(found): the dates of keys and the journal follow it", remedy: remedy)
        }
        return .passed(.clock, "this station's clock is \(found)")
    }

    /// "20 min 3 s", "45 s", "2 h 5 min".
    static func describe(_ duration: Duration) -> String {
        let seconds = Int(duration.inSeconds.rounded())
        if seconds >= 3600 { return "\(seconds / 3600) h \(seconds % 3600 / 60) min" }
        if seconds >= 60 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds) s"
    }
}
