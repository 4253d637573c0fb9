import ArgumentParser
import IngestKit

/// `ingest verify-card PATH`: is this card safe to erase?
struct VerifyCardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-card",
        abstract: "Before erasing a card: read every file on it again and check it against the journal and its object in the bucket.",
        discussion: """
            Run it on a card already ingested, before the card is formatted and reused. It \
            answers one question, "can I erase this card?", from the card itself rather than \
            from the journal's memory: every file on the card is read again, whole (at card \
            speed, direct from the card where the file system allows), and fingerprinted \
            (XXH3-128). Then each file must be:
              - known to the journal (this card, this path) with the same size, time
                and fingerprint: unchanged since it was ingested;
              - uploaded: its upload completed;
              - in the bucket: its object, at the key and destination the journal
                recorded, is there (HEAD) with the same size, the fingerprint it
                carries (x-amz-meta-xxh128, or the xxh128 tag of a large file streamed
                as it was read) is the one just computed, and it is the object its
                upload made: the ETag recorded when it was verified (and the server's
                checksum and version id, where given) is the one the HEAD shows. The
                label alone proves nothing: anyone who can write the bucket can copy it.
            Only a card this station ingested can be proven: a path the journal never saw \
            as a card (an empty directory, a folder of a card) and a directory below \
            /media, /mnt or /run/media with no card mounted are refused with status 66 \
            before anything is read.
            With --read-back, each object that passed those checks is also read back whole \
            (ranged GETs of 8 MiB, a few at once, in bounded memory) and its bytes \
            fingerprinted: the proof that the bytes are the card's, which survives someone \
            who copies the metadata too (a difference: read-back-differs). It costs a download of the card: \
            on a cloud store, the egress and request charges of its size. A destination that \
            cannot read objects back (a tus server) says so once, and its objects are proven \
            by their HEAD alone.

            The card is walked as an ingest walks it ([scan] rules, --include and --exclude, \
            litter, links and special files skipped): a file the rules leave out is no \
            problem, a folder the walk cannot enter (too deep, unreadable) is one. Nothing is \
            changed: not the card, not the journal, not the bucket; it may run while other \
            cards are ingested.

            The destination comes from the journal (each file's upload recorded its endpoint, \
            bucket, region and key): no endpoint or bucket option is needed. Credentials are \
            read as for any upload (AWS_ACCESS_KEY_ID, AWS_PROFILE, the shared files, \
            credential_process). With --device the card is taken as `ingest --device` takes \
            it (mounted read-only if nothing has, unmounted afterwards); meanwhile an ingest \
            triggered for the same device leaves the card to this check.

            Each problem is one line on standard error; with --json, a `problem` object on \
            standard output with a stable `code`, the `path`, a `message` and, when known, \
            `size`, `xxh128` (read now), `key` and `upload_id`. The codes:
            \(CardVerificationProblem.Code.allCases.map { "  \($0.rawValue.padding(toLength: 19, withPad: " ", startingAt: 0))\($0.meaning)" }.joined(separator: "\n"))
            The last line says "Verified N files (SIZE) of CARD: all in the bucket with the \
            same fingerprint — safe to erase" (with --read-back: ", every byte read back \
            (SIZE)"), or how many problems stand in the way; with --json, a `verify_summary` \
            object (files, bytes, verified, problems, a count per code, safe_to_erase, \
            exit_status, read_back, read_back_files, read_back_bytes). The progress line on \
            a terminal shows files, bytes, the read rate, the bytes read back and the ETA \
            (--no-progress: none; with --json, a `progress` event every --progress-interval).

            Exit status, for scripts (erase the card only after 0):
              0   every file has its object in the bucket, same fingerprint: safe to erase
              1   files not safely in the bucket yet (changed, not-in-journal, pending,
                  unreadable, lost, object-unchecked): ingest the card again, or resume
              76  the bucket lacks what the journal says was uploaded (object-missing,
                  object-differs, read-back-differs, no-fingerprint): keep the card and
                  find out why
              69  the endpoint cannot be reached, 77 it refused the credentials, 78 the
                  bucket does not exist: the check did not finish
              66  no card to read at the path or device, a card never ingested here, or
                  a mount point with nothing mounted; 74 the card failed or was removed
                  during the check; 73 the journal cannot be read
            Problems of objects (76) outweigh problems of files (1).

            Examples:
              ingest verify-card /media/sd && mkfs.exfat -n CARD /dev/sdb1
              ingest verify-card --device /dev/sdb1 --json | jq 'select(.event=="problem")'
              ingest verify-card --read-back /media/sd
            """)

    @OptionGroup var common: CommonOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("The card's mount point, or the directory that was ingested.", valueName: "path"), completion: .directory)
    var path: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The card's block device, like /dev/sdb1, instead of a path: mounted read-only if it is not mounted.",
            valueName: "node"),
        completion: .file())
    var device: String?

    @Option(name: .long, help: ArgumentHelp("Only check files matching this pattern, as the ingest did (repeatable).", valueName: "glob"))
    var include: [String] = []

    @Option(name: .long, help: ArgumentHelp("Leave out files or directories matching this pattern, as the ingest did (repeatable).", valueName: "glob"))
    var exclude: [String] = []

    @Flag(
        name: .customLong("read-back"),
        help: "Also read each object back from the bucket and fingerprint its bytes (a download of the card's size).")
    var readBack = false

    func validate() throws {
        switch (path, device) {
        case (nil, nil): throw ValidationError("Give the card's mount point (PATH) or its block device (--device /dev/sdb1).")
        case (.some, .some): throw ValidationError("Give either PATH or --device, not both.")
        default: break
        }
    }

    func run() async throws {
        let logger = common.bootstrapLogging()
        let stop = StopFlag()
        let signals = ShutdownSignals { _ in stop.raise() }
        let json = common.json
        let summary: CardVerificationSummary
        do throws(IngestError) {
            var config = try common.loadConfig()
            do {
                config.scan.include += try include.map { pattern throws(GlobError) in try Glob(pattern) }
                config.scan.exclude += try exclude.map { pattern throws(GlobError) in try Glob(pattern) }
            } catch {
                throw .config(file: nil, key: "--include/--exclude", problem: error.description)
            }
            let journal = try common.readJournal(config)
            let stores = try await common.makeStores(config: config, journal: journal, logger: logger)
            var verification = CardVerification(journal: journal, rules: config.scan, logger: logger, store: stores.store)
            if readBack { verification.readBack = ObjectReadBack() }
            let drawn = progress.progress ?? (!json && ReportOutput.standardError.isTerminal)
            let line = drawn ? ProgressLine(output: .standardError) : nil
            PrintableLogHandler.progressLine.withLock { $0 = line }
            let meter = CardVerificationProgress()
            let reports = CardVerificationReports(
                progress: meter, line: line, events: json ? .standardOutput : nil, interval: progress.interval)
            let report: @Sendable (CardVerificationEvent) -> Void = { event in
                switch event {
                case .volume(let volume):
                    if json { return ReportOutput.standardOutput.write(JSONValue.line(IngestEvent.volume(volume).json) + "\n") }
                    let details = [
                        volume.device.map { "on \($0.node)" }, volume.device?.fsLabel.map { "label \($0)" },
                        volume.device?.fsUUID.map { "UUID \($0)" },
                    ].compactMap { $0 }
                    let text = "Verifying \(volume.rootPath)" + (details.isEmpty ? "" : " (\(details.joined(separator: ", ")))")
                    if let line { line.print(text) } else { ReportOutput.standardError.line(text) }
                case .problem(let problem):
                    if json { return ReportOutput.standardOutput.writeSoon(JSONValue.line(problem.json) + "\n") }
                    if let line { line.print(problem.text) } else { ReportOutput.standardError.line(problem.text) }
                case .readBackUnavailable(let destination):
                    if json {
                        let event: [String: JSONValue] = ["event": "read_back_unavailable", "destination": .string(destination)]
                        return ReportOutput.standardOutput.writeSoon(JSONValue.line(event) + "\n")
                    }
                    let text = "\(destination) cannot read objects back: its objects are checked by their HEAD alone (size, fingerprint label)"
                    if let line { line.print(text) } else { ReportOutput.standardError.line(text) }
                }
            }
            reports.start()
            defer { reports.stop() }
            if let device {
                let state = try StateDirectory(path: common.statePath(config))
                let policy = MountPolicy(environment: common.environment, fileSystems: config.device.fileSystems)
                summary = try await verification.verify(
                    device: device, devices: DeviceIngest(state: state, policy: policy, logger: logger), progress: meter,
                    stop: stop, report: report)
            } else {
                summary = try await verification.verify(path: path ?? ".", progress: meter, stop: stop, report: report)
            }
        } catch {
            if let signal = signals.signal { stopped(by: signal) }
            throw fail(error, json: json)
        }
        if json {
            ReportOutput.standardOutput.write(JSONValue.line(summary.json) + "\n")
        } else {
            ReportOutput.standardError.line(summary.text)
        }
        if let signal = signals.signal { stopped(by: signal) }
        if let failure = summary.failure { throw fail(failure, json: json) }
        if summary.exitStatus != .success { throw ExitCode(summary.exitStatus.rawValue) }
    }

    /// After a stop on SIGTERM or SIGINT: said, then the death the signal asked for.
    private func stopped(by signal: Int32) -> Never {
        ReportOutput.standardError.line("ingest: stopped by signal \(signal); the card was not fully verified: not safe to erase")
        ShutdownSignals.dieBy(signal)
    }
}
