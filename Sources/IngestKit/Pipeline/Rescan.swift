import Foundation
import Logging

/// A card or directory `ingest rescan` ingests.
public struct RescanSource: Sendable, Equatable {
    public enum Origin: String, Sendable {
        /// A mounted file system whose identity the journal knows.
        case knownCard = "known-card"
        /// A directory of `[rescan] roots` (or `--root`).
        case root
    }

    public var path: String
    public var origin: Origin
    /// The journal's key of its volume; nil for a root that cannot be identified (missing).
    public var volumeKey: String?

    public init(path: String, origin: Origin, volumeKey: String?) {
        self.path = path
        self.origin = origin
        self.volumeKey = volumeKey
    }

    /// The mounted file systems the journal knows, one per identity: every mount of a block
    /// device at a place for removable media (``MountPolicy``, as `--device` has it) whose
    /// identity (``VolumeIdentity/identify(path:mounts:udevProperties:)`` on its mount
    /// point) is among `known`. A device with any mount elsewhere backs the system (a
    /// crafted card can carry the UUID of the station's root) and is never taken. Mounts of
    /// anything but a `/dev/` node (tmpfs, network file systems, overlays) are not looked at,
    /// so a dead network mount cannot hang the job.
    public static func mountedKnownCards(
        policy: MountPolicy, known: Set<String>, mounts: MountTable,
        identify: (String) throws(IngestError) -> VolumeIdentity
    ) -> [VolumeIdentity] {
        let blockMounts = mounts.entries.filter { $0.source.hasPrefix("/dev/") }
        let systemDevices = Set(
            blockMounts.filter { !policy.isRemovableMediaLocation($0.mountPoint) }.map { "\($0.major):\($0.minor)" })
        var found: [VolumeIdentity] = []
        var seenMountPoints: Set<String> = []
        for entry in blockMounts
        where policy.isRemovableMediaLocation(entry.mountPoint) && !systemDevices.contains("\(entry.major):\(entry.minor)") {
            guard seenMountPoints.insert(entry.mountPoint).inserted,
                let identity = try? identify(entry.mountPoint),
                !identity.key.hasPrefix("path:"), known.contains(identity.key),
                !found.contains(where: { $0.key == identity.key })
            else { continue }
            found.append(identity)
        }
        return found
    }
}

/// A card the journal knows, mounted where `ingest rescan` does not take cards from (a
/// card mounted by hand at `/mnt/sd`, or also bind-mounted at a system place): left alone,
/// and said, with the command that ingests it.
public struct KnownCardElsewhere: Sendable, Equatable {
    /// The journal's key of its volume (`uuid:…`).
    public var volumeKey: String
    /// How people know it: its label, else its device.
    public var name: String
    /// Where its whole file system is mounted, the places outside those for removable media first.
    public var mountPoints: [String]

    public init(volumeKey: String, name: String, mountPoints: [String]) {
        self.volumeKey = volumeKey
        self.name = name
        self.mountPoints = mountPoints
    }

    /// What ingests it by hand.
    public var command: String { "ingest \(mountPoints.first.map(shellQuotedIfNeeded) ?? "")" }
}

extension RescanSource {
    /// The places of the system itself: a device mounted at one of them is the station's,
    /// whatever UUID it carries (a crafted card can carry the root's), and is never named as
    /// a card, not even in a note.
    public static let systemPlaces: Set<String> = [
        "/", "/boot", "/boot/efi", "/boot/firmware", "/usr", "/var", "/home", "/opt", "/root", "/etc",
    ]

    /// The known cards mounted where ``mountedKnownCards(policy:known:mounts:identify:)`` does
    /// not take them: block devices whose whole file system is mounted outside the places for
    /// removable media (or inside, and also outside), identified as every card is (the mount
    /// table and udev), whose key is among `known` and not in `taken` (the cards the rescan
    /// ingests). A device with any mount at one of the ``systemPlaces`` is passed over, and
    /// so are mounts of anything but a `/dev/` node.
    public static func knownCardsElsewhere(
        policy: MountPolicy, known: Set<String>, taken: Set<String>, mounts: MountTable,
        identify: (String) throws(IngestError) -> VolumeIdentity
    ) -> [KnownCardElsewhere] {
        let blockMounts = mounts.entries.filter { $0.source.hasPrefix("/dev/") }
        var devices: [String] = []
        var mountsOf: [String: [MountEntry]] = [:]
        for entry in blockMounts {
            let device = "\(entry.major):\(entry.minor)"
            if mountsOf[device] == nil { devices.append(device) }
            mountsOf[device, default: []].append(entry)
        }
        var found: [KnownCardElsewhere] = []
        for device in devices {
            let entries = mountsOf[device] ?? []
            guard !entries.contains(where: { systemPlaces.contains($0.mountPoint) }),
                entries.contains(where: { !policy.isRemovableMediaLocation($0.mountPoint) })
            else { continue }
            let whole = entries.filter { $0.root == "/" }.map(\.mountPoint)
            let places = whole.filter { !policy.isRemovableMediaLocation($0) } + whole.filter(policy.isRemovableMediaLocation)
            guard let first = places.first, let identity = try? identify(first),
                !identity.key.hasPrefix("path:"), known.contains(identity.key), !taken.contains(identity.key),
                !found.contains(where: { $0.volumeKey == identity.key })
            else { continue }
            found.append(KnownCardElsewhere(volumeKey: identity.key, name: identity.displayName, mountPoints: places))
        }
        return found
    }
}

/// A path as a shell reads it: as it is when it holds only safe characters, else in single quotes.
func shellQuotedIfNeeded(_ path: String) -> String {
    let safe = path.utf8.allSatisfy { byte in
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "/._-+:@%,=".utf8.contains(byte)
    }
    return safe && !path.isEmpty ? path : "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// What became of one card or root in a rescan.
public struct CardOutcome: Sendable, Equatable {
    public enum Status: Sendable, Equatable {
        /// Ingested; the summary tells how it went.
        case ingested
        /// Another ingest process holds it: left to that process, not an error.
        case busy(String)
        /// Not there, or not readable: a root that is missing (an error), or a card removed
        /// since it was found (not one: its files wait for its next insertion).
        case unavailable(IngestError)
        /// The ingest stopped (staging full, card failed, journal unusable, bad labels…).
        case failed(IngestError)
    }

    public var source: RescanSource
    /// The journal's key of the volume, once identified.
    public var volumeKey: String?
    /// How people know it: a card's label, a directory's path.
    public var name: String
    public var status: Status
    /// What the ingest did (also when it stopped part-way).
    public var summary: RunSummary?
    /// Its files not in the bucket yet, after the run (from the journal).
    public var pending = JournalSummary.Tally.zero

    public var exitStatus: ExitStatus {
        switch status {
        case .ingested: summary?.exitStatus ?? .success
        case .busy: .success
        case .unavailable(let error): source.origin == .root ? error.exitStatus : .success
        case .failed(let error): error.exitStatus
        }
    }
}

/// What a whole rescan came to.
public struct RescanReport: Sendable, Equatable {
    public var resume: ResumeOutcome
    /// What the check of the cards' folders in the bucket found (``UploadService/checkBucket(days:now:)``).
    public var bucket = BucketCheckOutcome()
    /// What the night's read-back of objects found (``UploadService/readBack(budget:days:reader:now:)``).
    public var readBack = ReadBackOutcome()
    public var cards: [CardOutcome] = []
    /// Known cards mounted where rescan does not take cards from: not ingested, only named.
    public var elsewhere: [KnownCardElsewhere] = []
    /// Cards seen within the bucket check's window, not here, with files only they can bring
    /// to the bucket: the rescan fails until they are ingested again.
    public var awaiting: [CardAwaitingItself] = []
    public var sweep = StagingSweep()
    /// Multipart uploads no journal knows, aborted at the destinations.
    public var orphans = OrphanSweep()
    /// The journal's totals once everything ran.
    public var totals = JournalTotals()
    public var seconds: Double = 0

    /// Success when everything pending finished. Otherwise the first failure that concerns
    /// more than single files (a destination, the staging area, a missing root…), in the
    /// order the work ran; else `partial` when files failed or a card must come back for its
    /// files (``awaiting``), night after night until it does. A busy card is not a failure.
    public var exitStatus: ExitStatus {
        let bucketStatus: ExitStatus = bucket.error?.exitStatus ?? (bucket.problems.isEmpty ? .success : .integrity)
        let statuses = [resume.problem?.exitStatus ?? .success, bucketStatus, readBack.exitStatus] + cards.map(\.exitStatus)
            + [awaiting.isEmpty ? .success : .partial]
        if let serious = statuses.first(where: { $0 != .success && $0 != .partial }) { return serious }
        return statuses.contains(.partial) ? .partial : .success
    }

    /// Files staged now, over every card.
    public var staged: JournalSummary.Tally {
        cards.compactMap(\.summary).reduce(.zero) { $0 + .init(count: $1.staged, bytes: $1.stagedBytes) }
    }

    /// Objects uploaded and verified now: resumed uploads and the cards' own.
    public var uploaded: JournalSummary.Tally {
        cards.compactMap(\.summary?.uploads).reduce(.init(count: resume.totals.uploaded, bytes: resume.totals.uploadedBytes)) {
            $0 + .init(count: $1.uploaded, bytes: $1.uploadedBytes)
        }
    }

    /// Files that could not be staged now.
    public var failed: Int { cards.compactMap(\.summary).reduce(0) { $0 + $1.failed } }

    /// Uploads that failed now.
    public var uploadsFailed: Int {
        cards.compactMap(\.summary?.uploads).reduce(resume.totals.failed) { $0 + $1.failed }
    }
}

/// `ingest rescan`: the nightly job. Finds the mounted cards the journal knows and the
/// configured roots, resumes every pending upload none of them carries, ingests each of
/// them in turn like `ingest PATH` (which finishes its own pending uploads), then aborts the
/// multipart uploads no journal knows at every destination, then sweeps the staging area.
public struct Rescanner: Sendable {
    public let config: Config
    public let state: StateDirectory
    public let journal: Journal
    public let logger: Logger
    /// Where the cards' uploads go.
    public let target: S3Destination
    /// The process's uploads: the resume step and every card share it.
    public let uploads: UploadService
    /// The store of one destination, for the orphan sweep (``StoreFactory/store``).
    public let makeStore: @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    /// Which mounts may be cards: the `--device` policy.
    public let policy: MountPolicy

    public init(
        config: Config, state: StateDirectory, journal: Journal, logger: Logger, target: S3Destination,
        policy: MountPolicy, uploads: UploadService,
        makeStore: @escaping @Sendable (S3Destination) throws(IngestError) -> any ObjectStore
    ) {
        self.policy = policy
        self.config = config
        self.state = state
        self.journal = journal
        self.logger = logger
        self.target = target
        self.uploads = uploads
        self.makeStore = makeStore
    }

    /// Runs the rescan; `progress` hears each step's outcome as it ends. Throws only what
    /// stops everything (an unusable journal or staging area); a card's failure is its outcome.
    ///
    /// Every pending upload is taken up once: those of the cards found are queued by their
    /// card's ingest, as `ingest PATH` does (which also re-plans, for the configured
    /// destination, uploads never started elsewhere); the step before it resumes the rest.
    public func run(sink: some EventSink, progress: (RescanEvent) -> Void) async throws(IngestError) -> RescanReport {
        let started = Date()
        let (sources, elsewhere) = try await sources()
        try await uploads.recover(sink: sink)
        let others = try await PendingUploads.all(in: journal, exceptOfVolumes: Set(sources.compactMap(\.volumeKey)))
        let resumed = await PendingUploads.resume(
            others, service: uploads, custody: CustodyCreator(config: config, scene: nil), sink: sink)
        progress(.resumed(resumed))
        var report = RescanReport(resume: resumed)
        // Before the cards: an object found missing or changed is sent again by its card's
        // ingest when the card is here, and the card's verdict says so either way.
        report.bucket = await uploads.checkBucket(days: config.rescan.bucketCheckDays)
        progress(.bucketChecked(report.bucket))
        // Then the night's read-back: an object whose bytes are not the ones ingested is sent
        // again, by its card's ingest when the card is here.
        if config.rescan.readBackBytes > 0 {
            report.readBack = await uploads.readBack(budget: config.rescan.readBackBytes, days: JournalTotals.recentCardDays)
            progress(.readBack(report.readBack))
        }

        for source in sources {
            let outcome = await ingest(source, sink: sink)
            progress(.card(outcome))
            report.cards.append(outcome)
        }
        report.elsewhere = elsewhere
        for card in elsewhere { progress(.knownCardElsewhere(card, lookedIn: policy.removableRoots)) }
        if config.rescan.bucketCheckDays > 0 {
            let window = started.addingTimeInterval(-Double(config.rescan.bucketCheckDays) * 86_400)
            do {
                report.awaiting = try await journal.cardsAwaitingThemselves(
                    seenSince: window, except: Set(report.cards.compactMap(\.volumeKey)))
            } catch { throw .journal(error) }
            for card in report.awaiting { progress(.cardAwaitingItself(card)) }
        }

        // After every upload of this run ended, so that none of its own is in flight.
        report.orphans = try await sweepOrphans()
        if let deferred = report.orphans.deferred {
            progress(.orphanSweepDeferred(last: deferred.last, next: deferred.next))
        } else if let age = report.orphans.age {
            for outcome in report.orphans.destinations { progress(.orphansSwept(outcome, age: age)) }
        }

        report.sweep = try await StagingArea(root: state.stagingPath)
            .sweep(journal: journal, retention: config.upload.stagingRetention)
        progress(.swept(report.sweep))
        do { report.totals = try await journal.totals() } catch { throw .journal(error) }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Aborts, at the configured destination and every one the journal has uploads for, the
    /// multipart uploads under `[s3] prefix` that the journal does not know and that are older
    /// than `[rescan] orphan_upload_age` (nothing when it is off), unless the last sweep that
    /// reached every destination ran less than ``OrphanSweep/interval(age:)`` ago.
    func sweepOrphans(now: Date = Date()) async throws(IngestError) -> OrphanSweep {
        guard let age = config.rescan.orphanUploadAge else { return OrphanSweep(age: nil) }
        var sweep = OrphanSweep(age: age)
        let interval = OrphanSweep.interval(age: age)
        let known: [S3Destination]
        do {
            if let last = try await journal.lastCompleteOrphanSweep(), now.timeIntervalSince(last) < interval.inSeconds {
                sweep.deferred = (last, last.addingTimeInterval(interval.inSeconds))
                return sweep
            }
            known = try await journal.uploadTargets()
        } catch { throw .journal(error) }
        let sweeper = OrphanSweeper(journal: journal, prefix: config.s3.prefix, age: age, logger: logger, makeStore: makeStore)
        sweep = await sweeper.sweep(OrphanSweeper.destinations(configured: target, journal: known), now: now)
        do { try await journal.noteOrphanSweep(sweep.record, at: now) } catch {
            throw .journal(error)
        }
        return sweep
    }

    /// The known cards that are mounted, then the roots; a root that is also a known card
    /// is ingested once. Besides, the known cards mounted elsewhere that none of them is.
    func sources() async throws(IngestError) -> ([RescanSource], elsewhere: [KnownCardElsewhere]) {
        let known: Set<String>
        do { known = try await journal.volumeKeys() } catch { throw .journal(error) }
        let mounts: MountTable
        do { mounts = try MountTable.current() } catch {
            throw .sourceUnavailable(path: "/proc/self/mountinfo", reason: "\(error)")
        }
        let cards = RescanSource.mountedKnownCards(policy: policy, known: known, mounts: mounts) { path throws(IngestError) in
            try VolumeIdentity.identify(path: path, mounts: mounts)
        }
        var sources = cards.map { RescanSource(path: $0.rootPath, origin: .knownCard, volumeKey: $0.key) }
        var keys = Set(cards.map(\.key))
        for root in config.rescan.roots {
            let key = (try? VolumeIdentity.identify(path: root, mounts: mounts))?.key
            if let key, !keys.insert(key).inserted { continue }
            sources.append(RescanSource(path: root, origin: .root, volumeKey: key))
        }
        let elsewhere = RescanSource.knownCardsElsewhere(policy: policy, known: known, taken: keys, mounts: mounts) {
            path throws(IngestError) in try VolumeIdentity.identify(path: path, mounts: mounts)
        }
        return (sources, elsewhere)
    }

    private func ingest(_ source: RescanSource, sink: some EventSink) async -> CardOutcome {
        var outcome = CardOutcome(source: source, name: source.path, status: .ingested)
        let upload = UploadRequest(target: target, service: uploads, scene: nil, tags: [:])
        var ingestor = Ingestor(config: config, state: state, journal: journal, logger: logger, upload: upload)
        // The bucket check before the cards looked at theirs (as far as its window reaches).
        ingestor.checksKnownCards = false
        let ingested = await ingestor.ingest(path: source.path, sink: sink)
        outcome.summary = ingested.summary
        if let error = ingested.error {
            switch error {
            case .volumeBusy: outcome.status = .busy(error.description)
            case .sourceUnavailable where ingested.volume == nil: outcome.status = .unavailable(error)
            default: outcome.status = .failed(error)
            }
        }
        if let volume = ingested.volume {
            outcome.volumeKey = volume.key
            outcome.name = volume.displayName
            if let left = try? await journal.files(byStateOfVolume: volume.key) {
                outcome.pending = left[.pending, default: .zero] + left[.staged, default: .zero]
            }
        }
        logger.info(
            "rescanned",
            metadata: ["path": "\(source.path)", "origin": "\(source.origin.rawValue)", "status": "\(outcome.exitStatus)"])
        return outcome
    }

}

extension CardAwaitingItself {
    /// What ingests the card again once it is mounted where it last was.
    public var command: String { "ingest \(shellQuotedIfNeeded(rootPath))" }
}
