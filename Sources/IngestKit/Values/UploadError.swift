/// Why an upload did not end in a verified object, sorted by what it means for the rest of
/// the run: a destination problem (credentials, endpoint, bucket) stops every upload of the
/// run, since each would fail the same way; a problem of one object stops only that one.
public struct UploadError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Scope: Sendable, Equatable, Codable {
        /// Every upload to this destination would fail the same way: stop starting new ones.
        case destination
        /// Only this object.
        case object
    }

    /// What the process exit status says: 77 credentials, 69 endpoint, 78 bucket,
    /// 76 integrity, 1 for other failures of single objects, 73 for the journal.
    public var exitStatus: ExitStatus
    public var scope: Scope
    /// The whole message: what failed, the server's words, what to do.
    public var message: String

    public init(exitStatus: ExitStatus, scope: Scope, message: String) {
        self.exitStatus = exitStatus
        self.scope = scope
        self.message = message
    }

    public var description: String { message }
}
