import ArgumentParser
import Foundation
import IngestKit

/// `ingest watch`: a daemon on udev's events, for hosts without systemd.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Ingest every card inserted, as a daemon on udev's events (for hosts without systemd).",
        discussion: """
            Listens to udev (it needs root and a running udevd) and ingests each card: first \
            the cards present at start, then each one inserted. A card is a block device with a \
            file system (ID_FS_USAGE=filesystem) in a USB reader (ID_BUS=usb) or an SD slot \
            (mmcblk* whose mmc parent's type is SD), as the shipped udev rule says. Each card \
            goes the way of `ingest --device`: mounted read-only if nothing mounted it, \
            ingested, uploaded to the configured bucket, unmounted. A device mounted at a system \
            place (a Raspberry Pi's root on mmcblk0p2) is refused with a line in the log.

            At most --max-cards cards ([watch] max_cards, default 2) are ingested at once; the \
            others wait their turn. A card already being ingested is not started twice, by this \
            daemon or by another ingest process. A card removed mid-run stops being read: the \
            files not yet copied are pending until it comes back, and the files already staged \
            finish uploading.

            SIGTERM or SIGINT stops the daemon cleanly: no new card is taken, copying stops, the \
            upload parts on the wire end and are journalled, the cards mounted here are \
            unmounted, and it exits 0. What is left resumes on the next insertion, with \
            `ingest resume`, or with the nightly `ingest rescan`.

            Each card ends with one line on standard error (journald or syslog keeps it): its \
            kernel name, device, label and UUID, the files staged, uploaded and failed, bytes, \
            time, and the outcome (done, partial, removed, stopped, busy, refused, failed). With \
            --json, standard output carries each card's events, every one with the card's kernel \
            name in "card", and a "card" event at its end. After each card, as after \
            `ingest PATH`, the metrics file (--metrics-file, [rescan] metrics_file) is rewritten \
            and the [hooks] on_card_done program is run with the card's summary on its input.

            Examples:
              ingest watch --endpoint https://s3.example.net --bucket field-cards
              ingest watch --max-cards 1 --json >> /var/log/ingest-watch.ndjson
              nohup ingest watch 2>>/var/log/ingest-watch.log &
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var destination: DestinationOptions

    @OptionGroup var rate: UploadRateOptions
    @OptionGroup var metrics: MetricsOptions

    @Option(
        name: .long,
        help: ArgumentHelp("Cards ingested at once; more wait their turn ([watch] max_cards; default 2).", valueName: "n"))
    var maxCards: Int?

    func validate() throws {
        if let maxCards, !WatchSettings.maxCardsRange.contains(maxCards) {
            throw ValidationError(
                "--max-cards \(maxCards) is outside \(WatchSettings.maxCardsRange.lowerBound)…\(WatchSettings.maxCardsRange.upperBound).")
        }
    }

    func run() async throws {
        let logger = common.bootstrapLogging()
        let json = common.json
        do throws(IngestError) {
            var config = try common.loadConfig()
            destination.apply(to: &config)
            try rate.apply(to: &config)
            metrics.apply(to: &config)
            if let maxCards { config.watch.maxCards = maxCards }
            let configured = try config.s3.target()
            let (state, journal) = try common.openState(config)
            // Shared by every card: one connection pool, one set of credentials, one bound on
            // what is on the wire.
            let uploads = try await common.makeUploadService(
                config: config, state: state, journal: journal, events: DiscardingSink(), logger: logger)
            let identity = try await uploads.identify(configured, sink: common.makeReporter())
            let target = identity.target
            let devices = DeviceIngest(state: state, policy: MountPolicy(environment: common.environment, fileSystems: config.device.fileSystems), logger: logger)
            let settings = config

            let ingestCard: CardWatcher.IngestCard = { device, stop in
                let started = Date()
                let sink: any EventSink = json ? CardJSONReporter(card: device.kernelName) : DiscardingSink()
                let ingestor = Ingestor(
                    config: settings, state: state, journal: journal, logger: logger,
                    upload: UploadRequest(target: target, service: uploads, scene: nil, tags: [:]))
                let outcome = await devices.run(
                    device: device.node ?? "/dev/\(device.kernelName)", ingestor: ingestor, sink: sink, stop: stop)
                return CardReport.make(device: device, outcome: outcome, stop: stop, seconds: Date().timeIntervalSince(started))
            }
            let watcher = CardWatcher(maxCards: config.watch.maxCards, logger: logger, ingest: ingestCard) { report in
                if json { ReportOutput.standardOutput.write(JSONValue.line(report.json) + "\n") }
                ReportOutput.standardError.line("ingest: \(report.line)")
            }
            let signals = ShutdownSignals { _ in Task { await watcher.shutdown() } }
            ReportOutput.standardError.line("ingest: watching for cards (at most \(config.watch.maxCards) at once), uploading to \(target.displayName)")
            try await watcher.run()
            ReportOutput.standardError.line(
                "ingest: stopped\(signals.signal.map { " on signal \($0)" } ?? ""); what is left is pending")
        } catch {
            throw fail(error, json: json)
        }
    }
}
