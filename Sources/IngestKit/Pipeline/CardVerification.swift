import Foundation
import GRDB
import Glibc
import Logging
import Synchronization

/// `ingest verify-card`: the strong check before a card is formatted. Every file on the card
/// is read again and fingerprinted (XXH3-128), and must match the journal's record of it
/// (same size and time, same fingerprint) and an object in the bucket (the file's own, by its
/// upload's key and destination as the journal recorded them) of the same size whose
/// recorded fingerprint is the one just computed. Anything else is a problem
/// (``CardVerificationProblem``); the card is safe to erase only when there is none.
///
/// It changes nothing: not the card, not the journal (which it may read while an ingest runs),
/// not the bucket. The walk is the ingest's (``Scanner``, the same ``ScanRules``), so a file
/// left out by the rules is no problem, and a folder the ingest could not enter (too deep,
/// unreadable) is one (`lost`).
///
/// One thread walks the card, asks the journal about a batch of ``batch`` files at a time,
/// and reads each file once, direct where the file system allows (past the page cache, so the
/// card's bytes are what is read), at card speed; the object checks (`HEAD`, and
/// `GetObjectTagging` for a file whose fingerprint is in its tag) run a few at once
/// (``headsInFlight``) behind it, so they never hold the reading up for long. Memory stays
/// flat whatever the card: at most ``batch`` files wait between the two, and no list of the
/// card or of the journal is held. A second walk only counts the files, for the progress.
public struct CardVerification: Sendable {
    /// The journal to compare with; nil when none exists yet (then no file is known).
    public let journal: Journal?
    public let rules: ScanRules
    public let logger: Logger
    /// Object checks in flight at once.
    public var headsInFlight = 8
    /// The S3 client of each destination the journal names, made once per destination.
    let store: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore

    /// Files looked up in the journal in one query, and how far the reading may run ahead of
    /// the object checks.
    static let batch = 512
    /// The size of each read from the card.
    static let blockSize = 1 << 20

    /// - Parameter client: the S3 client for a destination the journal recorded (credentials
    ///   as every command reads them); its error ends the check.
    public init(
        journal: Journal?, rules: ScanRules, logger: Logger,
        client: @escaping @Sendable (S3Destination) throws(IngestError) -> S3Client
    ) {
        self.init(journal: journal, rules: rules, logger: logger, store: { target throws(IngestError) in try client(target) })
    }

    init(
        journal: Journal?, rules: ScanRules, logger: Logger,
        store: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    ) {
        self.journal = journal
        self.rules = rules
        self.logger = logger
        self.store = store
    }

    /// Verifies the card (or directory) at `path`, identified as an ingest identifies it.
    public func verify(
        path: String, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async throws(IngestError) -> CardVerificationSummary {
        let volume = try VolumeIdentity.identify(path: path)
        return await verify(volume: volume, progress: progress, stop: stop, report: report)
    }

    /// Verifies the card whose block device is `node`, taken as `ingest --device` takes it
    /// (``DeviceIngest/attach(device:)``: checked, its device's lock held, mounted read-only
    /// if nothing has mounted it) and, when it was mounted here, unmounted afterwards.
    public func verify(
        device node: String, devices: DeviceIngest, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async throws(IngestError) -> CardVerificationSummary {
        let (mount, lock) = try devices.attach(device: node)
        defer { lock.release() }
        let outcome: Result<CardVerificationSummary, IngestError>
        do throws(IngestError) {
            outcome = .success(try await verify(path: mount.path, progress: progress, stop: stop, report: report))
        } catch {
            outcome = .failure(error)
        }
        if let problem = mount.release() {
            logger.warning(
                "could not unmount the card; unmount it by hand", metadata: ["mount_point": "\(mount.path)", "error": "\(problem)"])
        }
        return try outcome.get()
    }

    /// Verifies `volume`. What stops the check before its end (the card gone, the journal or
    /// the destination unusable) is the summary's ``CardVerificationSummary/failure``, with
    /// the problems found until then reported and counted.
    public func verify(
        volume: VolumeIdentity, progress: CardVerificationProgress, stop: StopFlag = StopFlag(),
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async -> CardVerificationSummary {
        let started = ContinuousClock.now
        report(.volume(volume))
        let batches = Batches<CardFinding>(limit: Self.batch)
        // Raised when the check ends early, or is over: both walks stop.
        let halt = StopFlag()
        let ended: @Sendable () -> Bool = { halt.isRaised || stop.isRaised }
        async let counted: Void = onDedicatedThread("ingest-count") { count(volume, progress: progress, until: ended) }
        async let walked: IngestError? = onDedicatedThread("ingest-verify") { () -> IngestError? in
            defer { batches.finish() }
            do throws(IngestError) {
                try read(volume, into: batches, progress: progress, until: ended)
                return nil
            } catch {
                return error
            }
        }
        var summary = CardVerificationSummary(volume: volume)
        let failure = await judge(batches, into: &summary, progress: progress, report: report)
        if failure != nil {
            halt.raise()
            batches.discard()
        }
        let walkFailure = await walked
        // Nothing of the card is held open once the check returns (a card mounted for it is
        // unmounted next).
        halt.raise()
        await counted
        summary.failure = failure ?? walkFailure
        summary.stopped = stop.isRaised
        summary.seconds = (ContinuousClock.now - started).inSeconds
        logger.info(
            "verified card",
            metadata: [
                "volume": "\(volume.key)", "files": "\(summary.files)", "problems": "\(summary.problems)",
                "safe_to_erase": "\(summary.safeToErase)",
            ])
        return summary
    }

    // MARK: The object checks, behind the reading

    /// Takes what the reading found, judges each file against its journal record, checks its
    /// object (a few at once) and reports every problem. Returns what ended the check early,
    /// if anything did.
    private func judge(
        _ batches: Batches<CardFinding>, into summary: inout CardVerificationSummary, progress: CardVerificationProgress,
        report: @escaping @Sendable (CardVerificationEvent) -> Void
    ) async -> IngestError? {
        var stores: [S3Destination: any ObjectStore] = [:]
        var failure: IngestError?
        func settle(_ verdict: CardVerdict, size: Int64) {
            summary.files += 1
            summary.bytes = summary.bytes.addingSaturating(size)
            switch verdict {
            case .verified:
                summary.verified += 1
                summary.verifiedBytes = summary.verifiedBytes.addingSaturating(size)
            case .problem(let problem):
                summary.counts[problem.code, default: 0] += 1
                progress.problems.add(1, ordering: .relaxed)
                report(.problem(problem))
            case .destination(let error):
                // Not the file's problem: the check stops, and the file is not counted.
                summary.files -= 1
                summary.bytes -= size
                if failure == nil { failure = .upload(error) }
                return
            }
            progress.filesChecked.add(1, ordering: .relaxed)
        }
        await withTaskGroup(of: (CardVerdict, Int64).self) { group in
            var inFlight = 0
            taking: while let batch = await batches.next() {
                for finding in batch {
                    guard failure == nil else { break taking }
                    switch finding {
                    case let .lost(path, reason):
                        let problem = CardVerificationProblem(
                            code: .lost, path: path,
                            message: "\(reason): what it holds was never ingested (\(reason.code))")
                        summary.counts[.lost, default: 0] += 1
                        progress.problems.add(1, ordering: .relaxed)
                        report(.problem(problem))
                    case let .file(read, entry):
                        switch Self.judge(read, entry) {
                        case .settled(let verdict):
                            settle(verdict, size: read.size)
                        case .check(let check):
                            let store: any ObjectStore
                            if let known = stores[check.target] {
                                store = known
                            } else {
                                do throws(IngestError) { store = try self.store(check.target) } catch {
                                    failure = error
                                    break taking
                                }
                                stores[check.target] = store
                            }
                            if inFlight >= headsInFlight, let (verdict, size) = await group.next() {
                                inFlight -= 1
                                settle(verdict, size: size)
                                guard failure == nil else { break taking }
                            }
                            group.addTask { (await Self.check(check, in: store), check.size) }
                            inFlight += 1
                        }
                    }
                }
            }
            while let (verdict, size) = await group.next() { settle(verdict, size: size) }
        }
        return failure
    }

    /// What the journal says of a file just read: a verdict, or the object to check.
    static func judge(_ read: CardFileRead, _ entry: CardJournalEntry?) -> CardJudgement {
        func problem(_ code: CardVerificationProblem.Code, _ message: String, upload: UploadRecord? = nil) -> CardJudgement {
            .settled(.problem(CardVerificationProblem(
                code: code, path: read.path, message: message, size: read.size, fingerprint: read.fingerprint,
                key: upload?.key, uploadID: upload?.id)))
        }
        guard let fingerprint = read.fingerprint else {
            return problem(.unreadable, "cannot be read: \(read.failure ?? "unknown error"); it was not checked")
        }
        guard let entry else {
            return problem(.notInJournal, "not in the journal: never ingested from this card (ingest it: ingest PATH)")
        }
        if entry.size != read.size || entry.mtime != read.mtime {
            return problem(
                .changed,
                "changed on the card since it was ingested: now \(read.size) bytes, modified \(Self.time(read.mtime)); "
                    + "the journal has \(entry.size) bytes, modified \(Self.time(entry.mtime)) (ingest the card again)")
        }
        if entry.state == .forgotten {
            return problem(.pending, "given up with `ingest forget`: not in the bucket")
        }
        guard let recorded = entry.fingerprint.flatMap(Fingerprint.init(hex:)) else {
            let why = entry.lastError.map { " (last error: \($0))" } ?? ""
            return problem(.notInJournal, "known to the journal but not staged yet\(why); ingest the card again")
        }
        if recorded != fingerprint {
            return problem(
                .changed,
                "its bytes changed since it was ingested, with the same size and time: its fingerprint is now "
                    + "\(fingerprint.hex), the journal has \(recorded.hex). The card may be failing, or the file was "
                    + "rewritten in place; an ingest does not read it again while its size and time stay the same")
        }
        guard entry.state == .uploaded else {
            guard let upload = entry.upload else {
                return problem(.pending, "staged but not uploaded: ingest the card again (uploading) to send it")
            }
            return problem(
                .pending,
                "staged, its upload \(upload.id) is \(upload.phase.rawValue): run `ingest resume \(upload.id)` "
                    + "or ingest the card again",
                upload: upload)
        }
        guard let upload = entry.upload else {
            return problem(.pending, "the journal marks it uploaded but records no upload of it: no object to check")
        }
        guard upload.phase == .completed else {
            return problem(
                .pending, "its upload \(upload.id) is \(upload.phase.rawValue), not completed: run `ingest resume \(upload.id)`",
                upload: upload)
        }
        return .check(CardObjectCheck(
            path: read.path, size: read.size, fingerprint: fingerprint, key: upload.key, uploadID: upload.id,
            target: upload.target))
    }

    /// `HEAD` of the file's object, and its recorded fingerprint (metadata, or its tag).
    static func check(_ check: CardObjectCheck, in store: any ObjectStore) async -> CardVerdict {
        func problem(_ code: CardVerificationProblem.Code, _ message: String) -> CardVerdict {
            .problem(CardVerificationProblem(
                code: code, path: check.path, message: message, size: check.size, fingerprint: check.fingerprint,
                key: check.key, uploadID: check.uploadID))
        }
        let place = "s3://\(check.target.bucket)/\(check.key)"
        do throws(S3ClientError) {
            guard let head = try await store.headObject(key: check.key) else {
                return problem(.objectMissing, "no object at \(place) (at \(check.target.endpoint)): the bucket lost it")
            }
            guard head.size == check.size else {
                return problem(
                    .objectDiffers, "the object at \(place) holds \(head.size) bytes, the card's file \(check.size)")
            }
            guard let recorded = try await store.recordedFingerprint(of: head, key: check.key) else {
                return problem(
                    .noFingerprint,
                    "the object at \(place) carries no xxh128 fingerprint (metadata or tag): it is not the one ingest uploaded")
            }
            guard Fingerprint(hex: recorded) == check.fingerprint else {
                return problem(
                    .objectDiffers,
                    "the object at \(place) records fingerprint \(recorded), the card's file has \(check.fingerprint.hex)")
            }
            return .verified
        } catch {
            let sorted = UploadError(error, what: "checking \(place)", target: check.target)
            if sorted.scope == .destination { return .destination(sorted) }
            return problem(.objectUnchecked, "could not be checked: \(sorted.message)")
        }
    }

    /// A time from the journal or the card, for people: UTC, to the second.
    static func time(_ nanoseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(nanoseconds / 1_000_000_000)).formatted(.iso8601)
    }

    // MARK: The reading, on a thread of its own

    /// Walks `volume`, asks the journal about each batch of files, reads each file and hands
    /// it on with the journal's record; the folders the walk lost are handed on too. Throws
    /// what ended it early: the card gone, the journal unreadable.
    private func read(
        _ volume: VolumeIdentity, into batches: Batches<CardFinding>, progress: CardVerificationProgress,
        until stop: @escaping @Sendable () -> Bool
    ) throws(IngestError) {
        let root: FileDescriptor
        do throws(SystemError) { root = try FileDescriptor(path: volume.rootPath, flags: [.readOnly, .directory]) } catch {
            throw .sourceUnavailable(path: volume.rootPath, reason: error.reason)
        }
        let presence = try? CardPresence(root: root, rootPath: volume.rootPath)
        let reader = CardFileReader(root: root, progress: progress)
        var waiting: [ScanFinding] = []
        var paths: [CardPath] = []
        var failure: IngestError?
        func flush() {
            guard failure == nil, !waiting.isEmpty else { return }
            defer {
                waiting.removeAll(keepingCapacity: true)
                paths.removeAll(keepingCapacity: true)
            }
            var known: [CardPath: CardJournalEntry] = [:]
            if let journal {
                do { known = try journal.verificationEntries(ofVolume: volume.key, paths: paths) } catch {
                    failure = .journal(error)
                    return
                }
            }
            for finding in waiting {
                guard !stop() else { return }
                switch finding {
                case let .skipped(path, reason):
                    batches.add(.lost(path, reason))
                case .file(let file):
                    let read = reader.read(file)
                    // One file that cannot be read is that file's problem; the check stops only
                    // when the card itself is gone (as an ingest's staging does).
                    if let cause = read.ioError, let evidence = presence?.check() {
                        failure = .volumeLost(volume: volume.displayName, cause: cause, evidence: evidence)
                        return
                    }
                    batches.add(.file(read, known[file.path]))
                }
            }
        }
        defer { reader.close() }
        try Scanner(rules: rules).scan(root: volume.rootPath, until: { failure != nil || stop() }) { finding in
            switch finding {
            case .file(let file):
                waiting.append(finding)
                paths.append(file.path)
                if paths.count >= Self.batch { flush() }
            case .skipped(_, let reason) where reason.losesContent:
                waiting.append(finding)
                if waiting.count >= Self.batch { flush() }
            case .skipped:
                break  // left out by the rules, or nothing with content: no problem
            }
        }
        flush()
        if let failure { throw failure }
    }

    /// Counts the card's files and bytes, for the progress's totals and its ETA: a walk of
    /// metadata alone, on a thread of its own beside the reading. Blocking.
    private func count(_ volume: VolumeIdentity, progress: CardVerificationProgress, until stop: @escaping @Sendable () -> Bool) {
        var files = 0
        var bytes: Int64 = 0
        do throws(IngestError) {
            try Scanner(rules: rules).scan(root: volume.rootPath, until: stop) { finding in
                if case .file(let file) = finding {
                    files += 1
                    bytes = bytes.addingSaturating(file.size)
                }
            }
        } catch {
            return  // the reading reports it
        }
        if !stop() { progress.setTotals(files: files, bytes: bytes) }
    }
}

/// What a check tells as it goes.
public enum CardVerificationEvent: Sendable {
    /// The card, once identified: first.
    case volume(VolumeIdentity)
    /// A file (or folder) that stands between the card and its erasure.
    case problem(CardVerificationProblem)
}

/// One thing that makes a card not safe to erase, with a stable code for scripts.
public struct CardVerificationProblem: Sendable, Equatable {
    public enum Code: String, Sendable, CaseIterable {
        /// The file changed on the card since it was ingested: size or time, or its bytes
        /// (fingerprint) with the same size and time.
        case changed
        /// The journal does not know the file, or knows it but never staged it.
        case notInJournal = "not-in-journal"
        /// Staged, but its upload is not completed (or was given up).
        case pending
        /// The journal says it is in the bucket; there is no object at its key.
        case objectMissing = "object-missing"
        /// The object at its key has another size, or records another fingerprint.
        case objectDiffers = "object-differs"
        /// The object at its key carries no fingerprint: not the object ingest uploaded.
        case noFingerprint = "no-fingerprint"
        /// The server refused to say (an error about this object alone).
        case objectUnchecked = "object-unchecked"
        /// The card's file could not be read.
        case unreadable
        /// A folder the walk could not enter (too deep, unreadable): its files were never
        /// ingested.
        case lost

        /// The bucket does not hold what the journal says was uploaded and verified.
        public var isIntegrity: Bool {
            switch self {
            case .objectMissing, .objectDiffers, .noFingerprint: true
            default: false
            }
        }

        /// What the check exits with for a problem of this kind (the gravest problem wins).
        public var exitStatus: ExitStatus { isIntegrity ? .integrity : .partial }

        /// One line, for `--help` (at most 60 characters, so that the list keeps its columns).
        public var meaning: String {
            switch self {
            case .changed: "changed on the card since ingested (size, time or bytes)"
            case .notInJournal: "never ingested, or never staged (its copy failed)"
            case .pending: "not uploaded yet (ingest resume), or given up (forget)"
            case .objectMissing: "no object at its key, though the journal says uploaded"
            case .objectDiffers: "its object has another size or another fingerprint"
            case .noFingerprint: "its object carries no xxh128 fingerprint"
            case .objectUnchecked: "the server answered an error about its object"
            case .unreadable: "the card's file could not be read"
            case .lost: "a folder the walk cannot enter (too deep, unreadable)"
            }
        }

        /// The key of its count in the summary's JSON, like `not_in_journal`.
        public var countKey: String { rawValue.replacingOccurrences(of: "-", with: "_") }
    }

    public var code: Code
    public var path: CardPath
    /// What is wrong, and what to do.
    public var message: String
    /// The file's size now, when it was read.
    public var size: Int64?
    /// The file's fingerprint now, when it was read.
    public var fingerprint: Fingerprint?
    /// The object's key and upload, when the journal names them.
    public var key: String?
    public var uploadID: String?

    public init(
        code: Code, path: CardPath, message: String, size: Int64? = nil, fingerprint: Fingerprint? = nil,
        key: String? = nil, uploadID: String? = nil
    ) {
        self.code = code
        self.path = path
        self.message = message
        self.size = size
        self.fingerprint = fingerprint
        self.key = key
        self.uploadID = uploadID
    }

    /// One line for people: `  object-missing DCIM/IMG_0001.JPG: no object at s3://…`.
    public var text: String { "  \(code.rawValue) \(path.display): \(message)" }

    /// The `problem` NDJSON event.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "problem", "code": .string(code.rawValue), "path": .string(path.display), "message": .string(message),
        ]
        object["size"] = size.map { .int($0) }
        object["xxh128"] = fingerprint.map { .string($0.hex) }
        object["key"] = key.map(JSONValue.string)
        object["upload_id"] = uploadID.map(JSONValue.string)
        return object
    }
}

/// How a check ended: what it verified, its problems by code, and the card's verdict.
public struct CardVerificationSummary: Sendable {
    public var volume: VolumeIdentity
    /// Regular files on the card the check reached (those the scan rules leave out are not
    /// counted), and their bytes.
    public var files = 0
    public var bytes: Int64 = 0
    /// Of them, those in the bucket with the same size and fingerprint.
    public var verified = 0
    public var verifiedBytes: Int64 = 0
    public var counts: [CardVerificationProblem.Code: Int] = [:]
    /// What ended the check before its end (the card gone, the journal or the destination
    /// unusable); the verdict is then "not safe".
    public var failure: IngestError?
    /// A stop was asked for (a signal) before the end.
    public var stopped = false
    public var seconds: Double = 0

    public init(volume: VolumeIdentity) { self.volume = volume }

    public var problems: Int { counts.values.reduce(0, +) }

    /// Every file on the card has a verified object with the same fingerprint, and the walk
    /// lost nothing.
    public var safeToErase: Bool { failure == nil && !stopped && problems == 0 }

    /// 0 safe to erase; the failure's status when the check could not finish; 76 when an
    /// object is missing or differs; 1 for other problems.
    public var exitStatus: ExitStatus {
        if let failure { return failure.exitStatus }
        if counts.contains(where: { $0.key.isIntegrity && $0.value > 0 }) { return .integrity }
        return problems > 0 || stopped ? .partial : .success
    }

    /// The problems by code, like `1 changed, 2 pending`.
    var breakdown: String {
        CardVerificationProblem.Code.allCases.compactMap { code in
            counts[code].flatMap { $0 > 0 ? "\($0) \(code.rawValue)" : nil }
        }.joined(separator: ", ")
    }

    /// The last line, for people.
    public var text: String {
        let card = volume.displayName
        let problemWords = counted(problems, "problem")
        if failure != nil || stopped {
            return "Verification of \(card) stopped after \(counted(files, "file")) (\(ByteCount(bytes))), "
                + (problems > 0 ? "\(problemWords) (\(breakdown))" : "no problem") + " so far: not safe to erase"
        }
        let checked = "Verified \(counted(files, "file")) (\(ByteCount(bytes))) of \(card): "
        if problems == 0 { return checked + "all in the bucket with the same fingerprint — safe to erase" }
        return checked + "\(problemWords) (\(breakdown)): not safe to erase"
    }

    /// The `verify_summary` NDJSON event.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "verify_summary", "card": .string(volume.displayName), "volume": .string(volume.key),
            "path": .string(volume.rootPath), "files": .int(Int64(files)), "bytes": .int(bytes),
            "verified": .int(Int64(verified)), "verified_bytes": .int(verifiedBytes), "problems": .int(Int64(problems)),
            "safe_to_erase": .bool(safeToErase), "exit_status": .int(Int64(exitStatus.rawValue)),
            "seconds": .double(seconds), "stopped": .bool(stopped),
        ]
        for code in CardVerificationProblem.Code.allCases { object[code.countKey] = .int(Int64(counts[code] ?? 0)) }
        object["error"] = failure.map { .string($0.description) }
        return object
    }
}

// MARK: Progress

/// How far a check is: files judged, bytes read from the card and the read rate, problems,
/// and, once the counting walk is done, the card's totals and an ETA. Counters only: the
/// reading and the checks move them, ``CardVerificationReports`` reads them.
public final class CardVerificationProgress: Sendable {
    let filesChecked = Atomic<Int>(0)
    let bytesRead = Atomic<Int64>(0)
    let problems = Atomic<Int>(0)
    /// The card's files and bytes; -1 until counted.
    private let totalFiles = Atomic<Int>(-1)
    private let totalBytes = Atomic<Int64>(-1)
    private let started: ContinuousClock.Instant
    private let rate = Mutex(RateWindow())

    public init(now: ContinuousClock.Instant = .now) { started = now }

    func setTotals(files: Int, bytes: Int64) {
        totalBytes.store(bytes, ordering: .relaxed)
        totalFiles.store(files, ordering: .relaxed)
    }

    public func snapshot(now: ContinuousClock.Instant = .now) -> CardVerificationSnapshot {
        let read = bytesRead.load(ordering: .relaxed)
        var snapshot = CardVerificationSnapshot(seconds: (now - started).inSeconds)
        snapshot.filesChecked = filesChecked.load(ordering: .relaxed)
        snapshot.bytesRead = read
        snapshot.problems = problems.load(ordering: .relaxed)
        let files = totalFiles.load(ordering: .relaxed)
        if files >= 0 {
            snapshot.totalFiles = files
            snapshot.totalBytes = totalBytes.load(ordering: .relaxed)
        }
        snapshot.rate = rate.withLock { window in
            window.add(read, at: now)
            return window.rate(read, at: now)
        }
        return snapshot
    }
}

/// The numbers of a check at one moment, as a line and as a `progress` event.
public struct CardVerificationSnapshot: Sendable, Equatable {
    public var seconds: Double
    public var filesChecked = 0
    public var bytesRead: Int64 = 0
    public var problems = 0
    public var totalFiles: Int?
    public var totalBytes: Int64?
    /// Bytes read a second, over the last half minute.
    public var rate: Double?

    public init(seconds: Double) { self.seconds = seconds }

    /// Seconds until every byte is read, once the totals and the rate are known.
    public var eta: Double? {
        guard let totalBytes, let rate, rate > 0 else { return nil }
        return Double(max(totalBytes - bytesRead, 0)) / rate
    }

    /// Like `verified 120/201 files (1.2 GiB/1.8 GiB, 150.0 MiB/s) · 1 problem · ETA 0:42`.
    public var text: String {
        var piece = "verified \(filesChecked)" + (totalFiles.map { "/\($0)" } ?? "") + " files ("
            + "\(ByteCount(bytesRead))" + (totalBytes.map { "/\(ByteCount($0))" } ?? "")
        if let rate { piece += ", \(ProgressSnapshot.rate(rate))" }
        var pieces = [piece + ")"]
        if problems > 0 { pieces.append(problems == 1 ? "1 problem" : "\(problems) problems") }
        if let eta { pieces.append("ETA \(ProgressSnapshot.clock(eta))") }
        return pieces.joined(separator: " · ")
    }

    /// The `progress` NDJSON event of `verify-card`.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "progress", "seconds": .double(seconds), "files_checked": .int(Int64(filesChecked)),
            "bytes_read": .int(bytesRead), "problems": .int(Int64(problems)),
        ]
        object["files_total"] = totalFiles.map { .int(Int64($0)) }
        object["bytes_total"] = totalBytes.map { .int($0) }
        object["read_rate"] = rate.map { .int(Int64($0.rounded())) }
        object["eta_seconds"] = eta.map { .int(Int64($0.rounded())) }
        return object
    }
}

/// Tells a check's progress while it runs: the line on a terminal (four times a second) and a
/// `progress` NDJSON event each `interval`. ``start()`` when the check starts, ``stop()`` when
/// it ends: the line is cleared, so the summary starts on a clean line.
public final class CardVerificationReports: Sendable {
    public let progress: CardVerificationProgress
    public let line: ProgressLine?
    let events: ReportOutput?
    let interval: Duration
    private let state = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))

    public init(progress: CardVerificationProgress, line: ProgressLine?, events: ReportOutput?, interval: Duration) {
        precondition(interval > .zero)
        self.progress = progress
        self.line = line
        self.events = events
        self.interval = interval
    }

    public func start() {
        guard line != nil || events != nil else { return }
        let loop = Task { [self] in
            let tick = line == nil ? interval : min(ProgressReports.redraw, interval)
            var due = ContinuousClock.now + interval
            while !Task.isCancelled {
                try? await Task.sleep(for: tick)
                let now = ContinuousClock.now
                let snapshot = progress.snapshot(now: now)
                if let line, snapshot.filesChecked > 0 || snapshot.bytesRead > 0 { line.draw(snapshot.text) }
                if now >= due, let events {
                    due = now + interval
                    state.withLock { if !$0.stopped { events.write(JSONValue.line(snapshot.json) + "\n") } }
                }
            }
        }
        state.withLock { $0.task = loop }
    }

    public func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            state.task?.cancel()
            return !state.stopped
        }
        if first { line?.end() }
    }
}

// MARK: Between the reading and the checks

/// A card file as read now: its size and time as opened, and its fingerprint, or why it
/// could not be read.
struct CardFileRead: Sendable {
    var path: CardPath
    var size: Int64
    var mtime: Int64
    var fingerprint: Fingerprint?
    /// Why it could not be read.
    var failure: String?
    /// The failed system call, when it may be the card's end (an I/O error).
    var ioError: SystemError?
}

/// What the reading hands on.
enum CardFinding: Sendable {
    case file(CardFileRead, CardJournalEntry?)
    /// A folder whose contents the walk lost (``SkipReason/losesContent``).
    case lost(CardPath, SkipReason)
}

/// The object a file's upload made, to look at.
struct CardObjectCheck: Sendable {
    var path: CardPath
    var size: Int64
    var fingerprint: Fingerprint
    var key: String
    var uploadID: String
    var target: S3Destination
}

enum CardVerdict: Sendable {
    case verified
    case problem(CardVerificationProblem)
    /// The destination cannot be asked (unreachable, credentials, no bucket): the check stops.
    case destination(UploadError)
}

enum CardJudgement: Sendable {
    case settled(CardVerdict)
    case check(CardObjectCheck)
}

/// Reads card files whole, each beneath the card's root (``CardOpener``: no link followed, no
/// other mount entered), in 1 MiB blocks, direct where the file system allows, and
/// fingerprints them. One thread.
final class CardFileReader {
    private let opener: CardOpener
    private let buffer = AlignedBuffer(size: CardVerification.blockSize)
    private let hasher = FingerprintHasher()
    private let progress: CardVerificationProgress

    init(root: FileDescriptor, progress: CardVerificationProgress) {
        opener = CardOpener(root: root)
        self.progress = progress
    }

    func read(_ file: ScannedFile) -> CardFileRead {
        var read = CardFileRead(path: file.path, size: file.size, mtime: file.mtime)
        let opened: (file: FileDescriptor, status: Glibc.stat)
        do throws(CardOpenError) { opened = try opener.open(file.path, flags: .readOnly) } catch {
            switch error {
            case .symlink(let link):
                read.failure = "\(link.display) is a symbolic link now (the walk saw none there): not followed"
            case .otherFileSystem(let place):
                read.failure = "\(place.display) is another mount now: not entered"
            case .system(let cause):
                read.failure = cause.reason
                read.ioError = Self.mayBeTheCard(cause) ? cause : nil
            }
            return read
        }
        read.size = Int64(opened.status.st_size)
        read.mtime = opened.status.mtimeNanoseconds
        let reader = FileRangeReader(
            FileRange(file: opened.file, path: file.path.display, offset: 0, length: read.size), buffer: buffer)
        hasher.reset()
        do throws(SystemError) {
            while case let bytes = try reader.next(), !bytes.isEmpty {
                hasher.update(bytes)
                progress.bytesRead.add(Int64(bytes.count), ordering: .relaxed)
            }
        } catch {
            read.failure = "\(error.call) failed: \(error.reason)"
            read.ioError = Self.mayBeTheCard(error) ? error : nil
            return read
        }
        read.fingerprint = hasher.finalize()
        return read
    }

    /// Closes the folders held open.
    func close() { opener.reset() }

    /// An error a card gone gives too (EIO, ENOMEM, ENODEV…); a missing or refused file is
    /// never the card.
    private static func mayBeTheCard(_ error: SystemError) -> Bool {
        ![.noSuchFileOrDirectory, .notDirectory, .permissionDenied, .notPermitted, .tooManySymbolicLinkLevels, .nameTooLong].contains(error.errno)
    }
}
