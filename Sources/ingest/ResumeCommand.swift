import ArgumentParser
import IngestKit
import Logging

/// `ingest resume [ID…]`: finish what earlier runs left unfinished.
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Finish pending uploads (all of them, or those named), from their last acknowledged part.",
        discussion: """
            Each upload goes back to the bucket it was started for, as the journal recorded \
            it: no card and no configuration of the destination is needed. The staged copy is \
            checked against its fingerprint first; the server's parts are compared with the \
            journal's (ListParts) and only the missing ones are sent. An upload the server \
            completed before a crash is recognised and not sent again. The parts of a large \
            file sent while it was copied, by a run killed or cut off before it ended, become \
            that file's upload first, if the file was staged. After an unclean stop, one line \
            says what was recovered.

            `ingest status` lists the pending uploads and their ids; an id may be shortened \
            to any unique prefix. With no journal, nothing was ingested: it says so and \
            exits 0 (64 if ids were given); a journal it cannot read exits 73.
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var rate: UploadRateOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("Uploads to resume (default: every pending one).", valueName: "id"))
    var ids: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A new S3 gateway of the pending uploads' bucket to go through (may be repeated): it must show the bucket identity the journal recorded (.ingest/bucket-id), and is then recorded with the destination.",
            valueName: "url"))
    var endpoint: [String] = []

    func run() async throws {
        // No stop of its own yet: SIGINT or SIGTERM ends it at once, as their default would
        // (the journal is durable at every step), but as a clean stop, its run mark removed,
        // so that the next process does not report an unclean one.
        let signals = ShutdownSignals { ShutdownSignals.dieBy($0) }
        defer { withExtendedLifetime(signals) {} }
        let systemd = common.notifyReady()
        let logger = common.bootstrapLogging()
        let outcome: ResumeOutcome
        do throws(IngestError) {
            var config = try common.loadConfig()
            try rate.apply(to: &config)
            guard let (state, journal) = try common.openIngestedState(config) else {
                let nothing = common.nothingIngested(config, command: (["resume"] + ids).joined(separator: " "))
                if let id = ids.first { throw nothing.error(id: id) }
                return common.say(nothing, on: .standardError)  // no upload to resume: done
            }
            if !endpoint.isEmpty { try await addGateways(config: config, journal: journal, logger: logger) }
            let (sink, reports) = common.makeReporting(progress, uploads: true, systemd: systemd)
            let service = try await common.makeUploadService(
                config: config, state: state, journal: journal, events: sink, wire: reports.progress.wire, logger: logger)
            try await service.recover(sink: sink)
            var records: [UploadRecord] = []
            if ids.isEmpty {
                records = try await PendingUploads.all(in: journal)
            } else {
                for id in ids {
                    let record = try await common.findUpload(id, in: journal)
                    guard record.isPending else {
                        throw .uploadRefused(id: record.id, reason: "it is \(record.phase.rawValue); there is nothing to resume")
                    }
                    records.append(record)
                }
            }
            reports.start()
            outcome = await PendingUploads.resume(
                records, service: service, custody: CustodyCreator(config: config, scene: nil), sink: sink)
            reports.stop()
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line(outcome.json) + "\n")
            } else {
                ReportOutput.standardError.line(outcome.text)
            }
        } catch {
            throw fail(error, json: common.json)
        }
        if let problem = outcome.problem {
            ReportOutput.standardError.line("ingest: error: \(problem)")
            throw ExitCode(problem.exitStatus.rawValue)
        }
    }

    /// Records each `--endpoint` as a gateway of the S3 destinations of the pending uploads,
    /// after proving it shows the same bucket: its identity marker must hold the bucket
    /// identity the journal recorded (or, when none was, the one a journalled gateway shows
    /// now). Refused otherwise, naming the gateway and the fix; nothing is recorded then.
    private func addGateways(config: Config, journal: Journal, logger: Logger) async throws(IngestError) {
        let fix = "give a gateway of the cluster the uploads were started on"
        for url in endpoint {
            do { _ = try S3Endpoint(url) } catch {
                throw .config(file: nil, key: "--endpoint", problem: "\(error); \(fix), as https://host[:port]")
            }
        }
        let pending = try await PendingUploads.all(in: journal)
        var destinations: [S3Destination] = []
        for record in pending where !record.target.isTus && !destinations.contains(record.target) {
            destinations.append(record.target)
        }
        let known: KnownGateways
        do { known = try await journal.knownGateways() } catch { throw .journal(error) }
        let stores = try await common.makeStores(config: config, journal: journal, logger: logger)
        for target in destinations {
            var expected = known.bucketID(for: target).map { Array($0.utf8) }
            if expected == nil, let client = try stores.store(target) as? S3Client {
                // No identity recorded (a run through one gateway writes none): what the
                // journalled gateways show now, if one answers.
                for gateway in client.gateways.all {
                    if let shown = try? await client.probe(gateway), let id = shown.bucketID {
                        expected = id
                        break
                    }
                }
            }
            guard let expected else {
                throw .config(
                    file: nil, key: "--endpoint",
                    problem: "no bucket identity is recorded for \(target.displayName), and none of its journalled "
                        + "gateways answers with one (.ingest/bucket-id): nothing proves \(endpoint.joined(separator: ", ")) "
                        + "serves the same bucket. Resume once while a journalled gateway answers, or run ingest check "
                        + "with it and the new gateway both listed, then resume with --endpoint again")
            }
            for url in endpoint {
                let alone = S3Destination(
                    endpoint: url, bucket: target.bucket, region: target.region, addressing: target.addressing)
                guard let client = try stores.store(alone) as? S3Client, let gateway = client.gateways.all.first else { continue }
                let shown: (exists: Bool, bucketID: [UInt8]?)
                do throws(S3ClientError) { shown = try await client.probe(gateway) } catch {
                    throw .upload(UploadError(error, what: "checking the gateway \(url)", target: alone))
                }
                guard shown.exists, shown.bucketID == expected else {
                    let seen = shown.bucketID.map { "the bucket id \(String(decoding: $0, as: UTF8.self))" }
                        ?? (shown.exists ? "no .ingest/bucket-id" : "no bucket \(target.bucket)")
                    throw .config(
                        file: nil, key: "--endpoint",
                        problem: "the gateway \(url) shows another bucket (another cluster?): \(seen), where the "
                            + "journal recorded \(String(decoding: expected, as: UTF8.self)) for \(target.displayName); "
                            + "\(fix)")
                }
                do {
                    try await journal.recordGateway(url, of: target)
                    try await journal.recordBucketID(String(decoding: expected, as: UTF8.self), of: target)
                } catch {
                    throw .journal(error)
                }
                logger.notice("gateway added", metadata: ["gateway": "\(url)", "destination": "\(target.displayName)"])
            }
        }
    }
}
