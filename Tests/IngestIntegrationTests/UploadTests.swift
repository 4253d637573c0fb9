import Foundation
import Glibc
import IngestTestSupport
import Testing

/// `ingest PATH` end to end against a real SeaweedFS: what lands, byte for byte, with its
/// labels; what a kill -9 costs; what each destination problem says. The aws CLI is the
/// oracle for what the bucket holds.
@Suite(.serialized)
final class UploadTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    /// A configuration with small parts, so that a few MiB make a multipart upload. Without
    /// `streamParts`, a file's parts are sent only once it is staged, from the journal: what
    /// the tests of a journalled multipart upload's kills and resumes follow.
    func config(_ extra: String = "", streamParts: Bool = true, in dir: TemporaryDirectory) throws -> String {
        let text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            parts_in_flight = 4
            stream_parts = \(streamParts)
            [s3]
            stall_timeout = "5s"
            connect_timeout = "2s"
            [device]
            id = "station-7"
            \(extra)
            """
        return try dir.write("ingest.toml", Array(text.utf8))
    }

    func ingest(
        _ arguments: [String], state: TemporaryDirectory, config: String, secret: String? = nil,
        environment extra: [String: String] = [:]
    ) throws -> IngestRun {
        var environment = server.awsEnvironment
        if let secret { environment["AWS_SECRET_ACCESS_KEY"] = secret }
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            arguments + ["--state-dir", state.path, "--json"], environment: environment.merging(extra) { $1 })
    }

    func destination(bucket: String? = nil) -> [String] {
        ["--endpoint", server.endpoint, "--bucket", bucket ?? self.bucket]
    }

    func object(_ key: String, into dir: TemporaryDirectory) throws -> String {
        let path = dir.path + "/download-\(UUID().uuidString)"
        let result = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, path])
        guard result.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: result) }
        return path
    }

    func json(_ arguments: [String]) throws -> [String: Any] { try server.json(arguments) }

    /// The listing of the cards' objects in `bucket`, their ASC MHL histories and the
    /// bucket's marker (`.ingest/bucket-id`) aside.
    func cardObjects(in bucket: String) throws -> [[String: Any]] {
        let listed = try json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        return listed.filter {
            let key = $0["Key"] as? String
            return key?.contains("/ascmhl/") != true && key?.hasPrefix(".ingest/") != true
        }
    }

    /// The object's tags, as `aws s3api get-object-tagging` reads them.
    func tags(_ key: String) throws -> [String: String] {
        (try json(["s3api", "get-object-tagging", "--bucket", bucket, "--key", key])["TagSet"] as? [[String: String]] ?? [])
            .reduce(into: [String: String]()) { $0[$1["Key"]!] = $1["Value"] }
    }

    func openMultipartUploads() throws -> [[String: Any]] { try server.openMultipartUploads(bucket: bucket) }

    /// The staged copies under their content addresses (`<2 hex>/<xxh128>`), outside the
    /// hidden `.partial/`, `.spare/`, `.freeing/` and `.damaged/`.
    func stagedCopies(_ state: TemporaryDirectory) throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: state.path + "/staging").filter { !$0.hasPrefix(".") && $0.count > 3 }
    }

    func pendingUploads(_ state: TemporaryDirectory, config: String) throws -> [[String: Any]] {
        try ingest(["status"], state: state, config: config).events("pending_upload")
    }

    @Test(.timeLimit(.minutes(5)))
    func aCardOfManyFilesLeavesNoLockFilePerUploadBehind() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let count = 60
        for i in 0..<count { _ = try card.write("DCIM/IMG_\(1000 + i).JPG", randomBytes(2_000 + i)) }
        _ = try card.write("DCIM/CLIP.MP4", randomBytes(11 << 20))  // a multipart upload among them
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let run = try ingest([card.path] + destination(), state: state, config: config)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.events("uploaded").count == count + 1)
        let listed = try cardObjects(in: bucket)
        #expect(listed.count == count + 1, "every file is on the server")
        let locks = try FileManager.default.contentsOfDirectory(atPath: state.path + "/locks").sorted()
        #expect(
            locks.contains("uploads.lock") && locks.filter { $0 != "uploads.lock" && $0 != "streams.lock" }.count == 1,
            "the card's lock file, and one lock file for every upload (and one for every stream): \(locks)")
    }

    /// A card's upload queue is the journal, read a page of 256 uploads at a time: uploads
    /// an earlier run left pending, more than a page of them, are all sent by the next run;
    /// and a card of more files than a page, copied ahead of its uploads, lands whole.
    @Test(.timeLimit(.minutes(5)))
    func pendingUploadsBeyondAPageOfTheQueueAreAllUploadedAndACardOfMoreFilesThanAPageLandsWhole() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let count = 300
        for i in 0..<count { _ = try card.write("DCIM/\(100 + i / 100)MEDIA/DJI_\(i).SRT", randomBytes(100 + i)) }
        _ = try card.write("DCIM/copy.SRT", try Array(Data(contentsOf: URL(fileURLWithPath: card.path + "/DCIM/100MEDIA/DJI_7.SRT"))))
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let refused = try ingest([card.path] + destination(), state: state, config: config, secret: "wrong-\(UInt32.random(in: 0...UInt32.max))")
        #expect(refused.status == 77, "\(refused.stderr)")
        #expect(refused.summary?.int("staged") == count + 1)
        #expect(refused.summary?.int("upload_not_attempted") == count + 1, "one upload per file (one a copy), none sent")
        let pending = try ingest(["status"], state: state, config: config).events("status").first
        #expect(pending?.int("files_staged") == count + 1 && pending?.int("files_uploaded") == 0)

        let resumed = try ingest([card.path] + destination(), state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.summary?.int("staged") == 0, "the card is known: nothing is copied again")
        #expect(resumed.events("uploaded").count == count + 1)
        #expect(Set(resumed.events("upload_queued").compactMap { $0.string("upload_id") }).count == count + 1)
        #expect(resumed.summary?.int("copied_in_bucket") == 1, "the file of a known content is copied by the server")
        #expect(try pendingUploads(state, config: config).isEmpty)
        let status = try ingest(["status"], state: state, config: config).events("status").first
        #expect(status?.int("files_uploaded") == count + 1)

        try server.createBucket("whole")
        let fresh = TemporaryDirectory()
        let whole = try ingest([card.path] + destination(bucket: "whole"), state: fresh, config: config)
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(whole.summary?.int("uploaded") == count + 1)
        let listed = try cardObjects(in: "whole")
        #expect(listed.count == count + 1, "every file is on the server, at its own key")
        #expect(try pendingUploads(fresh, config: config).isEmpty)
    }

    /// Files staged with `--no-upload` are planned by the next run a page of 512 at a time:
    /// more than a page of them all land, each checked against its fingerprint before it is
    /// sent (their CRC32Cs were not kept from the card).
    @Test(.timeLimit(.minutes(5)))
    func filesStagedWithoutUploadBeyondAPageAreAllPlannedAndUploadedByTheNextRun() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let count = 600
        for i in 0..<count { _ = try card.write("DCIM/\(100 + i / 200)MEDIA/DJI_\(i).SRT", randomBytes(50 + i)) }
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let staged = try ingest([card.path, "--no-upload"], state: state, config: config)
        #expect(staged.status == 0, "\(staged.stderr)")
        #expect(staged.summary?.int("staged") == count)

        let uploaded = try ingest([card.path] + destination(), state: state, config: config)
        #expect(uploaded.status == 0, "\(uploaded.stderr)")
        #expect(uploaded.events("uploaded").count == count)
        #expect(uploaded.events("upload_resuming").count == count, "each staged copy is checked before it is sent")
        let listed = try cardObjects(in: bucket)
        #expect(listed.count == count)
        let status = try ingest(["status"], state: state, config: config).events("status").first
        #expect(status?.int("files_uploaded") == count)
    }

    /// Two cards holding the same photos, ingested at once into one journal and one bucket:
    /// each content's upload is planned by one process and may be run by either; the other
    /// card's file of that content is a copy, which waits for the upload, in its own process
    /// or the other. Each file lands at its own key, each content's bytes are sent once, and
    /// neither run fails.
    @Test(.timeLimit(.minutes(5)))
    func twoCardsWithTheSamePhotosIngestedAtOnceSendEachContentOnceAndLandEveryFileAndNeitherFails() throws {
        let dir = TemporaryDirectory()
        let contents = (0..<150).map { _ in randomBytes(3000) }
        let cards = [TemporaryDirectory(), TemporaryDirectory()]
        for card in cards {
            for (index, content) in contents.enumerated() { _ = try card.write("DCIM/\(index).JPG", content) }
        }
        let state = TemporaryDirectory()
        let environment = server.awsEnvironment.merging(["INGEST_CONFIG": try config(in: dir)]) { $1 }

        let runs = try cards.map {
            try IngestRun.start([$0.path] + destination() + ["--state-dir", state.path, "--json"], environment: environment)
        }
        let results = try runs.map { IngestRun(result: try $0.wait(timeout: 240)) }

        for result in results {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.summary?.int("failed") == 0)
        }
        #expect(results.compactMap { $0.summary?.int("uploaded") }.reduce(0, +) == 2 * contents.count, "an object a file")
        #expect(
            results.compactMap { $0.summary?.int("uploaded_bytes") }.reduce(0, +) == contents.count * 3000,
            "each content's bytes sent once")
        let landed = TemporaryDirectory()
        let copied = try server.aws(
            ["s3", "cp", "--recursive", "--quiet", "--exclude", ".ingest/*", "s3://\(bucket)/", landed.path])  // the marker aside
        #expect(copied.status == 0)
        // Each card's ASC MHL history aside.
        let sums = try xxh128sums(under: landed.path).filter { !String(decoding: $0.key, as: UTF8.self).contains("/ascmhl/") }
        #expect(sums.count == 2 * contents.count, "one object a file")
        #expect(Set(sums.values) == Set(try xxh128sums(under: cards[0].path).values))
    }

    @Test(.timeLimit(.minutes(5)))
    func everyFileLandsByteForByteWithItsLabelsAndASecondRunSendsNothing() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let photo = randomBytes(3 << 20)
        let sources = [
            try card.write("DCIM/100MEDIA/DJI_0001.JPG", photo),
            try card.write("DCIM/100MEDIA/DJI 0002 é+$.MP4", randomBytes((23 << 20) + 7)),
            try card.write("MISC/empty.log", []),
            try card.write("ingest-scene.toml", Array("scene = \"flood-survey\"\n[tags]\nsite = \"km12\"\n".utf8)),
        ]
        _ = try card.write("DCIM/100MEDIA/copy-of-0001.JPG", photo)
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let first = try ingest([card.path, "--tag", "operator=li"] + destination(), state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        let uploaded = first.events("uploaded")
        #expect(uploaded.count == 5, "five files, five objects: the copy made by the server from its original")
        let status = try ingest(["status"], state: state, config: config).events("status").first
        #expect(status?.int("files_uploaded") == 5)
        #expect(first.events("part_uploaded").count == 5, "the 23 MiB file went as five parts of 5 MiB")
        #expect(first.summary?.int("uploaded") == 5)
        #expect(first.summary?.int("copied_in_bucket") == 1)

        let listed = try cardObjects(in: bucket)
        #expect(listed.count == 5)
        for source in sources {
            let relative = String(source.dropFirst(card.path.count + 1))
            let key = try #require(
                listed.compactMap { $0["Key"] as? String }.first { $0.hasSuffix("/" + relative) }, "no object for \(relative)")
            #expect(key.hasPrefix("station-7/"), "\(key)")
            #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)), "\(key)")
            let head = try json(["s3api", "head-object", "--bucket", bucket, "--key", key])
            let metadata = head["Metadata"] as? [String: String] ?? [:]
            let tags = try self.tags(key)
            // The 23 MiB file's parts went out as it was copied: its fingerprint is in its tag.
            let streamed = relative.hasSuffix(".MP4")
            #expect((streamed ? tags : metadata)["xxh128"] == (try xxh128sum(source)), "\(key)")
            #expect((streamed ? metadata : tags)["xxh128"] == nil, "\(key)")
            #expect(metadata["scene"] == "flood-survey")
            #expect(metadata["operator"] == "li")
            #expect(metadata["device"] == "station-7")
            #expect(tags["scene"] == "flood-survey")
            #expect(tags["device"] == "station-7")
        }
        let stagedLeft = try stagedCopies(state)
        #expect(stagedLeft.isEmpty, "verified objects free their staged copies: \(stagedLeft)")
        // Their inodes stay as spare files for the next card's copies: emptied, but for those of
        // 64 KiB or less (the scene file), whose blocks the next copies are written over.
        let spares = try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.spare")
        #expect(!spares.isEmpty)
        for spare in spares {
            let size = try FileManager.default.attributesOfItem(atPath: state.path + "/staging/.spare/" + spare)[.size] as? Int
            #expect(size.map { $0 <= 64 << 10 } == true, "spare \(spare) holds \(size ?? -1) bytes")
        }

        let second = try ingest([card.path] + destination(), state: state, config: config)
        #expect(second.status == 0)
        #expect(second.events("upload_preparing").isEmpty)
        #expect(second.events("part_uploaded").isEmpty)
        #expect(try pendingUploads(state, config: config).isEmpty)
    }

    /// The parts' CRC32Cs come from the card's bytes, so a staged copy damaged on disk
    /// between staging and upload is refused by the server, not uploaded; its files go back
    /// to pending, and the next ingest copies them afresh.
    @Test(.timeLimit(.minutes(5)))
    func aStagedCopyDamagedBeforeItsUploadIsRefusedAndCopiedAgain() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let sources = [
            try card.write("DCIM/small.JPG", randomBytes(1 << 20)),
            try card.write("DCIM/large.MP4", randomBytes((12 << 20) + 3)),
        ]
        let state = TemporaryDirectory()
        let config = try config(streamParts: false, in: dir)

        let damaged = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_DAMAGE_STAGED": "1"])
        #expect(damaged.status == 76, "\(damaged.stderr)")
        #expect(damaged.events("uploaded").isEmpty)
        #expect(damaged.stderr.contains("no longer has its fingerprint"), "\(damaged.stderr)")
        // Proven wrong by a re-read, the copies are moved aside for a person, never deleted.
        let aside = try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.damaged")
        #expect(aside.count == 2, "\(aside)")
        let listed = try json(["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "station-7/"])["Contents"] as? [[String: Any]] ?? []
        #expect(!listed.contains { ($0["Key"] as? String)?.contains("/DCIM/small.JPG") == true || ($0["Key"] as? String)?.contains("/DCIM/large.MP4") == true })
        let status = try ingest(["status"], state: state, config: config).events("status").first
        #expect(status?.int("files_pending") == 2, "both files are pending again: \(String(describing: status))")

        let again = try ingest([card.path] + destination(), state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.events("uploaded").count == 2)
        for source in sources {
            let name = String(source.dropFirst(card.path.count + 1))
            let key = try #require(again.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("/" + name) })
            #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        }
    }

    /// Also: a staged copy goes only once its object verified and that is on disk (a batch of
    /// copies after one sync of the journal), so a kill before then leaves it for the resume,
    /// which deletes it.
    @Test(.timeLimit(.minutes(5)))
    func aKillDuringPartsCostsOnlyTheMissingPartsOnResume() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let photo = try card.write("DCIM/A_PHOTO.JPG", randomBytes(1 << 20))
        let source = try card.write("DCIM/long-flight.MP4", randomBytes(120 << 20))
        let state = TemporaryDirectory()
        let config = try config(streamParts: false, in: dir)
        let partCount = 24
        let stagedCopy = { (file: String) throws -> String in
            let hex = try xxh128sum(file)
            return "\(state.path)/staging/\(hex.prefix(2))/\(hex)"
        }

        // Killed half way through the clip. The photo, staged first and sent alone, is most
        // often uploaded by then, but nothing orders its PUT before the clip's parts (a loaded
        // server answered it after 12 of them): the test follows either fate, and asks of each
        // what a kill may cost.
        let killed = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-parts:12"])
        #expect(killed.status == SIGKILL, "the hook kills the process: \(killed.stderr)")
        let photoDone = killed.events("uploaded").compactMap { $0.string("path") } == ["DCIM/A_PHOTO.JPG"]
        #expect(photoDone || killed.events("uploaded").isEmpty, "\(killed.events("uploaded"))")
        #expect(
            FileManager.default.fileExists(atPath: try stagedCopy(photo)),
            "the photo's copy waits for a sync that makes its completion durable, which the kill came before")
        #expect(FileManager.default.fileExists(atPath: try stagedCopy(source)), "the clip's copy stays for the resume")
        let pending = try pendingUploads(state, config: config)
        #expect(pending.count == (photoDone ? 1 : 2))
        let clipPending = pending.first { $0.string("path") == "DCIM/long-flight.MP4" }
        #expect(clipPending?.string("phase") == "uploading", "\(pending)")
        let open = try openMultipartUploads()
        #expect(open.count == 1)
        let uploadID = try #require(open.first?["UploadId"] as? String)
        let key = try #require(open.first?["Key"] as? String)
        let onServer = (try json(["s3api", "list-parts", "--bucket", bucket, "--key", key, "--upload-id", uploadID])["Parts"]
            as? [[String: Any]] ?? []).count
        #expect(onServer >= 12)

        let resumed = try ingest(["resume"], state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let sent = resumed.events("part_uploaded").count
        #expect(sent <= partCount - onServer + 1, "sent \(sent) parts; the server had \(onServer) of \(partCount)")
        #expect(sent >= partCount - onServer)
        #expect(resumed.events("upload_reconciling").filter { $0.string("key") == key }.count == 1)
        // A photo uploaded before the kill is not sent again; one still pending is, once.
        let resumedPhoto = resumed.events("uploaded").filter { $0.string("path") == "DCIM/A_PHOTO.JPG" }
        #expect(resumedPhoto.count == (photoDone ? 0 : 1), "\(resumedPhoto)")
        #expect(try openMultipartUploads().isEmpty)
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        let photoKey = try #require((killed.events("uploaded") + resumedPhoto).first?.string("key"))
        #expect(try xxh128sum(try object(photoKey, into: dir)) == (try xxh128sum(photo)))
        #expect(try pendingUploads(state, config: config).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: try stagedCopy(photo)), "the resume let the photo's copy go")
        #expect(!FileManager.default.fileExists(atPath: try stagedCopy(source)), "and the clip's")
    }

    /// A log that grew on the card while the upload of its old content was still pending
    /// (killed after the server completed it, before the journal knew), its new content
    /// staged with `--no-upload`: finishing the old upload does not count the new content as
    /// uploaded, and the next run sends it, beside the old one. Both land, downloaded.
    @Test(.timeLimit(.minutes(5)))
    func aFileThatGrewWhileItsOldContentsUploadWasPendingLandsInItsNewContentToo() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let path = try card.write("LOGS/run.log", randomBytes(30_000))
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let old = try xxh128sum(path)

        let killed = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-complete"])
        #expect(killed.status == SIGKILL)
        #expect(try pendingUploads(state, config: config).count == 1)

        let log = try #require(FileHandle(forWritingAtPath: path))
        try log.seekToEnd()
        try log.write(contentsOf: Data(randomBytes(5_000)))
        try log.close()
        let new = try xxh128sum(path)
        let staged = try ingest([card.path, "--no-upload"], state: state, config: config)
        #expect(staged.status == 0, "\(staged.stderr)")
        #expect(staged.summary?.int("staged") == 1)

        let resumed = try ingest(["resume"], state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let next = try ingest([card.path] + destination(), state: state, config: config)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.events("uploaded").count == 1, "the new content is sent by the next run")

        let sent = try #require(next.events("uploaded").first?.string("key"))
        let cardPrefix = String(sent[..<(sent.range(of: "LOGS/")?.lowerBound ?? sent.endIndex)])
        let listed = try json(["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", cardPrefix])["Contents"]
            as? [[String: Any]] ?? []
        let landed = try listed.compactMap { $0["Key"] as? String }.filter { !$0.contains("/ascmhl/") }
            .map { try xxh128sum(try object($0, into: dir)) }
        #expect(Set(landed) == [old, new] && landed.count == 2, "\(listed.compactMap { $0["Key"] })")
    }

    @Test(.timeLimit(.minutes(5)))
    func aKillBetweenCompleteAndTheJournalIsRecognisedWithoutSendingAPart() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let source = try card.write("clip.MP4", randomBytes(12 << 20))
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let killed = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-complete"])
        #expect(killed.status == SIGKILL)
        #expect(try pendingUploads(state, config: config).first?.string("phase") == "completing")

        let again = try ingest([card.path] + destination(), state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.events("part_uploaded").isEmpty)
        #expect(again.events("upload_initiating").isEmpty)
        #expect(again.events("uploaded").first?["already_there"] as? Bool == true)
        let key = try #require(again.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        #expect(try pendingUploads(state, config: config).isEmpty)
        // Its parts went out as it was copied, so the kill also came before its fingerprint's
        // tag: the resume proved the object ours by its checksum, then tagged it.
        #expect(try tags(key)["xxh128"] == (try xxh128sum(source)))
    }

    @Test(.timeLimit(.minutes(5)))
    func aLargeFilesPartsGoOutAsItIsCopiedAndItsFingerprintTagIsReadByAwsAndIngestLs() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let source = try card.write("DCIM/CLIP_0001.MP4", randomBytes((21 << 20) + 3))
        let state = TemporaryDirectory()
        let config = try config(in: dir)

        let run = try ingest([card.path] + destination(), state: state, config: config)
        #expect(run.status == 0, "\(run.stderr)")
        let parts = run.events("part_uploaded")
        #expect(parts.count == 5 && parts.allSatisfy { $0["streamed"] as? Bool == true })
        #expect(run.events("upload_initiating").isEmpty, "the stream created the upload")
        let key = try #require(run.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        #expect(try tags(key) == ["xxh128": try xxh128sum(source), "device": "station-7"])
        #expect(try openMultipartUploads().isEmpty)

        let listed = try ingest(["ls"] + destination(), state: state, config: config)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.events("object").first?.string("xxh128") == (try xxh128sum(source)))
    }

    /// A copy of 64 MiB or more is not kept as a spare once its object verified: it leaves
    /// staging through `.freeing/`, deleted there by a process of its own.
    @Test(.timeLimit(.minutes(5)))
    func aLargeCopyIsDeletedApartOnceItsObjectVerifiedAndNotKeptAsASpare() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let source = try card.write("DCIM/CLIP_0002.MP4", randomBytes((64 << 20) + 4099))
        let state = TemporaryDirectory()

        let run = try ingest([card.path] + destination(), state: state, config: try config(in: dir))
        #expect(run.status == 0, "\(run.stderr)")
        let key = try #require(run.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        let staging = state.path + "/staging"
        #expect(try stagedCopies(state).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging + "/.spare").isEmpty)
        var left = try FileManager.default.contentsOfDirectory(atPath: staging + "/.freeing")
        for _ in 0..<1000 where !left.isEmpty {
            usleep(10_000)
            left = try FileManager.default.contentsOfDirectory(atPath: staging + "/.freeing")
        }
        #expect(left.isEmpty, "the deleting process did not delete \(left)")
    }

    @Test(.timeLimit(.minutes(5)))
    func aStreamOfContentTheBucketHoldsIsAbortedAndTheFileIsCopiedByTheServer() throws {
        let dir = TemporaryDirectory()
        let first = TemporaryDirectory()
        let second = TemporaryDirectory()
        let bytes = randomBytes(16 << 20)
        _ = try first.write("DCIM/CLIP_0001.MP4", bytes)
        _ = try second.write("VIDEO/copy.MP4", bytes)
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        #expect(try ingest([first.path] + destination(), state: state, config: config).status == 0)

        let again = try ingest([second.path] + destination(), state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.events("stream_aborted").count == 1)
        #expect(again.summary?.int("copied_in_bucket") == 1 && again.summary?.int("uploaded_bytes") == 0)
        let listed = try cardObjects(in: bucket)
        #expect(listed.count == 2, "one object a file, the second copied by the server")
        #expect(try openMultipartUploads().isEmpty, "the stream's upload is aborted")
    }

    @Test(.timeLimit(.minutes(5)))
    func aKillWhileAFilesPartsStreamLosesNothingAndLeavesNoUploadOpen() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let source = try card.write("DCIM/CLIP_0001.MP4", randomBytes(40 << 20))
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let killed = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-parts:2"])
        #expect(killed.status == SIGKILL)
        #expect(try openMultipartUploads().count == 1, "the stream's upload, which no journal knows")

        let again = try ingest([card.path] + destination(), state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        let key = try #require(again.events("uploaded").first?.string("key"))
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
        // Copied again and streamed again, or, when the kill came after its copy was journalled,
        // sent from that copy the ordinary way: its fingerprint in the metadata then.
        let metadata = try json(["s3api", "head-object", "--bucket", bucket, "--key", key])["Metadata"] as? [String: String]
        #expect([try tags(key)["xxh128"], metadata?["xxh128"]].contains(try xxh128sum(source)))
        #expect(try openMultipartUploads().isEmpty, "the upload at the same key aborted the one the kill left")
    }

    @Test(.timeLimit(.minutes(5)))
    func abortLeavesNoMultipartUploadOnTheServerAndNoLocalState() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("big.MP4", randomBytes(40 << 20))
        let state = TemporaryDirectory()
        let config = try config(streamParts: false, in: dir)
        _ = try ingest(
            [card.path] + destination(), state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-parts:2"])
        let id = try #require(try pendingUploads(state, config: config).first?.string("upload_id"))
        #expect(try openMultipartUploads().count == 1)

        let abort = try ingest(["abort", String(id.prefix(6))], state: state, config: config)
        #expect(abort.status == 0, "\(abort.stderr)")
        #expect(try openMultipartUploads().isEmpty)
        #expect(try pendingUploads(state, config: config).isEmpty)
        let again = try ingest(["abort", id], state: state, config: config)
        #expect(again.status == 64, "the journal no longer knows it: \(again.stderr)")
        #expect(again.stderr.contains("ingest status"))
    }

    /// `abort` and `forget` both refuse a completed upload, saying why and what to do; and
    /// `status` tells the objects its uploads wrote from the files, so that a file uploaded
    /// twice (changed in between) does not read as a contradiction.
    @Test(.timeLimit(.minutes(5)))
    func aCompletedUploadIsNeitherAbortedNorForgottenAndStatusCountsObjectsApartFromFiles() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/a.JPG", randomBytes(70_000))
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let first = try ingest([card.path] + destination(), state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        let id = try #require(first.events("uploaded").first?.string("upload_id"))

        for command in ["abort", "forget"] {
            let refused = try ingest([command, id], state: state, config: config)
            #expect(refused.status == 64, "\(command): \(refused.stderr)")
            #expect(refused.stderr.contains("it is completed"), "\(command): \(refused.stderr)")
            #expect(refused.stderr.contains("nothing pending to abort or forget"), "\(command): \(refused.stderr)")
            #expect(refused.stderr.contains("Delete the object with an S3 client"), "\(command): \(refused.stderr)")
        }
        #expect(try cardObjects(in: bucket).count == 1)

        // The file changes on the card: its new content is another object; the first stays.
        _ = try card.write("DCIM/a.JPG", randomBytes(90_000))
        let second = try ingest([card.path] + destination(), state: state, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try cardObjects(in: bucket).count == 2)

        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        let status = try IngestRun.ingest(["status", "--state-dir", state.path], environment: environment)
        let text = status.result.stdoutText
        #expect(text.contains("  uploaded  1 "), "one file: \(text)")
        #expect(text.contains("Objects uploaded: 2 "), "two objects: \(text)")
        #expect(text.contains("a changed file's earlier contents and other buckets count too"), "\(text)")
        #expect(!text.contains("Uploads completed"), "\(text)")
    }

    /// A run whose bucket is missing is refused before its card is read and never says
    /// "verified", and the advice is given once, by `ls` as by a run.
    @Test(.timeLimit(.minutes(5)))
    func aRunThatFailedNeverSaysVerifiedAndAMissingBucketsAdviceIsGivenOnce() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/a.JPG", randomBytes(1000))
        let config = try config(in: dir)
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        func advice(_ text: String) -> Int { text.components(separatedBy: "--bucket").count - 1 }

        let run = try IngestRun.ingest(
            [card.path, "--state-dir", TemporaryDirectory().path] + destination(bucket: "no-such-bucket"),
            environment: environment)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(!run.stderr.contains(", verified") && !run.stderr.contains("and verified"), "\(run.stderr)")
        // Refused before the card is read, as every run is whose bucket is missing.
        #expect(!run.stderr.contains("Staged "), "\(run.stderr)")
        #expect(advice(run.stderr) == 1, "\(run.stderr)")

        let listed = try IngestRun.ingest(["ls"] + destination(bucket: "no-such-bucket"), environment: environment)
        #expect(listed.status == 78, "\(listed.stderr)")
        #expect(listed.stderr.contains("does not exist"), "\(listed.stderr)")
        #expect(advice(listed.stderr) == 1, "\(listed.stderr)")
    }

    @Test(.timeLimit(.minutes(5)))
    func destinationProblemsEndWithTheirCauseAndExitStatusAndLoseNothing() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let source = try card.write("DCIM/a.JPG", randomBytes(1 << 20))
        _ = try card.write("ingest-scene.toml", Array("scene = \"survey\"\n".utf8))
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let wrongSecret = "wrong-secret-\(UInt32.random(in: 0...UInt32.max))"

        let refused = try ingest(
            [card.path, "-vv"] + destination(), state: state, config: config, secret: wrongSecret)
        #expect(refused.status == 77, "\(refused.stderr)")
        #expect(refused.stderr.contains("refused the credentials"))
        #expect(["SignatureDoesNotMatch", "InvalidAccessKeyId", "HTTP 403"].contains { refused.stderr.contains($0) })
        for text in [refused.stderr, refused.result.stdoutText] {
            #expect(!text.contains(wrongSecret), "a secret reached the output")
            #expect(!text.contains(server.secretKey))
        }
        #expect(refused.summary?.int("staged") == 2, "the card is safe in staging whatever the destination says")

        let missing = try ingest(
            [card.path] + destination(bucket: "no-such-bucket"), state: TemporaryDirectory(), config: config)
        #expect(missing.status == 78, "\(missing.stderr)")
        #expect(missing.stderr.contains("does not exist"))
        #expect(try json(["s3api", "list-buckets"])["Buckets"].map { "\($0)" }?.contains("no-such-bucket") == false,
                "the bucket was asked for, not created")

        let port = try SeaweedFS.freePorts(1)[0]
        let unreachable = try ingest(
            [card.path, "--endpoint", "http://127.0.0.1:\(port)", "--bucket", bucket], state: TemporaryDirectory(),
            config: config)
        #expect(unreachable.status == 69, "\(unreachable.stderr)")
        #expect(unreachable.stderr.contains("cannot reach"))

        let conflict = try ingest([card.path, "--scene", "other"] + destination(), state: TemporaryDirectory(), config: config)
        #expect(conflict.status == 65, "\(conflict.stderr)")
        #expect(conflict.stderr.contains("scene"))

        let fixed = try ingest([card.path] + destination(), state: state, config: config)
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(fixed.events("uploaded").count == 2)
        let key = try #require(fixed.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("a.JPG") })
        #expect(try xxh128sum(try object(key, into: dir)) == (try xxh128sum(source)))
    }

    @Test(.timeLimit(.minutes(5)))
    func faultsBetweenIngestAndTheServerCostRetriesNeverACorruptOrMissingObject() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        var sources: [String: String] = [:]
        for (name, size) in [("DCIM/A.MP4", 12 << 20), ("DCIM/B.MP4", (11 << 20) + 3), ("DCIM/c.jpg", 700_000),
                             ("DCIM/d.jpg", 900_001), ("log.txt", 4096)] {
            let path = try card.write(name, randomBytes(size))
            sources[name] = try xxh128sum(path)
        }
        let proxy = try FaultProxy(upstreamPort: server.s3Port, rules: [
            FaultRule(.reset, "PUT", "partNumber=", every: 2, count: 2, fraction: 0.5),
            FaultRule(.stall, "PUT", "partNumber=", after: 3, count: 1, seconds: 60),
            FaultRule(.slowdown, "*", "*", every: 4, count: 3),
            FaultRule(.error500, "POST", "uploadId=", count: 1),
        ])
        defer { proxy.stop() }
        let state = TemporaryDirectory()
        let config = try config(in: dir)
        let run = try ingest(
            [card.path, "--endpoint", proxy.endpoint, "--bucket", bucket], state: state, config: config)
        #expect(run.status == 0, "\(run.stderr)")
        let stats = try proxy.stats()
        for action in [FaultRule.Action.reset, .stall, .slowdown, .error500] {
            #expect(stats.injected(action) >= 1, "the proxy injected no \(action): \(stats.injected)")
        }
        let uploaded = run.events("uploaded")
        #expect(uploaded.count == sources.count)
        for event in uploaded {
            let key = try #require(event.string("key"))
            let name = try #require(sources.keys.first { key.hasSuffix("/" + $0) })
            #expect(try xxh128sum(try object(key, into: dir)) == sources[name], "\(key)")
        }
        #expect(try openMultipartUploads().isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func anExpiredSessionTokenIsNamedAsTheCauseAndNoSecretIsPrinted() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("a.jpg", randomBytes(100_000))
        let token = "session-token-\(UInt32.random(in: 0...UInt32.max))"
        let helper = try dir.write("credentials.sh", Array("""
            #!/bin/sh
            echo '{"Version": 1, "AccessKeyId": "\(server.accessKey)", "SecretAccessKey": "\(server.secretKey)",
              "SessionToken": "\(token)", "Expiration": "2020-01-01T00:00:00Z"}'
            """.utf8))
        chmod(helper, 0o700)
        let awsConfig = try dir.write("aws-config", Array("[default]\ncredential_process = \(helper)\n".utf8))
        chmod(awsConfig, 0o600)
        let state = TemporaryDirectory()
        var environment = server.awsEnvironment.filter { !$0.key.hasPrefix("AWS_ACCESS") && !$0.key.hasPrefix("AWS_SECRET") }
        environment["AWS_CONFIG_FILE"] = awsConfig
        environment["AWS_SHARED_CREDENTIALS_FILE"] = dir.path + "/no-credentials-file"
        environment["INGEST_CONFIG"] = try config(in: dir)
        let run = try IngestRun.ingest(
            [card.path, "-vv", "--json", "--state-dir", state.path] + destination(), environment: environment)
        #expect(run.status == 77, "\(run.stderr)")
        #expect(run.stderr.contains("expired"), "\(run.stderr)")
        for text in [run.stderr, run.result.stdoutText] {
            #expect(!text.contains(token), "the session token reached the output")
            #expect(!text.contains(server.secretKey), "the secret reached the output")
        }
        #expect(run.summary?.int("staged") == 1, "the card is staged while the credentials are fixed")
    }
}
