/// How `ingest` ends, as a process exit status. The values follow sysexits(3) so that
/// scripts and systemd units can tell a bad card from a full disk from a busy lock.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Everything found was ingested or was already known.
    case success = 0
    /// The run finished, but some files could not be read; they stay pending for the next run.
    case partial = 1
    /// The command line was wrong.
    case usage = 64
    /// The path to ingest does not exist, is not a directory, or cannot be read.
    case noInput = 66
    /// A bug: something that should not happen did.
    case software = 70
    /// The state directory or staging area cannot be written, or is full.
    case cantCreate = 73
    /// The card failed or disappeared while it was being read.
    case ioError = 74
    /// Another `ingest` holds this card or the journal; try again later.
    case busy = 75
    /// The configuration file is wrong.
    case config = 78

    /// One line per status, for `--help` and the man page.
    public var meaning: String {
        switch self {
        case .success: "success: every file was ingested or was already known"
        case .partial: "some files could not be read; they stay pending for the next run"
        case .usage: "the command line is wrong"
        case .noInput: "the path does not exist, is not a directory or cannot be read"
        case .software: "internal error (a bug: please report it)"
        case .cantCreate: "the state directory or staging area cannot be written, or is full"
        case .ioError: "the card failed or was removed while it was read"
        case .busy: "another ingest process holds this card or the journal"
        case .config: "the configuration is invalid"
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
    case volumeBusy(volume: String, lockPath: String)
    case volumeLost(volume: String, cause: SystemError)

    public var exitStatus: ExitStatus {
        switch self {
        case .sourceUnavailable: .noInput
        case .config: .config
        case .stagingFull, .stagingUnwritable, .stateUnusable: .cantCreate
        case .volumeBusy: .busy
        case .volumeLost: .ioError
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
        case let .volumeBusy(volume, lockPath):
            return "\(volume) is being ingested by another ingest process (lock \(lockPath)); "
                + "nothing to do now, it will finish there."
        case let .volumeLost(volume, cause):
            return "\(volume) failed while it was being read (\(cause)). "
                + "Files not yet staged stay pending; reinsert the card and run again."
        }
    }
}
