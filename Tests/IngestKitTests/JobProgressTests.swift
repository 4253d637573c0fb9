import Foundation
import Testing

@testable import IngestKit

@Suite struct JobProgressTests {
    static let mib: Int64 = 1 << 20

    static func upload(_ id: String, size: Int64, partSize: Int64? = nil) -> UploadRecord {
        UploadRecord(
            id: id, endpoint: "http://127.0.0.1:1", bucket: "cards", region: "us-east-1", addressing: .path, key: "k/\(id)",
            fingerprint: String(repeating: "0", count: 32), size: size, partSize: partSize, checksum: .crc32c, phase: .created,
            uploadID: nil, restartCount: 0, headers: "[]", volumeKey: nil, sourcePath: nil, etag: nil, lastError: nil,
            createdAt: Date(), updatedAt: Date(), completedAt: nil)
    }

    static func file(_ name: String, size: Int64) -> ScannedFile { ScannedFile(path: CardPath(name), size: size, mtime: 0) }

    static func staged(_ name: String, size: Int64) -> IngestEvent {
        .staged(StagedFile(file: file(name, size: size), fingerprint: Fingerprint(high: 1, low: 2), deduplicated: false, verified: false))
    }

    static func scanned(files: Int, bytes: Int64) -> IngestEvent {
        var totals = ScanTotals()
        totals.toStage = files
        totals.toStageBytes = bytes
        return .scanned(totals)
    }

    @Test func aBigFileMovesAsEachOfItsPartsIsAcknowledgedNotOnlyWhenItVerifies() {
        let progress = JobProgress(uploads: true)
        let clip = Self.upload("clip", size: 4 << 30, partSize: 16 * Self.mib)
        progress.record(.upload(.queued(clip)))
        for number in 1...3 {
            progress.record(.upload(.partUploaded(clip, number: number, partCount: 256, bytes: 16 * Self.mib)))
        }
        var upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesUploaded == 48 * Self.mib)
        #expect(upload.bytesToUpload == 4 << 30)
        #expect(upload.objectsUploaded == 0)

        progress.record(.upload(.completed(clip, alreadyThere: false)))
        upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesUploaded == 4 << 30, "the rest of the object counts once, at its completion")
        #expect(upload.objectsUploaded == 1)
    }

    @Test func aStreamedFileCountsFromItsStartItsPartsAsTheyLandAndItsObjectOnceWhenItCompletes() {
        let progress = JobProgress(uploads: true)
        let clip = Self.upload("clip", size: 40 * Self.mib, partSize: 16 * Self.mib)
        progress.record(.upload(.streamStarted(key: clip.key, path: CardPath("DCIM/CLIP.MP4"), size: clip.size)))
        progress.record(
            .upload(.partStreamed(key: clip.key, path: CardPath("DCIM/CLIP.MP4"), number: 1, partCount: 3, bytes: 16 * Self.mib)))
        var upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesToUpload == 40 * Self.mib && upload.objectsToUpload == 1)
        #expect(upload.bytesUploaded == 16 * Self.mib)

        progress.record(.upload(.queued(clip)))
        upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesToUpload == 40 * Self.mib && upload.objectsToUpload == 1, "queued once staged: not twice")
        progress.record(.upload(.completed(clip, alreadyThere: false)))
        upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesUploaded == 40 * Self.mib && upload.objectsUploaded == 1)
    }

    @Test func anAbortedStreamGivesBackWhatItCountedAndTheContentsUploadCountsOnItsOwn() {
        let progress = JobProgress(uploads: true)
        let path = CardPath("VIDEO/copy.MP4")
        progress.record(.upload(.streamStarted(key: "k/copy", path: path, size: 40 * Self.mib)))
        progress.record(.upload(.partStreamed(key: "k/copy", path: path, number: 1, partCount: 3, bytes: 16 * Self.mib)))
        progress.record(.upload(.streamAborted(key: "k/copy", path: path)))
        let existing = Self.upload("original", size: 40 * Self.mib, partSize: 16 * Self.mib)
        progress.record(.upload(.queued(existing)))
        progress.record(.upload(.completed(existing, alreadyThere: true)))
        let upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesToUpload == 40 * Self.mib && upload.objectsToUpload == 1)
        #expect(upload.bytesUploaded == 40 * Self.mib && upload.objectsUploaded == 1)
    }

    @Test func aResumedUploadCountsThePartsTheServerHasUpFrontButTheRateOnlyWhatIsSentNow() {
        let start = ContinuousClock.now
        let progress = JobProgress(uploads: true, now: start)
        let clip = Self.upload("clip", size: 100 * Self.mib, partSize: 10 * Self.mib)
        progress.record(.upload(.queued(clip)))
        _ = progress.snapshot(now: start)
        progress.record(.upload(.resuming(clip, acknowledgedBytes: 60 * Self.mib)))
        progress.record(.upload(.partUploaded(clip, number: 7, partCount: 10, bytes: 10 * Self.mib)))
        let upload = try! #require(progress.snapshot(now: start + .seconds(2)).upload)
        #expect(upload.bytesUploaded == 70 * Self.mib)
        #expect(upload.rate == Double(5 * Self.mib), "10 MiB sent in 2 s; the 60 MiB already there are no speed")
    }

    @Test func contentFoundInTheBucketCountsAsUploadedButAddsNothingToTheRate() {
        let start = ContinuousClock.now
        let progress = JobProgress(uploads: true, now: start)
        let photo = Self.upload("photo", size: 8 * Self.mib)
        progress.record(.upload(.queued(photo)))
        _ = progress.snapshot(now: start)
        progress.record(.upload(.completed(photo, alreadyThere: true)))
        let sent = Self.upload("sent", size: 4 * Self.mib)
        progress.record(.upload(.queued(sent)))
        progress.record(.upload(.completed(sent, alreadyThere: false)))  // a single PutObject: its body, whole
        let upload = try! #require(progress.snapshot(now: start + .seconds(4)).upload)
        #expect(upload.bytesUploaded == 12 * Self.mib)
        #expect(upload.objectsUploaded == 2)
        #expect(upload.rate == Double(Self.mib))
    }

    @Test func theTimeBeforeTheFirstUploadIsQueuedIsNoSlownessOfTheLink() {
        let start = ContinuousClock.now
        let progress = JobProgress(uploads: true, now: start)
        _ = progress.snapshot(now: start)  // scanning, copying the first file
        let clip = Self.upload("clip", size: 100 * Self.mib, partSize: 10 * Self.mib)
        progress.record(.upload(.queued(clip)))
        _ = progress.snapshot(now: start + .seconds(10))
        progress.record(.upload(.partUploaded(clip, number: 1, partCount: 10, bytes: 10 * Self.mib)))
        #expect(progress.snapshot(now: start + .seconds(12)).upload?.rate == Double(5 * Self.mib))
    }

    @Test func aFailedUploadLeavesTheBytesToUploadWithWhatOfItLanded() {
        let progress = JobProgress(uploads: true)
        let big = Self.upload("big", size: 30 * Self.mib, partSize: 10 * Self.mib)
        let small = Self.upload("small", size: 5 * Self.mib)
        progress.record(.upload(.queued(big)))
        progress.record(.upload(.queued(small)))
        progress.record(.upload(.partUploaded(big, number: 1, partCount: 3, bytes: 10 * Self.mib)))
        progress.record(.upload(.failed(big, UploadError(exitStatus: .partial, scope: .object, message: "no"))))
        let upload = try! #require(progress.snapshot().upload)
        #expect(upload.bytesToUpload == 15 * Self.mib)
        #expect(upload.bytesUploaded == 10 * Self.mib)
        #expect(upload.objectsToUpload == 1)
    }

    @Test func anUploadMovedToAnotherKeyCountsItsPartsAgainFromNothing() {
        let progress = JobProgress(uploads: true)
        let clip = Self.upload("clip", size: 30 * Self.mib, partSize: 10 * Self.mib)
        progress.record(.upload(.queued(clip)))
        progress.record(.upload(.partUploaded(clip, number: 1, partCount: 3, bytes: 10 * Self.mib)))
        progress.record(.upload(.keyTaken(clip, newKey: "k/clip~x", foundSize: 1, foundFingerprint: "none")))
        #expect(progress.snapshot().upload?.bytesUploaded == 0)
        for number in 1...3 { progress.record(.upload(.partUploaded(clip, number: number, partCount: 3, bytes: 10 * Self.mib))) }
        progress.record(.upload(.completed(clip, alreadyThere: false)))
        #expect(progress.snapshot().upload?.bytesUploaded == 30 * Self.mib)
    }

    @Test func whileCopyingTheFilesNotCopiedYetAreExpectedToUploadUntilCopyingEnds() throws {
        let progress = JobProgress(uploads: true)
        let state = TemporaryDirectory()
        progress.record(Self.scanned(files: 3, bytes: 30 * Self.mib))
        progress.record(.stagingStarted(Stager(area: try StagingArea(root: state.path + "/staging"))))
        progress.record(.upload(.queued(Self.upload("a", size: 10 * Self.mib))))
        progress.record(Self.staged("a", size: 10 * Self.mib))
        var snapshot = progress.snapshot()
        #expect(snapshot.copying)
        #expect(snapshot.filesCopied == 1)
        #expect(snapshot.upload?.bytesToUpload == 30 * Self.mib)

        // The card is pulled out: the two files not reached are no longer waited for.
        progress.record(.stagingEnded)
        snapshot = progress.snapshot()
        #expect(!snapshot.copying)
        #expect(snapshot.upload?.bytesToUpload == 10 * Self.mib)
        #expect(snapshot.text == "copied 1 file (0 B) · uploaded 0 B/10.0 MiB")
    }

    @Test func aStagedFileNoObjectCanBeMadeOfIsCountedAsCopiedOnce() {
        let progress = JobProgress(uploads: true)
        progress.record(Self.scanned(files: 2, bytes: 20))
        progress.record(Self.staged("a", size: 10))
        progress.record(.failed(Self.file("a", size: 10), StageFailure(kind: .notUploadable("key too long"))))
        #expect(progress.snapshot().filesCopied == 1)
        progress.record(.failed(Self.file("b", size: 10), StageFailure(kind: .vanished)))
        #expect(progress.snapshot().filesCopied == 2)
        #expect(!progress.snapshot().copying)
    }

    @Test func theEndOfACardsRunLeavesNothingOutstanding() {
        let progress = JobProgress(uploads: true)
        let done = Self.upload("done", size: 10)
        progress.record(.upload(.queued(done)))
        progress.record(.upload(.queued(Self.upload("interrupted", size: 20, partSize: 5))))
        progress.record(.upload(.partUploaded(Self.upload("interrupted", size: 20, partSize: 5), number: 1, partCount: 4, bytes: 5)))
        progress.record(.upload(.completed(done, alreadyThere: false)))
        progress.record(.finished(RunSummary(volume: "card")))
        let snapshot = progress.snapshot()
        #expect(snapshot.upload?.bytesToUpload == 15)
        #expect(snapshot.upload?.bytesUploaded == 15)
        #expect(snapshot.eta == 0)
    }

    // MARK: the snapshot told

    static func copyingSnapshot() -> ProgressSnapshot {
        var snapshot = ProgressSnapshot(seconds: 10)
        snapshot.filesToCopy = 201
        snapshot.filesCopied = 120
        snapshot.bytesToCopy = 2 << 30
        snapshot.bytesCopied = 1 << 30
        snapshot.copying = true
        snapshot.copyRate = Double(128 * mib)
        snapshot.upload = .init(
            objectsToUpload: 120, objectsUploaded: 40, bytesToUpload: 2 << 30, bytesUploaded: 512 * mib, rate: Double(64 * mib))
        return snapshot
    }

    @Test func theLineTellsCopyingAndUploadingWithTheTimeUntilTheLastObjectIsVerified() {
        var snapshot = Self.copyingSnapshot()
        // Copying needs 8 s more, uploading 24 s: the card is in the bucket in 24 s.
        #expect(snapshot.text == "copied 120/201 files (1.0 GiB/2.0 GiB, 128.0 MiB/s) · uploaded 512.0 MiB/2.0 GiB (64.0 MiB/s) · ETA 0:24")

        snapshot.copying = false
        snapshot.filesCopied = 201
        snapshot.copyRate = nil
        #expect(snapshot.text == "copied 201 files (1.0 GiB) · uploaded 512.0 MiB/2.0 GiB (64.0 MiB/s) · ETA 0:24")

        // A resume copies nothing; before a part lands there is no rate, and no ETA.
        snapshot.filesToCopy = 0
        snapshot.upload?.rate = nil
        #expect(snapshot.text == "uploaded 512.0 MiB/2.0 GiB")
    }

    @Test func theETAIsTheLaterOfCopyingAndUploading() {
        var snapshot = Self.copyingSnapshot()
        snapshot.upload?.rate = Double(1 << 30)  // 1.5 GiB left at 1 GiB/s: 1.5 s; copying needs 8 s
        #expect(snapshot.eta == 8)
        snapshot.copyRate = nil
        #expect(snapshot.eta == nil, "copying's rate is not known yet")
        snapshot.upload = nil  // --no-upload
        snapshot.copyRate = Double(256 * Self.mib)
        #expect(snapshot.eta == 4)
        #expect(snapshot.text == "copied 120/201 files (1.0 GiB/2.0 GiB, 256.0 MiB/s) · ETA 0:04")
    }

    @Test func theProgressEventCarriesTheSameNumbersForPrograms() throws {
        let json = Self.copyingSnapshot().json
        #expect(json["event"] == "progress")
        #expect(json["files_copied"] == .int(120))
        #expect(json["bytes_to_copy"] == .int(2 << 30))
        #expect(json["bytes_uploaded"] == .int(512 * Self.mib))
        #expect(json["bytes_to_upload"] == .int(2 << 30))
        #expect(json["upload_rate"] == .int(64 * Self.mib))
        #expect(json["eta_seconds"] == .int(24))
        #expect(json["copying"] == .bool(true))
        var staging = Self.copyingSnapshot()
        staging.upload = nil
        #expect(staging.json["bytes_uploaded"] == nil, "a job that uploads nothing has no upload numbers")
    }

    // MARK: the rate's window

    @Test func theRateIsThatOfTheLastHalfMinuteAndFollowsAChange() {
        let start = ContinuousClock.now
        var window = RateWindow()
        window.add(0, at: start)
        #expect(window.rate(100, at: start + .milliseconds(500)) == nil, "half a second is too soon to tell")
        #expect(window.rate(100, at: start + .seconds(1)) == 100)
        // 100 per second for a minute, then 10 per second for 40 s: the rate is 10 again.
        var count: Int64 = 0
        for second in 1...100 {
            count += second <= 60 ? 100 : 10
            window.add(count, at: start + .seconds(second))
        }
        #expect(window.rate(count, at: start + .seconds(100)) == 10)
    }

    @Test func samplesSoonerThanTheSpacingAreNotKept() {
        let start = ContinuousClock.now
        var window = RateWindow(span: .seconds(10), slots: 10)
        window.add(0, at: start)
        for tick in 1..<1000 { window.add(0, at: start + .milliseconds(tick)) }  // many readers, nothing moving
        // Had the ring kept every sample, its oldest would be 10 ms before the second's end,
        // and the rate 1980 a second.
        #expect(window.rate(2000, at: start + .seconds(2)) == 1000)
    }
}

/// The events that feed the job's progress are in the NDJSON too, for programs that count.
@Suite struct ProgressEventJSONTests {
    @Test func aQueuedUploadAndAResumedOneWithItsAcknowledgedBytesAreEvents() {
        let clip = JobProgressTests.upload("0123456789ab", size: 30 << 20, partSize: 5 << 20)
        let queued = IngestEvent.upload(.queued(clip)).json
        #expect(queued["event"] == "upload_queued")
        #expect(queued["upload_id"] == "0123456789ab")
        #expect(queued["size"] == .int(30 << 20))
        let resuming = IngestEvent.upload(.resuming(clip, acknowledgedBytes: 10 << 20)).json
        #expect(resuming["event"] == "upload_resuming")
        #expect(resuming["acknowledged_bytes"] == .int(10 << 20))
        #expect(IngestEvent.stagingEnded.json == ["event": "staging_ended"])
    }
}
