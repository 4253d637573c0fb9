import Foundation

/// How a card's run plans its uploads and hands them to its runner: the uploads earlier
/// runs left, the files staged without one, and each batch of the copy's outcomes.
extension CardRun {
    /// Uploads of this card an earlier run left unfinished: the runner reads those planned
    /// for its files from the journal, a page at a time, first; those another card's file
    /// planned are queued here. Returns whether the card has files staged without an upload
    /// planned (`--no-upload`, a kill in between, or an upload planned for another
    /// destination and never started, which follows the run to its own).
    func queuePendingUploads() async throws(JournalError) -> Bool {
        guard let upload, let runner else { preconditionFailure("CardRun: pending uploads queued before the runner") }
        let target = upload.target
        for record in try await journal.pendingUploadsBesidesPages(ofVolume: volume.key, target: target) {
            if record.target != target, record.phase == .created, record.volumeKey == volume.key {
                // Planned for another destination (a mistyped bucket, a changed endpoint)
                // and never started there: it follows the run to its destination.
                try await journal.removeUpload(id: record.id, note: "re-planned for \(target.displayName)")
            } else {
                runner.submit(record, resumed: true)
            }
        }
        try await runner.follow(volume: volume.key)
        return try await !journal.stagedFilesWithoutUpload(ofVolume: volume.key, limit: 1).isEmpty
    }

    /// Plans and queues the uploads of files staged without one, a page of them at a time.
    /// A file that still cannot become an object fails this run too, and stays quarantined.
    mutating func queueUnplanned() async throws(JournalError) {
        guard let planner, let runner else { preconditionFailure("CardRun: unplanned files queued without a planner") }
        var after: Int64 = 0
        while true {
            let page = try await journal.stagedFilesWithoutUpload(ofVolume: volume.key, after: after, limit: KnownFiles.batch)
            guard let last = page.last?.id else { return }
            after = last
            var claims: [UploadClaim] = []
            for file in page {
                guard let fingerprint = file.fingerprint.flatMap(Fingerprint.init(hex:)) else { continue }
                let scanned = ScannedFile(path: file.cardPath, size: file.size, mtime: file.mtime)
                do { claims.append(try planner.claim(for: scanned, fingerprint: fingerprint)) } catch {
                    try await notUploadable(scanned, error)
                }
            }
            try await Self.submit(claims, volume: volume, journal: journal, runner: runner, streamer: nil)
        }
    }

    /// A staged file no object can be made of (a key or labels beyond S3's limits): it
    /// fails, and is quarantined with its staged copy until the configuration changes or
    /// the operator forgets it.
    mutating func notUploadable(_ file: ScannedFile, _ error: UploadPlanError) async throws(JournalError) {
        summary.failed += 1
        let failure = StageFailure(kind: .notUploadable("\(error)"))
        logger.warning("file not uploaded", metadata: ["path": "\(file.path.display)", "reason": "\(error)"])
        try await journal.noteNotUploadable(path: file.path, volumeKey: volume.key, reason: failure.description)
        sink.emit(.failed(file, failure))
    }

    /// Journals a batch of outcomes and the uploads of its staged files in one transaction,
    /// and hands those uploads to the runner. What needs the files journalled first comes
    /// after the commit: a file that cannot be uploaded is noted as such, and the claim of a
    /// file whose parts are streaming waits, in a task of its own, for its stream's end.
    mutating func journalBatch(_ batch: [StageOutcome], planner: UploadPlanner, runner: UploadRunner) async throws(JournalError) {
        var claims: [UploadClaim] = []
        var unplannable: [(ScannedFile, UploadPlanError)] = []
        var streamed: [(StagedFile, UploadClaim)] = []
        for outcome in batch {
            switch outcome {
            case .staged(let staged):
                var claim: UploadClaim
                do { claim = try planner.claim(for: staged.file, fingerprint: staged.fingerprint) } catch {
                    unplannable.append((staged.file, error))
                    continue
                }
                claim.cardChecksums = staged.partChecksums
                if streamer?.isStreaming(staged.file.path) == true { streamed.append((staged, claim)) } else { claims.append(claim) }
            case .failed(let file, _):
                await streamer?.drop(file.path)
            }
        }
        let results = try await journal.record(
            batch, claiming: claims, volumeKey: volume.key, quarantineAfter: config.upload.quarantineAfter)
        for (file, error) in unplannable {
            await streamer?.drop(file.path)
            try await notUploadable(file, error)
        }
        if let streamer {
            let volume = volume, journal = journal
            for (staged, claim) in streamed {
                try await streamedClaims.add { [claim] () async throws(JournalError) in
                    var claim = claim
                    let stream = await streamer.handOff(staged)
                    claim.streamed = stream?.parts
                    try await Self.submit([claim], volume: volume, journal: journal, runner: runner, streamer: streamer)
                    withExtendedLifetime(stream) {}
                }
            }
        }
        await Self.submit(claims, results, volume: volume, runner: runner, streamer: streamer)
    }

    /// Journals the uploads of `claims` and hands them to the runner: those planned now are
    /// read from the journal by the runner (it follows the card), a copy of another card's
    /// pending upload queues that one first, and an object the bucket holds already is
    /// looked at there.
    /// A claim whose parts were streamed and that plans no new upload has its stream aborted.
    static func submit(
        _ claims: [UploadClaim], volume: VolumeIdentity, journal: Journal, runner: UploadRunner, streamer: PartStreamer?
    ) async throws(JournalError) {
        await submit(claims, try await journal.claim(claims, volumeKey: volume.key), volume: volume, runner: runner, streamer: streamer)
    }

    /// Hands the journalled `results` of `claims` to the runner, as
    /// ``submit(_:volume:journal:runner:streamer:)``.
    static func submit(
        _ claims: [UploadClaim], _ results: [ClaimResult], volume: VolumeIdentity, runner: UploadRunner, streamer: PartStreamer?
    ) async {
        var planned: [UploadRecord] = []
        for (claim, result) in zip(claims, results) {
            if case .planned = result {} else if claim.streamed != nil { await streamer?.abandon(claim) }
            switch result {
            case .planned(let record):
                planned.append(record)
            case .upload(let record) where record.volumeKey == volume.key:
                // Planned for this card, by this run or an earlier one: in the pages the runner reads.
                break
            case .upload(let record):
                runner.submit(record, resumed: record.phase != .created, checksums: record.partChecksums)
            case .alreadyInBucket(let record):
                runner.confirmInBucket(record)
            case let .copy(record, source):
                // Another card's pending upload of the content runs first, in this run.
                if source.isPending, source.volumeKey != volume.key {
                    runner.submit(source, resumed: source.phase != .created, checksums: source.partChecksums)
                }
                planned.append(record)
            }
        }
        runner.planned(planned)
    }
}
