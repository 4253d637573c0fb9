extension UploadError {
    /// Sorts a failed S3 request: `what` names the request and the object in the message.
    public init(_ error: S3ClientError, what: String, target: S3Destination) {
        let place = target.displayName
        switch error {
        case .credentials(let problem):
            // A credentials file that is no file to read (a FIFO, a device) is the station's
            // configuration, wrong: 78, as for the configuration file itself.
            let status: ExitStatus = if case .refusedFile = problem { .config } else { .noPermission }
            self.init(exitStatus: status, scope: .destination, message: "\(what): \(problem)")
        case .transport(let problem, _) where problem.kind == .cut:
            // Not the destination's failure: every upload is stopping.
            self.init(exitStatus: .unavailable, scope: .object, message: "\(what): \(problem)")
        case let .transport(problem, attempts):
            if case .plainHTTP = problem.kind {
                // Not the network: the endpoint's scheme is wrong, and every run fails the same way.
                self.init(
                    exitStatus: .config, scope: .destination,
                    message: "\(what): \(problem). Set it with --endpoint, INGEST_ENDPOINT or [s3] endpoint; "
                        + "staged files upload on the next run (ingest resume).")
                return
            }
            self.init(
                exitStatus: .unavailable, scope: .destination,
                message: "\(what): cannot reach \(target.endpoint): \(problem)"
                    + (attempts > 1 ? " (after \(attempts) attempts)" : "")
                    + ". Check the network and the endpoint URL; staged files upload on the next run (ingest resume).")
        case let .server(s3, attempts):
            let tried = attempts > 1 ? " (after \(attempts) attempts)" : ""
            switch s3.code {
            case _ where s3.code == nil && s3.status == 403,  // a HEAD's refusal has no body
                .invalidAccessKeyId?, .signatureDoesNotMatch?, .accessDenied?, .expiredToken?,
                .authorizationHeaderMalformed?:
                self.init(
                    exitStatus: .noPermission, scope: .destination,
                    message: "\(what): \(place) refused the credentials: \(s3)\(tried)")
            case .noSuchBucket?:
                self.init(
                    exitStatus: .config, scope: .destination,
                    message: "\(what): \(place) does not exist: \(s3.statement)\(tried). Create the bucket, or correct "
                        + "--bucket (INGEST_BUCKET, [s3] bucket) and check that the endpoint URL is the right server; "
                        + "nothing was uploaded there.")
            case _ where s3.status >= 500 || s3.code?.isThrottling == true:
                self.init(
                    exitStatus: .unavailable, scope: .destination,
                    message: "\(what): \(place) keeps failing: \(s3)\(tried). Staged files upload on the next run.")
            default:
                self.init(exitStatus: .partial, scope: .object, message: "\(what): \(s3)\(tried)")
            }
        case .uploadGone(let s3):
            self.init(exitStatus: .partial, scope: .object, message: "\(what): \(s3)")
        case .foreignBucket:
            // The configuration names gateways of two clusters: every run fails the same way.
            self.init(exitStatus: .config, scope: .destination, message: "\(what): \(error)")
        case .request, .unexpectedAnswer:
            self.init(exitStatus: .partial, scope: .object, message: "\(what): \(error)")
        }
    }

    /// The bucket does not exist (asked before uploading: some servers create it instead).
    static func missingBucket(_ target: S3Destination) -> UploadError {
        UploadError(
            exitStatus: .config, scope: .destination,
            message: "the bucket \(target.bucket) does not exist at \(target.gatewayURLs.joined(separator: ", ")) "
                + "(404 NoSuchBucket). Create it, or correct --bucket (INGEST_BUCKET, [s3] bucket); nothing was sent to it.")
    }

    /// Gateways answered, and none shows the bucket id the journal recorded for the
    /// destination (``GatewayMembership/Refusal/noGatewayShows(_:)``): they lead to another
    /// bucket, and nothing is sent through them.
    static func noGatewayShows(_ id: String, _ target: S3Destination, sights: [(String, MarkerSight)]) -> UploadError {
        let shown = sights.map { "\($0.0) shows \($0.1.description)" }.joined(separator: "; ")
        return UploadError(
            exitStatus: .config, scope: .destination,
            message: "none of the configured gateways of \(target.bucket) shows the bucket id \(id) the journal "
                + "recorded for this destination (\(S3Gateways.markerKey)): \(shown). Nothing was sent. Point [s3] "
                + "endpoint (--endpoint, INGEST_ENDPOINT) at a gateway of the cluster whose bucket shows \(id); if "
                + "that bucket is gone for good and this one replaces it, put \(id) in its \(S3Gateways.markerKey) "
                + "(aws s3 cp), or use another state directory")
    }

    /// The journal could not record (or read) what happened: nothing more is sent, since
    /// the next step would depend on a record that is not there.
    static func journal(_ error: JournalError) -> UploadError {
        UploadError(
            exitStatus: .cantCreate, scope: .destination,
            message: "\(error). Uploads stop here and resume from the journal on the next run; "
                + "check the state directory's disk.")
    }
}
