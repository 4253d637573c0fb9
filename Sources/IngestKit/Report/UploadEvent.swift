/// What the uploader reports, phase by phase. Each names the logical upload id, which is
/// what `ingest status`, `resume`, `abort` and `forget` take.
public enum UploadEvent: Sendable {
    /// Handed to a run of uploads, which starts it when one of its file slots frees: the
    /// job's bytes to upload (``JobProgress``) count from here.
    case queued(UploadRecord)
    /// Planned now (a new upload of a staged file's content).
    case preparing(UploadRecord)
    /// Taken up again from the journal, in the phase an earlier run left it, with the bytes
    /// of the parts the journal holds as acknowledged (they count as uploaded up front).
    case resuming(UploadRecord, acknowledgedBytes: Int64)
    /// `CreateMultipartUpload` (or the single `PutObject`) is being sent.
    case initiating(UploadRecord)
    /// The journal's parts are compared with the server's (`ListParts`).
    case reconciling(UploadRecord)
    /// Another upload of the record's key is being sent (another station with the same
    /// card, under a key template any station computes alike): waited for, not sent twice.
    case waitingForUpload(UploadRecord, uploadID: String)
    /// An upload of the record's key that its sender left (no part for `[upload]
    /// adopt_after`) is taken over: only the parts it lacks are sent.
    case takingOver(UploadRecord, uploadID: String)
    /// A part is acknowledged and journalled.
    case partUploaded(UploadRecord, number: Int, partCount: Int, bytes: Int64)
    /// The parts of a file still being staged go out as it is copied (`[upload]
    /// stream_parts`): its upload was created; it counts as to upload from here.
    case streamStarted(key: String, path: CardPath, size: Int64)
    /// A part of a file still being staged is acknowledged (`[upload] stream_parts`): no
    /// upload is journalled for it yet, so it names the key and the file. It counts as
    /// sent; the object counts as uploaded once completed and verified.
    case partStreamed(key: String, path: CardPath, number: Int, partCount: Int, bytes: Int64)
    /// The streamed parts of the file at `path` were given up (its upload aborted): the file
    /// is uploaded once staged, or its content is in the bucket already.
    case streamAborted(key: String, path: CardPath)
    /// Temporary credentials were renewed mid-upload.
    case refreshingCredentials
    /// `CompleteMultipartUpload` is being sent.
    case completing(UploadRecord)
    /// The object is in the bucket and verified. `alreadyThere`: nothing was sent, because
    /// the bucket held it already (content dedupe, or a previous run that was killed after
    /// completing it).
    case completed(UploadRecord, alreadyThere: Bool)
    case failed(UploadRecord, UploadError)
    /// Given up on the user's request; the server freed what it held.
    case aborted(UploadRecord)
    /// The record's key holds an object with other bytes (another card, another station):
    /// nothing is replaced, and the content goes to `newKey`
    /// (``KeyTemplate/alternativeKey(_:fingerprint:)``).
    case keyTaken(UploadRecord, newKey: String, foundSize: Int64, foundFingerprint: String)
    /// The upload failed `upload.quarantine_after` runs in a row: it is quarantined (and still
    /// tried), and every run that meets it ends with a non-zero status until it succeeds.
    case quarantined(UploadRecord, failures: Int)
    /// The server ignores `If-None-Match: *`: every write to it is preceded by a `HEAD`,
    /// which leaves two writers to one key a race.
    case conditionalWritesNotHonoured(S3Destination, reason: String)
    /// The server gave back no CRC32C for a write that carried one (Ceph RGW before Squid):
    /// its uploads not yet begun go with `Content-MD5`, which it checks, and are proven by
    /// their MD5 ETags (``ReadyDestination/keepsChecksums``).
    case checksumsNotKept(S3Destination)
    /// No configured gateway, nor the bucket id they show, is known to the journal
    /// (``DestinationIdentity/isNew``): said once, before the first upload.
    case newDestination(S3Destination, bucketID: String?)
    /// A configured gateway shows another bucket than the destination's (``DestinationIdentity``):
    /// it is never written through.
    case foreignGateway(S3Destination, gateway: String, shows: MarkerSight, bucketID: String?)
    /// What this process took up that a process which stopped uncleanly left.
    case recovered(Recovery)
}

/// What a process takes up from one that stopped without ending its run (killed, crashed,
/// or the power went out): said once, by the first run after it.
public struct Recovery: Sendable, Equatable {
    /// Processes found gone without ending their runs.
    public var uncleanStops = 0
    /// Streams of large files (parts sent as the file was copied) adopted as their files'
    /// uploads, and the parts they kept.
    public var streamsAdopted = 0
    public var streamedPartsKept = 0
    /// Streams aborted because their file's copy never completed: the card's next run sends
    /// those files again.
    public var streamsAborted = 0
    /// Uploads pending in the journal now, and the parts the server acknowledged of them.
    public var uploadsPending = 0
    public var partsKept = 0
    /// Files that need their card again: not staged, or their staged copy lost (`ingest
    /// status` lists them).
    public var filesNeedingCard = 0

    public init() {}

    /// Whether there is anything to say.
    public var isEmpty: Bool { uncleanStops == 0 && streamsAdopted == 0 && streamsAborted == 0 }

    /// One line for people.
    public var text: String {
        let what = uncleanStops > 0 ? "after an unclean stop" : "from an interrupted run"
        let resume = uploadsPending == 1 ? "resumes" : "resume"
        var line = "recovered \(what): \(counted(uploadsPending, "upload")) \(resume) with \(counted(partsKept, "part")) kept"
        if streamsAdopted > 0 {
            line += " (\(counted(streamsAdopted, "streamed file")) adopted, \(counted(streamedPartsKept, "part")))"
        }
        if streamsAborted > 0 {
            line += "; \(counted(streamsAborted, "streamed file")) whose copy did not finish "
                + (streamsAborted == 1 ? "starts" : "start") + " over"
        }
        line += "; " + (filesNeedingCard == 1 ? "1 file needs its card again" : "\(filesNeedingCard) files need their card again")
        if filesNeedingCard > 0 { line += " (ingest status lists them)" }
        return line
    }
}

extension UploadEvent {
    var json: [String: JSONValue] {
        func object(_ name: String, _ record: UploadRecord) -> [String: JSONValue] {
            [
                "event": .string(name), "upload_id": .string(record.id), "key": .string(record.key),
                "path": .string(record.sourceDisplay), "size": .int(record.size), "xxh128": .string(record.fingerprint),
            ]
        }
        switch self {
        case .queued(let record):
            return object("upload_queued", record)
        case .preparing(let record):
            var json = object("upload_preparing", record)
            json["bucket"] = .string(record.bucket)
            json["multipart"] = .bool(record.partSize != nil)
            return json
        case let .resuming(record, acknowledgedBytes):
            var json = object("upload_resuming", record)
            json["phase"] = .string(record.phase.rawValue)
            json["acknowledged_bytes"] = .int(acknowledgedBytes)
            json["restart_count"] = .int(record.restartCount)
            return json
        case .initiating(let record):
            return object("upload_initiating", record)
        case .reconciling(let record):
            return object("upload_reconciling", record)
        case let .waitingForUpload(record, uploadID):
            var json = object("upload_waiting", record)
            json["other_upload_id"] = .string(uploadID)
            return json
        case let .takingOver(record, uploadID):
            var json = object("upload_taking_over", record)
            json["other_upload_id"] = .string(uploadID)
            return json
        case let .partUploaded(record, number, partCount, bytes):
            var json = object("part_uploaded", record)
            json["part"] = .int(number)
            json["parts"] = .int(partCount)
            json["part_size"] = .int(bytes)
            return json
        case let .partStreamed(key, path, number, partCount, bytes):
            return [
                "event": "part_uploaded", "key": .string(key), "path": .string(path.display), "part": .int(number),
                "parts": .int(partCount), "part_size": .int(bytes), "streamed": .bool(true),
            ]
        case let .streamStarted(key, path, size):
            return ["event": "stream_started", "key": .string(key), "path": .string(path.display), "size": .int(size)]
        case let .streamAborted(key, path):
            return ["event": "stream_aborted", "key": .string(key), "path": .string(path.display)]
        case .refreshingCredentials:
            return ["event": "credentials_refreshing"]
        case .completing(let record):
            return object("upload_completing", record)
        case let .completed(record, alreadyThere):
            var json = object("uploaded", record)
            json["already_there"] = .bool(alreadyThere)
            return json
        case let .failed(record, error):
            var json = object("upload_failed", record)
            json["message"] = .string(error.message)
            json["exit_status"] = .int(error.exitStatus.rawValue)
            return json
        case .aborted(let record):
            return object("upload_aborted", record)
        case let .keyTaken(record, newKey, foundSize, foundFingerprint):
            var json = object("key_taken", record)
            json["new_key"] = .string(newKey)
            json["found_size"] = .int(foundSize)
            json["found_xxh128"] = .string(foundFingerprint)
            return json
        case let .quarantined(record, failures):
            var json = object("upload_quarantined", record)
            json["failures"] = .int(Int64(failures))
            return json
        case .recovered(let recovery):
            return [
                "event": "recovered", "unclean_stops": .int(Int64(recovery.uncleanStops)),
                "uploads_pending": .int(Int64(recovery.uploadsPending)), "parts_kept": .int(Int64(recovery.partsKept)),
                "streams_adopted": .int(Int64(recovery.streamsAdopted)),
                "streamed_parts_kept": .int(Int64(recovery.streamedPartsKept)),
                "streams_aborted": .int(Int64(recovery.streamsAborted)),
                "files_needing_card": .int(Int64(recovery.filesNeedingCard)),
            ]
        case let .conditionalWritesNotHonoured(target, reason):
            return [
                "event": "conditional_writes_not_honoured", "bucket": .string(target.bucket),
                "endpoint": .string(target.endpoint), "message": .string(reason),
            ]
        case .checksumsNotKept(let target):
            return [
                "event": "checksums_not_kept", "bucket": .string(target.bucket), "endpoint": .string(target.endpoint),
                "part_digest": "MD5",
            ]
        case let .newDestination(target, bucketID):
            return [
                "event": "new_destination", "bucket": .string(target.bucket), "endpoint": .string(target.endpoint),
                "gateways": .string(target.gatewayURLs.joined(separator: ",")), "bucket_id": .string(bucketID ?? ""),
            ]
        case let .foreignGateway(target, gateway, shows, bucketID):
            return [
                "event": "foreign_gateway", "bucket": .string(target.bucket), "endpoint": .string(target.endpoint),
                "gateway": .string(gateway), "shows": .string(shows.description),
                "bucket_id": .string(bucketID ?? ""),
            ]
        }
    }
}
