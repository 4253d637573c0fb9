import ArgumentParser
import IngestKit

/// `ingest PATH`: scan, copy into staging, journal, upload.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Ingest a card or directory: copy new files into staging and upload them (the default command).",
        discussion: """
            PATH is a card's mount point or any directory. Or give the card's block device with \
            --device (what the udev rule's ingest@.service runs): ingest reads the device's udev \
            identity (file system UUID and label, serial, vendor, model, bus) for the objects' \
            labels; if the file system is not mounted, mounts it read-only (ro,nosuid,nodev,noexec; \
            a clean ext3/ext4 journal is not even loaded) under $RUNTIME_DIRECTORY or \
            /run/ingest/cards, ingests it and unmounts it, also on errors and on SIGTERM; a mount \
            that was there (under /media or /run/media) is used and left alone. Without \
            CAP_SYS_ADMIN (as in ingest@.service) it never mounts or unmounts: it ingests the card \
            where `ingest mount-card` mounted it and leaves it to `ingest unmount-card`. A device \
            mounted at a system place (/, /boot, /home…) or holding no file system is refused. A \
            card another ingest is already ingesting is left to it: a notice, and exit status 0. \
            A card pulled out mid-copy ends its staging cleanly (exit 74): files not yet copied \
            stay pending, and the staged ones still upload before ingest exits.

            Files already ingested (same path, \
            size and modification time) are not read again. Each file is copied into staging \
            and fingerprinted (XXH3-128) in one read, journalled, and uploaded while the rest \
            of the card is still being copied. An upload is verified (size, fingerprint, and \
            the server's digest of the parts) before the file counts as uploaded; a content \
            already in the bucket is not sent again.

            Files that fail stay pending and are retried on the next run; uploads that fail \
            resume from their last acknowledged part (`ingest resume`). Special files, links \
            and operating-system litter are reported and skipped. Empty files are ingested \
            like any other.

            Object keys follow [s3] key_template (default {device}/{card_date}/{label}-{card_id}/{path}); \
            no object is ever replaced: a key that holds other bytes sends the file to \
            NAME~<xxh128>.EXT. \
            Every object carries its labels as metadata (x-amz-meta-*): the fingerprint \
            (xxh128), original name and path, the device id and tags, the card's identity, \
            the scene and its tags; [s3] object_tags picks those also set as object tags. A \
            card may name its scene in ingest-scene.toml at its root: a regular file (no \
            link, FIFO or device) of at most 64 KiB of UTF-8, which may not set device, the \
            card's identity or reserved labels. Only [device] id sets the label device: \
            --tag and the configuration's tags tables may not. A key given two different \
            values, a label value with a control character, or labels every object shares \
            taking more than 1536 bytes of S3's 2 KiB of metadata (512 stay for each file's \
            own fingerprint, name and path) is an error (65): before anything is staged when \
            the configuration or the command line is at fault, before anything of the card \
            is uploaded when its scene file is.

            Credentials are read as the AWS tools read them: AWS_ACCESS_KEY_ID, \
            AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, the shared credentials and \
            config files, credential_process.

            SIGTERM or SIGINT stops the run cleanly: copying stops, the upload parts on the \
            wire end and are journalled, a card mounted here is unmounted, and ingest then dies \
            by that signal; a second one ends it at once. Everything left is pending.

            When the card's ingest has ended (here, and for each card of watch and rescan): \
            with --metrics-file or [rescan] metrics_file, the Prometheus metrics file is \
            rewritten from the journal; with [hooks] on_card_done in the configuration, that \
            program reads the card's summary (identity, files, bytes, objects, pending, \
            failed, quarantined, seconds, exit_status) as one JSON object on its standard \
            input, and is killed with all it started after [hooks] timeout (default 30s). \
            Neither changes the exit status; a failure is logged. See ingest.toml(5).

            Examples:
              ingest /media/sd --endpoint http://127.0.0.1:8333 --bucket cards
              ingest --device /dev/sdb1 --endpoint http://127.0.0.1:8333 --bucket cards
              ingest --device /dev/mmcblk0p1 --no-upload
              ingest /media/sd --scene flood-survey --tag site=km12 --json
              ingest /media/sd --no-upload --verify
              ingest /media/sd --max-rate 2MiB/s
              ingest /media/sd --exclude '*.THM' --exclude MISC
              ingest /media/sd --metrics-file /var/lib/prometheus/node-exporter/ingest.prom
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var destination: DestinationOptions

    @OptionGroup var rate: UploadRateOptions
    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("The card's mount point, or any directory.", valueName: "path"), completion: .directory)
    var path: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The card's block device, like /dev/sdb1, instead of a path: mounted read-only if it is not mounted.",
            valueName: "node"),
        completion: .file())
    var device: String?

    @Flag(name: .long, help: "Stage only; do not upload (the staged files upload on a later run).")
    var noUpload = false

    @Option(name: .long, help: ArgumentHelp("The scene of this run, a tag on every object (a card naming another scene in ingest-scene.toml is a conflict).", valueName: "name"))
    var scene: String?

    @Option(name: .long, help: ArgumentHelp("A tag for every object of this run, key=value (repeatable; not device, which [device] id sets).", valueName: "key=value"))
    var tag: [String] = []

    @Flag(name: .long, help: "Read each staged copy back from disk and compare fingerprints.")
    var verify = false

    @Flag(name: .long, help: "Like --verify, and read the source on the card back too.")
    var verifySource = false

    @Option(name: .long, help: ArgumentHelp("Only ingest files matching this pattern (repeatable).", valueName: "glob"))
    var include: [String] = []

    @Option(name: .long, help: ArgumentHelp("Never ingest files or directories matching this pattern (repeatable).", valueName: "glob"))
    var exclude: [String] = []

    @Option(name: .long, help: ArgumentHelp("Free space to keep on the staging disk, like 2GiB (default 1GiB).", valueName: "size"))
    var reserve: String?

    func validate() throws {
        switch (path, device) {
        case (nil, nil): throw ValidationError("Give the card's mount point (PATH) or its block device (--device /dev/sdb1).")
        case (.some, .some): throw ValidationError("Give either PATH or --device, not both.")
        default: break
        }
    }

    func run() async throws {
        let systemd = common.notifyReady()
        let logger = common.bootstrapLogging()
        let stop = IngestStop()
        let signals = ShutdownSignals { signal in stop.shutdown(by: signal) }
        let summary: RunSummary
        do throws(IngestError) {
            var config = try common.loadConfig()
            try apply(to: &config)
            let configured = noUpload ? nil : try config.s3.target(alternative: "use --no-upload to stage only")
            let tags = try parsedTags()
            let (state, journal) = try common.openState(config)
            let (sink, reports) = common.makeReporting(progress, uploads: configured != nil, systemd: systemd)
            var upload: UploadRequest?
            if let configured {
                let service = try await common.makeUploadService(
                    config: config, state: state, journal: journal, events: sink, wire: reports.progress.wire, logger: logger)
                // Every run: the bucket is there, and its gateways are those of the journal's
                // cluster (exit 78 otherwise), before a card is read. The card's progress
                // starts after it, with the card's own clock.
                let identity = try await service.identify(configured, sink: sink)
                upload = UploadRequest(target: identity.target, service: service, scene: scene, tags: tags)
            }
            reports.start()
            defer { reports.stop() }
            let ingestor = Ingestor(config: config, state: state, journal: journal, logger: logger, upload: upload)
            if let device {
                let policy = MountPolicy(environment: common.environment, fileSystems: config.device.fileSystems)
                do {
                    summary = try await DeviceIngest(state: state, policy: policy, logger: logger)
                        .run(device: device, ingestor: ingestor, sink: sink, stop: stop).get()
                } catch {
                    switch error {
                    case .deviceBusy, .volumeBusy: return notice(error, code: "busy", json: common.json)
                    default: throw error
                    }
                }
            } else {
                summary = try await ingestor.ingest(path: path ?? ".", sink: sink, stop: stop).get()
            }
        } catch {
            if let signal = signals.signal { stopped(by: signal) }
            throw fail(error, json: common.json)
        }
        if let signal = signals.signal { stopped(by: signal, summary: summary) }
        if let problem = summary.uploadError {
            // Files that failed are listed as they fail; the upload problem decides the status.
            ReportOutput.standardError.line("ingest: error: \(problem)")
        }
        if summary.exitStatus != .success { throw ExitCode(summary.exitStatus.rawValue) }
    }

    /// After a clean stop on SIGTERM or SIGINT: what is pending (from the run's `summary`,
    /// when it ended with one), then the death the signal asked for.
    private func stopped(by signal: Int32, summary: RunSummary? = nil) -> Never {
        var pending: [String] = []
        if let summary {
            let notCopied = max(summary.scan.toStage - summary.staged - summary.failed, 0)
            if notCopied > 0 { pending.append("\(counted(notCopied, "file")) not copied, found again on the next run of the card") }
            if let interrupted = summary.uploads?.interrupted, interrupted > 0 {
                pending.append("\(counted(interrupted, "upload")) pending, their acknowledged parts kept: `ingest resume` sends the rest")
            }
        } else {
            pending.append("what was not copied is found again on the next run; pending uploads resume with `ingest resume`")
        }
        ReportOutput.standardError.line(
            "ingest: stopped by \(System.signalName(signal)) (exit status \(128 + signal)); "
                + (pending.isEmpty ? "nothing is pending" : pending.joined(separator: "; ")))
        ShutdownSignals.dieBy(signal)
    }

    /// Flags override the configuration file and environment.
    /// `--tag key=value`, each key once.
    private func parsedTags() throws(IngestError) -> [String: String] {
        var tags: [String: String] = [:]
        for text in tag {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw .runLabels("--tag '\(text)' is not key=value, like --tag site=km12.")
            }
            let key = String(text[..<equals])
            let value = String(text[text.index(after: equals)...])
            if let earlier = tags[key], earlier != value {
                throw .runLabels("--tag gives '\(key)' two values, '\(earlier)' and '\(value)'; give each key once.")
            }
            tags[key] = value
        }
        return tags
    }

    private func apply(to config: inout Config) throws(IngestError) {
        destination.apply(to: &config)
        try rate.apply(to: &config)
        metrics.apply(to: &config)
        if verifySource {
            config.staging.verify = .both
        } else if verify {
            config.staging.verify = .staged
        }
        if let reserve {
            config.staging.reserve = try Config.parseSize(reserve, key: "--reserve", file: nil)
        }
        do {
            config.scan.include += try include.map { pattern throws(GlobError) in try Glob(pattern) }
            config.scan.exclude += try exclude.map { pattern throws(GlobError) in try Glob(pattern) }
        } catch {
            throw .config(file: nil, key: "--include/--exclude", problem: error.description)
        }
    }
}
