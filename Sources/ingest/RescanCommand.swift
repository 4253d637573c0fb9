import ArgumentParser
import Foundation
import IngestKit

/// `ingest rescan`: the nightly job.
struct RescanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rescan",
        abstract: "The nightly job: resume pending uploads, re-scan mounted cards and roots, clean staging, write metrics.",
        usage: "ingest rescan [--root <path>] [--metrics-file <file>] [--endpoint <url>] [--bucket <name>] [--json]",
        discussion: """
            Meant for a systemd timer or cron, unattended. In order, it:
              - resumes every pending upload, as `ingest resume` does;
              - ingests every mounted card the journal knows (by its file system UUID,
                wherever under /media, /run/media or /run/ingest it is mounted), then
                each directory of [rescan] roots and --root, one after another, like
                `ingest PATH`; a known card mounted anywhere else is only named, with
                the command that ingests it (`ingest MOUNT-POINT`);
              - lists the bucket folder of each card seen in the last [rescan]
                bucket_check_days (default 30) and compares it with the journal;
              - reads back [rescan] read_back_bytes (default "off") of the recent
                cards' verified objects, those read back longest ago first, and
                fingerprints their bytes: other bytes under a copied xxh128 label
                are found, reported with card and key, and the file is sent again
                to its alternative key;
              - aborts the multipart uploads under [s3] prefix, at the configured
                destination and every one the journal has uploads for, that the
                journal does not know and that are older than [rescan]
                orphan_upload_age (default 1d; "off" never), at most once a day:
                what a run killed between creating an upload and recording it
                leaves on the server;
              - deletes staged copies whose objects verified longer ago than
                [staging] retention, and partial or let-go copies left by killed
                runs;
              - prints a summary per card and in total (NDJSON with --json), and with
                [rescan] metrics_file or --metrics-file writes Prometheus metrics
                (after each card too, as `ingest PATH` does, and [hooks] on_card_done
                runs for each card).

            A card already ingested is only stat()ed: no file on it is read again, and \
            with nothing pending nothing is sent but the day's orphan sweep. A card another ingest is working on is \
            skipped with a notice. A root that does not exist is reported and the rest \
            goes on. Uploads go to [s3] endpoint and bucket (or --endpoint and --bucket), \
            or to a tus server ([tus] url, or --endpoint tus+https://HOST/PATH/), which \
            must be set.

            Configuration (/etc/ingest/ingest.toml):
              [rescan]
              roots = ["/srv/incoming"]
              metrics_file = "/var/lib/prometheus/node-exporter/ingest.prom"
              orphan_upload_age = "1d"
              read_back_bytes = "1GiB"

            The metrics file, for node_exporter's textfile collector, is replaced \
            atomically (mode 0644) and computed from the journal: files and bytes staged, \
            uploaded, pending and failed, pending uploads, bytes held in staging, orphan \
            uploads aborted (once a sweep has run), the last card's ingest and the cards \
            ingested, and the time of the last upload and of the last rescan that finished \
            everything (ingest_rescan_last_success_timestamp_seconds).

            Exit status: 0 when everything pending finished. Otherwise the status of the \
            first failure that concerns more than single files, in the order the work \
            ran: 76 an object missing or changed in the bucket (bucket check, read-back), \
            69 endpoint unreachable, 77 credentials refused, 73 staging area or \
            metrics file not writable (the work is done all the same), 66 a root missing, \
            74 a card failed; else 1 when files could not be read (they stay pending).

            Examples:
              ingest rescan
              ingest rescan --root /srv/incoming --metrics-file /run/ingest.prom --json
              systemctl enable --now ingest-rescan.timer
              echo '30 2 * * * root /usr/local/bin/ingest rescan' > /etc/cron.d/ingest
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var destination: DestinationOptions

    @OptionGroup var rate: UploadRateOptions
    @OptionGroup var progress: ProgressOptions

    @Option(
        name: .long,
        help: ArgumentHelp("Also ingest this directory, like [rescan] roots (repeatable).", valueName: "path"),
        completion: .directory)
    var root: [String] = []

    @OptionGroup var metrics: MetricsOptions

    func run() async throws {
        // No stop of its own yet: SIGINT or SIGTERM ends it at once, as their default would
        // (the journal is durable at every step), but as a clean stop, its run mark removed,
        // so that the next process does not report an unclean one.
        let signals = ShutdownSignals { ShutdownSignals.dieBy($0) }
        defer { withExtendedLifetime(signals) {} }
        let systemd = common.notifyReady()
        let logger = common.bootstrapLogging()
        var status: ExitStatus
        do throws(IngestError) {
            var config = try common.loadConfig()
            destination.apply(to: &config)
            try rate.apply(to: &config)
            config.rescan.roots += root.map(absolutePath)
            metrics.apply(to: &config)
            let configured = try uploadTarget(config)
            let (state, journal) = try common.openState(config)
            let (sink, reports) = common.makeReporting(progress, uploads: true, systemd: systemd)
            let uploads = try await common.makeUploadService(
                config: config, state: state, journal: journal, events: sink, wire: reports.progress.wire, logger: logger)
            reports.start()
            defer { reports.stop() }
            // The bucket is there, and its gateways are those of the journal's cluster (exit 78
            // otherwise), before anything is sent.
            let target = try await uploads.identify(configured, sink: sink).target
            let rescanner = Rescanner(
                config: config, state: state, journal: journal, logger: logger, target: target,
                policy: MountPolicy(environment: common.environment, fileSystems: config.device.fileSystems),
                uploads: uploads, makeStore: try await common.makeStores(config: config, journal: journal, logger: logger).store)
            let report = try await rescanner.run(sink: sink) { show($0, line: reports.line) }
            reports.stop()
            status = report.exitStatus
            do { try await journal.noteRescan(endedAt: Date(), exitStatus: status) } catch {
                throw .journal(error)
            }
            var written: String?
            if let path = config.rescan.metricsFile {
                do throws(IngestError) {
                    let totals: JournalTotals
                    do { totals = try await journal.totals() } catch {
                        throw .journal(error)
                    }
                    try PrometheusText.write(PrometheusText.render(IngestMetrics.families(totals)), to: path)
                    written = path
                } catch {
                    _ = fail(error, json: common.json)
                    if status == .success || status == .partial { status = error.exitStatus }
                }
            }
            show(.finished(report, exitStatus: status, metricsFile: written), line: nil)
        } catch {
            throw fail(error, json: common.json)
        }
        if status != .success { throw ExitCode(status.rawValue) }
    }

    /// Writes a step's event; its lines clear the progress `line` first, when one is drawn.
    private func show(_ event: RescanEvent, line progressLine: ProgressLine?) {
        if common.json {
            ReportOutput.standardOutput.write(JSONValue.line(event.json) + "\n")
        } else {
            // The event's own lines, each made printable.
            for line in event.text.split(separator: "\n", omittingEmptySubsequences: false) {
                if let progressLine { progressLine.print(String(line)) } else { ReportOutput.standardError.line(String(line)) }
            }
        }
    }

    /// Where the cards' uploads go; rescan has no stage-only mode, so the hint is its own.
    private func uploadTarget(_ config: Config) throws(IngestError) -> S3Destination {
        // A tus endpoint takes no bucket: target() says what is wrong with one.
        let bucketSettled = config.s3.isTus || !(config.s3.bucket ?? "").isEmpty
        guard let endpoint = config.s3.endpoint, !endpoint.isEmpty, bucketSettled else {
            throw .config(
                file: config.source, key: config.s3.endpoint?.isEmpty ?? true ? "s3.endpoint" : "s3.bucket",
                problem: "ingest rescan uploads what it finds: set [s3] endpoint and bucket in the configuration "
                    + "(or INGEST_ENDPOINT and INGEST_BUCKET, or --endpoint and --bucket), or [tus] url for a tus server")
        }
        return try config.s3.target()
    }
}
