import IngestKit

/// `ingest --version`: our version and the C libraries actually linked.
enum BuildInfo {
    static let version = IngestVersion.number
    /// A debug build says so: it carries the tests' fault hooks and runs slower, and
    /// `make install` and `make deb` refuse it on that word.
    #if DEBUG
    static let build = " debug build"
    #else
    static let build = ""
    #endif
    static var versionLine: String {
        "ingest \(version)\(build) (\(LinkedLibraries.summary))"
    }
}
