/// How `ingest` ends, as a process exit status. The values follow sysexits(3) so that
/// scripts and systemd units can tell a bad card from a full disk from a busy lock.
public enum ExitStatus: Int32, Sendable, CaseIterable, Codable {
    /// Everything found was ingested or was already known.
    case success = 0
    /// The run finished, but some files could not be read; they stay pending for the next run.
    case partial = 1
    /// The command line was wrong.
    case usage = 64
    /// Tags or metadata are invalid: a key given two values, a reserved key, a control
    /// character, or beyond S3's limits; or the card's scene file is refused (a link, a FIFO,
    /// too large, setting the station's labels). Checked before anything is uploaded.
    case dataError = 65
    /// The path to ingest does not exist, is not a directory, or cannot be read; or the
    /// device is not a card ingest may take (no file system, mounted at a system place, a
    /// file-system type not allowed) or cannot be mounted or unmounted.
    case noInput = 66
    /// The S3 endpoint (or, for `watch`, udev) could not be reached, or kept failing; staged
    /// files wait for the next run.
    case unavailable = 69
    /// A bug: something that should not happen did.
    case software = 70
    /// The state directory or staging area cannot be written, or is full; or the journal is
    /// there and cannot be read (never taken for an empty one).
    case cantCreate = 73
    /// The card failed or disappeared while it was being read.
    case ioError = 74
    /// Another `ingest` holds this card or the journal; try again later.
    case busy = 75
    /// An uploaded object did not verify: its size, fingerprint or digest on the server is
    /// not what was sent.
    case integrity = 76
    /// The credentials are missing, or the server refused them.
    case noPermission = 77
    /// The configuration file is wrong.
    case config = 78

    /// One line per status, for `--help` and the man page.
    public var meaning: String {
        switch self {
        case .success: "success: every file was ingested or was already known"
        case .partial: "some files could not be read; they stay pending for the next run"
        case .usage: "the command line is wrong"
        case .dataError: "tags or metadata are invalid (a key with two values, a reserved key, S3's limits), or the card's scene file is refused"
        case .unavailable: "the S3 endpoint (or udev, for watch) cannot be reached or keeps failing; staged files wait for the next run"
        case .noInput: "the path does not exist or cannot be read (for verify-card: a card never ingested here, or nothing mounted at the path); or the device is not a card, is mounted at a system place, has a file-system type not allowed, or cannot be mounted or unmounted"
        case .software: "internal error (a bug: please report it)"
        case .cantCreate: "the state directory or staging area cannot be written or is full, or the journal cannot be read"
        case .ioError: "the card failed or was removed while it was read"
        case .busy: "another ingest process holds this card or the journal (with --device: exit 0 and a notice instead)"
        case .integrity: "an uploaded object did not verify (size, fingerprint or digest)"
        case .noPermission: "the credentials are missing or the server refused them"
        case .config: "the configuration is invalid (a bucket name S3 does not allow, too; a configuration or AWS shared file that is not a regular file of at most 1 MiB), or the bucket does not exist, or an https:// endpoint's server speaks plain http"
        }
    }
}

/// Every way an ingest can fail as a whole. Each message says what happened and what to do.
/// Failures of single files are not errors of the run: they are reported and the run goes on.
public enum IngestError: Error, Sendable, Equatable, CustomStringConvertible {
    case sourceUnavailable(path: String, reason: String)
    case config(file: String?, key: String?, problem: String)
    case stagingFull(stagingPath: String, needed: Int64, available: Int64, reserve: Int64)
    case stagingUnwritable(SystemError)
    case stateUnusable(path: String, reason: String)
    /// The journal is there but cannot be opened or read (``Journal/openForReading(path:)``):
    /// nothing can be said of what was ingested, and a report of zeros would be a lie.
    case journalUnreadable(path: String, reason: String, remedy: String)
    case volumeBusy(volume: String, lockPath: String)
    /// The card went while it was read: `cause` is the read that failed, `evidence` what
    /// showed the card itself gone (its device, its mount, its root), not only a file.
    case volumeLost(volume: String, cause: SystemError, evidence: String)
    /// `--device` names something that is not a card: not a block device, no file system,
    /// unknown to udev.
    case notACard(device: String, reason: String)
    /// The device's file system is mounted somewhere no card belongs (`/`, `/boot`, `/home`…).
    case systemDevice(device: String, mountPoint: String)
    /// The card's file system type is not one ingest lets the kernel parse (`[device] file_systems`).
    case fileSystemRefused(device: String, fsType: String, allowed: [String])
    /// The card's file system could not be mounted (or its mount point made).
    case mountFailed(device: String, mountPoint: String, reason: String)
    /// What ingest mounted for the card could not be unmounted (`ingest unmount-card`), or
    /// the device names no place ingest mounts at.
    case unmountFailed(device: String, mountPoint: String, reason: String)
    /// Another ingest process holds the card's device (it is mounting or ingesting it).
    case deviceBusy(device: String, lockPath: String)
    /// udev's event monitor cannot be used (`ingest watch`).
    case udevUnavailable(SystemError)
    /// Uploading failed in a way that stops the run (the destination is unusable), or
    /// a command on one upload failed; the status says which.
    case upload(UploadError)
    /// Tags or metadata of a card cannot be applied; nothing of it was uploaded, and it is staged.
    case labels(String)
    /// The run's own tags or metadata (the configuration's, `--scene`, `--tag`) cannot be
    /// applied: found before any card is touched, so nothing was staged or uploaded.
    case runLabels(String)
    /// No upload in the journal has this id.
    case unknownUpload(String)
    /// No file in the journal has this id (`file-N`).
    case unknownFile(String)
    /// An upload (or a file) is named by `id`, and there is no journal at all.
    case nothingIngested(journal: String, hint: String, id: String)
    /// Several uploads start with these digits.
    case ambiguousUpload(String, matches: [String])
    /// A command on one upload cannot be done in its phase.
    case uploadRefused(id: String, reason: String)
    /// The metrics file (`ingest rescan`) cannot be written; the work it reports is done.
    case metricsUnwritable(path: String, reason: String)
    /// `verify-card` was given a card this station never ingested, or a mount point with no
    /// card mounted: nothing there is known to be anywhere, so nothing is safe to erase.
    case cardUnknown(path: String, reason: String, remedy: String)

    public var exitStatus: ExitStatus {
        switch self {
        case .sourceUnavailable, .cardUnknown: .noInput
        case .config: .config
        case .stagingFull, .stagingUnwritable, .stateUnusable, .journalUnreadable, .metricsUnwritable: .cantCreate
        case .volumeBusy, .deviceBusy: .busy
        case .volumeLost: .ioError
        case .notACard, .systemDevice, .mountFailed, .unmountFailed, .fileSystemRefused: .noInput
        case .udevUnavailable: .unavailable
        case .upload(let error): error.exitStatus
        case .labels, .runLabels: .dataError
        case .unknownUpload, .unknownFile, .nothingIngested, .ambiguousUpload, .uploadRefused: .usage
        }
    }

    public var description: String {
        switch self {
        case let .sourceUnavailable(path, reason):
            return "cannot ingest \(path): \(reason). Check that the card is mounted and the path is right."
        case let .config(file, key, problem):
            let place = [file, key.map { "key '\($0)'" }].compactMap { $0 }.joined(separator: ", ")
            return "invalid configuration\(place.isEmpty ? "" : " (\(place))"): \(problem)"
        case let .stagingFull(path, needed, available, reserve):
            return "staging area \(path) is full: \(ByteCount(needed)) needed, "
                + "\(ByteCount(available)) free above the \(ByteCount(reserve)) reserve. "
                + "Nothing was lost; free space (uploads clean staging) or lower [staging] reserve, then run again."
        case let .stagingUnwritable(error):
            return "cannot write to the staging area: \(error). Check the state directory's disk and permissions."
        case let .stateUnusable(path, reason):
            return "cannot use the state directory \(path): \(reason). "
                + "Choose another with --state-dir or INGEST_STATE_DIR, or fix its permissions."
        case let .journalUnreadable(path, reason, remedy):
            return "cannot read the journal \(path): \(reason). \(remedy)"
        case let .volumeBusy(volume, lockPath):
            return "\(volume) is being ingested by another ingest process (lock \(lockPath)); "
                + "nothing to do now, it will finish there."
        case .upload(let error):
            return error.description
        case .unknownUpload(let id):
            return "no upload with id '\(id)' in the journal. `ingest status` lists the pending uploads and their ids."
        case .unknownFile(let id):
            return "no file with id '\(id)' in the journal. `ingest status` lists the quarantined files and their ids (file-N)."
        case let .nothingIngested(journal, hint, id):
            return "no upload or file with id '\(id)': nothing ingested yet, there is no journal at \(journal). " + hint
        case let .ambiguousUpload(id, matches):
            return "'\(id)' matches several uploads (\(matches.joined(separator: ", "))); give more digits."
        case let .uploadRefused(id, reason):
            return "upload \(id): \(reason)"
        case .labels(let problem):
            return "\(problem) Nothing was uploaded; the files are staged and upload once this is fixed."
        case .runLabels(let problem):
            return "\(problem) Nothing was staged or uploaded: fix this, then run again."
        case let .cardUnknown(path, reason, remedy):
            return "\(path) is \(reason): NOT safe to erase. \(remedy)"
        case let .metricsUnwritable(path, reason):
            return "cannot write the metrics file \(path): \(reason). The run's work is done and recorded; "
                + "make the directory exist and writable, or change [rescan] metrics_file or --metrics-file."
        case let .volumeLost(volume, cause, evidence):
            return "\(volume) failed while it was being read (\(cause)): \(evidence). "
                + "Files not yet staged stay pending; reinsert the card and run again."
        case let .notACard(device, reason):
            return "cannot ingest \(device): \(reason)."
        case let .systemDevice(device, mountPoint):
            return "refusing to ingest \(device): its file system is mounted at \(mountPoint), outside the places "
                + "for removable media (/media, /run/media), so it may be a system's own (a Raspberry Pi's root "
                + "is on an SD card, a data disk under /mnt). If it really is a card, unmount it and let ingest mount "
                + "it, or ingest it by path: ingest \(mountPoint)"
        case let .fileSystemRefused(device, fsType, allowed):
            return "refusing to ingest \(device): its file system claims to be \(fsType), and ingest lets the kernel "
                + "parse only \(allowed.joined(separator: ", ")) from a card (every other driver is more kernel code "
                + "a crafted card can reach). If this card is yours, add \(fsType) to [device] file_systems"
        case let .mountFailed(device, mountPoint, reason):
            return "cannot mount \(device) read-only at \(mountPoint): \(reason)."
        case let .unmountFailed(device, mountPoint, reason):
            return "cannot unmount \(device) from \(mountPoint): \(reason). Nothing is lost; "
                + "see what holds it with `fuser -vm \(mountPoint)`, then run `ingest unmount-card \(device)` again."
        case let .deviceBusy(device, lockPath):
            return "\(device) is being ingested by another ingest process (lock \(lockPath)); "
                + "nothing to do now, it will finish there."
        case .udevUnavailable(let error):
            return "cannot listen to udev's events (\(error)). `ingest watch` needs a running udevd "
                + "(systemd-udevd) and root; without one, ingest cards with `ingest --device` or by path."
        }
    }
}
