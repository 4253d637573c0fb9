import Foundation

/// The job's progress at one moment (``JobProgress/snapshot(now:)``), and the three ways it
/// is told: a line for people (the terminal, systemd's `STATUS=`), and a `progress` event for
/// programs.
public struct ProgressSnapshot: Sendable, Equatable {
    /// The uploads' side: bytes sent of the bytes to put in the bucket.
    public struct Upload: Sendable, Equatable {
        public var objectsToUpload = 0
        public var objectsUploaded = 0
        /// Queued uploads, and while copying the files not copied yet; less what failed.
        public var bytesToUpload: Int64 = 0
        /// In the bucket, and on the wire to it (``JobProgress``).
        public var bytesUploaded: Int64 = 0
        /// In the bucket: acknowledged by the server.
        public var bytesAcknowledged: Int64 = 0
        /// Bytes per second on the wire, over the last half minute; nil until known.
        public var rate: Double?

        public init(
            objectsToUpload: Int = 0, objectsUploaded: Int = 0, bytesToUpload: Int64 = 0, bytesUploaded: Int64 = 0,
            bytesAcknowledged: Int64? = nil, rate: Double? = nil
        ) {
            self.objectsToUpload = objectsToUpload
            self.objectsUploaded = objectsUploaded
            self.bytesToUpload = bytesToUpload
            self.bytesUploaded = bytesUploaded
            self.bytesAcknowledged = bytesAcknowledged ?? bytesUploaded
            self.rate = rate
        }

        /// Still to send.
        var bytesLeft: Int64 { max(bytesToUpload - bytesUploaded, 0) }
        /// Not yet acknowledged.
        var bytesUnacknowledged: Int64 { max(bytesToUpload - bytesAcknowledged, 0) }
    }

    /// Since the job began.
    public var seconds: Double
    public var filesToCopy = 0
    /// Files staged or failed.
    public var filesCopied = 0
    public var bytesToCopy: Int64 = 0
    /// Bytes read from the card so far, the file being copied included.
    public var bytesCopied: Int64 = 0
    /// Files are still being copied.
    public var copying = false
    /// Bytes per second read from the card, over the last half minute, while copying.
    public var copyRate: Double?
    /// nil for a job that uploads nothing (`--no-upload`).
    public var upload: Upload?

    public init(seconds: Double) { self.seconds = seconds }

    /// Seconds until the last object should be verified in the bucket (or, uploading nothing,
    /// the last file copied): the later of what copying and uploading each have left at their
    /// rates. nil while a rate needed is not known yet.
    public var eta: Double? {
        var copyLeft: Double? = 0
        if copying {
            let bytes = max(bytesToCopy - bytesCopied, 0)
            copyLeft = copyRate.flatMap { $0 > 0 ? Double(bytes) / $0 : nil }
        }
        guard let upload else { return copying ? copyLeft : nil }
        guard upload.bytesLeft > 0 else { return copying ? copyLeft : 0 }
        guard let copyLeft, let rate = upload.rate, rate > 0 else { return nil }
        return max(copyLeft, Double(upload.bytesLeft) / rate)
    }

    /// Whether there is anything to tell yet: files to copy or uploads queued.
    public var hasWork: Bool { filesToCopy > 0 || (upload?.objectsToUpload ?? 0) > 0 }

    /// Everything known so far is copied and in the bucket (the summary is due).
    public var isDone: Bool { !copying && (upload?.bytesUnacknowledged ?? 0) == 0 }

    /// One line for people, like
    /// `copied 120/201 files (1.2 GiB/1.8 GiB, 150.0 MiB/s) · uploaded 600.0 MiB/1.8 GiB (40.0 MiB/s) · ETA 0:42`.
    public var text: String {
        var pieces: [String] = []
        if filesToCopy > 0 {
            if copying {
                var piece = "copied \(filesCopied)/\(filesToCopy) files (\(ByteCount(bytesCopied))/\(ByteCount(bytesToCopy))"
                if let copyRate { piece += ", \(Self.rate(copyRate))" }
                pieces.append(piece + ")")
            } else {
                pieces.append("copied \(counted(filesCopied, "file")) (\(ByteCount(bytesCopied)))")
            }
        }
        if let upload, upload.objectsToUpload > 0 || copying {
            var piece = "uploaded \(ByteCount(upload.bytesUploaded))/\(ByteCount(upload.bytesToUpload))"
            if let rate = upload.rate { piece += " (\(Self.rate(rate)))" }
            pieces.append(piece)
        }
        if let eta { pieces.append("ETA \(Self.clock(eta))") }
        return pieces.joined(separator: " · ")
    }

    /// The `progress` NDJSON event: counts in files, objects and bytes, rates in bytes per
    /// second, `eta_seconds` once it is known; the upload's keys only for a job that uploads.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "progress", "seconds": .double(seconds), "copying": .bool(copying),
            "files_to_copy": .int(filesToCopy), "files_copied": .int(filesCopied),
            "bytes_to_copy": .int(bytesToCopy), "bytes_copied": .int(bytesCopied),
        ]
        object["copy_rate"] = copyRate.map { .int(Int64($0.rounded())) }
        if let upload {
            object["objects_to_upload"] = .int(upload.objectsToUpload)
            object["objects_uploaded"] = .int(upload.objectsUploaded)
            object["bytes_to_upload"] = .int(upload.bytesToUpload)
            object["bytes_uploaded"] = .int(upload.bytesUploaded)
            object["bytes_acknowledged"] = .int(upload.bytesAcknowledged)
            object["upload_rate"] = upload.rate.map { .int(Int64($0.rounded())) }
        }
        object["eta_seconds"] = eta.map { .int(Int64($0.rounded())) }
        return object
    }

    static func rate(_ bytesPerSecond: Double) -> String { "\(ByteCount(Int64(bytesPerSecond.rounded())))/s" }

    /// `m:ss`, or `h:mm:ss` from an hour on.
    static func clock(_ seconds: Double) -> String {
        let total = Int(min(seconds, 359_999).rounded())
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60)
        return h > 0 ? String(format: "%d:%02d:%02d", h, m, s) : String(format: "%d:%02d", m, s)
    }
}
