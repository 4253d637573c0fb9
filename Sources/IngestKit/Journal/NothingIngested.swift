/// What a command that reads the journal says when there is none (no state directory, or one
/// without `journal.sqlite`): nothing was ingested with this state directory yet. Said as
/// such, with the place looked at, never as a report of zeros.
///
/// A user other than root looks in `~/.local/state/ingest` by default (for a system user,
/// `/nonexistent/.local/state/ingest`), not in the station's `/var/lib/ingest`: the message
/// says where the station's journal is, and how to read it.
public struct NothingIngested: Sendable, Equatable {
    /// The state directory looked at.
    public let statePath: String
    /// `sudo ingest <command>`, for the hint to a user other than root.
    public let command: String
    public let isRoot: Bool

    public init(statePath: String, command: String, isRoot: Bool = System.effectiveUserID == 0) {
        self.statePath = statePath
        self.command = command
        self.isRoot = isRoot
    }

    public var journalPath: String { StateDirectory.journalPath(in: statePath) }

    /// The station's state directory, root's default.
    static let stationPath = StateDirectory.defaultPath(environment: [:], isRoot: true)

    /// Where else the journal may be, and how to look there.
    public var hint: String {
        var hint = "If cards were ingested on this station, name the state directory they were ingested with "
            + "(--state-dir, INGEST_STATE_DIR or state_dir)"
        if !isRoot, statePath != Self.stationPath {
            hint += "; the station's own, \(Self.stationPath), is root's: sudo ingest \(command)"
        }
        return hint + "."
    }

    /// "Nothing ingested yet: there is no journal at …", and the hint.
    public var message: String { "Nothing ingested yet: there is no journal at \(journalPath). \(hint)" }

    /// The error of a command that names an upload or a file by `id`.
    public func error(id: String) -> IngestError { .nothingIngested(journal: journalPath, hint: hint, id: id) }
}
