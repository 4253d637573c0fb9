import IngestKit

/// `ingest --version`: our version and the C libraries actually linked.
enum BuildInfo {
    static let version = "0.1.0"
    static var versionLine: String {
        "ingest \(version) (\(LinkedLibraries.summary))"
    }
}
