import IngestKit

/// `ingest --version`: our version and the C libraries actually linked.
enum BuildInfo {
    static let version = IngestVersion.number
    static var versionLine: String {
        "ingest \(version) (\(LinkedLibraries.summary))"
    }
}
