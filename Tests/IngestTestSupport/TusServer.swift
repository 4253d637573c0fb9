import Foundation
import Glibc

/// A real tus 1.0 server on 127.0.0.1 (tuspyserver under uvicorn, `scripts/tus_server.py`),
/// started for a test and stopped by its PID, its uploads in a temporary directory.
///
/// The script binds a port the system picks and prints it, so that servers started by tests
/// at the same time never race for one. Each upload is stored as ``dataDirectory``/ID (its
/// bytes, for comparing with `xxh128sum`) beside ID.info (JSON: what the server keeps of it,
/// ``storedInfo(uploadURL:)``).
///
/// tuspyserver answers HEAD with 400 for an upload whose metadata lacks `filename` and
/// `filetype` (its own rule, not the protocol's): uploads made against it send both.
///
/// A test writes `let server = try TusServer()` and `defer { server.stop() }`, so that the
/// server stops however the test ends.
public final class TusServer {
    public let directory = TemporaryDirectory()
    /// The bearer token every request must carry, if the server was started with one.
    public let bearer: String?
    public private(set) var port = 0
    private var server: ChildProcess!

    /// The creation URL: uploads are created by a POST here.
    public var creationURL: String { "http://127.0.0.1:\(port)/files/" }
    /// Where the server stores each upload's bytes and its `.info`.
    public var dataDirectory: String { directory.path + "/uploads" }
    /// The server's process, while it runs.
    public var pid: pid_t { server.pid }

    /// Starts the server; with `bearer`, it answers 401 to every request without
    /// `Authorization: Bearer <bearer>`. Throws when it does not listen within `timeout`.
    public init(bearer: String? = nil, timeout: TimeInterval = 30) throws {
        self.bearer = bearer
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/tus_server.py").path
        server = try ChildProcess(
            try TestVenv.tool("python"),
            ["-u", script, "--dir", dataDirectory, "--port", "0"] + (bearer.map { ["--bearer", $0] } ?? []))
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            // "listening 127.0.0.1:PORT"
            let words = server.standardOutputSoFar.split(separator: "\n").first?.split(separator: " ") ?? []
            if words.count == 2, words[0] == "listening", let port = words[1].split(separator: ":").last.flatMap({ Int($0) }) {
                self.port = port
                return
            }
            guard server.isRunning else { break }
            usleep(20_000)
        }
        stop()
        throw CommandFailed(command: "tus_server.py (not listening within \(timeout) s)", result: try server.wait(timeout: 5))
    }

    /// The path of an upload's bytes on the server: the last path component of its URL.
    public func storedFile(uploadURL: String) -> String {
        dataDirectory + "/" + (uploadURL.split(separator: "/").last.map(String.init) ?? "")
    }

    /// What the server keeps of an upload (its `.info` JSON: `metadata` with the values
    /// decoded, `size`, `offset`, `expires`, …); nil when there is none.
    public func storedInfo(uploadURL: String) throws -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: storedFile(uploadURL: uploadURL) + ".info") else { return nil }
        return try JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// What the server has written to its standard error so far (warnings, tracebacks).
    public var log: String { server.standardErrorSoFar }

    /// SIGTERM (uvicorn shuts down gracefully), then SIGKILL after a grace period.
    public func stop() {
        server?.terminate()
    }

    deinit { stop() }
}
