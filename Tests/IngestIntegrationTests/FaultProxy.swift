import Foundation
import Glibc
import IngestTestSupport

/// One rule for ``FaultProxy``, written in the proxy's rule syntax
/// (`ACTION:METHODS:PATTERN[:OPTION=VALUE]...`, documented in `Tests/Tools/fault_proxy.py`).
///
/// A typed builder rather than bare strings so that a test names its action and options
/// and cannot misspell them; `description` is the string the proxy parses.
struct FaultRule: CustomStringConvertible, Sendable {
    enum Action: String, Sendable, CaseIterable {
        /// Forward part of the body, then RST both connections.
        case reset
        /// Read the request, answer nothing for `seconds` (or until the client hangs up).
        case stall
        /// 503 with S3's `SlowDown` error document, not forwarded.
        case slowdown
        /// 500 with `InternalError`, not forwarded.
        case error500
        /// Forward the request, cut the answer halfway, RST.
        case truncate
        /// Hold the request for `seconds`, then forward it untouched: a slow link.
        case delay
        /// Forward the request; answer a `412` with `200` and the body's ETag: a server that
        /// ignores `If-None-Match`, as far as the client can tell.
        case unconditional
    }

    var action: Action
    /// `PUT`, `PUT,POST`, or `*` for any method.
    var methods: String
    /// A substring of the request target, `~regex`, or `*` for any target.
    var pattern: String
    var every: Int?
    var after: Int?
    var count: Int?
    var seconds: Double?
    var fraction: Double?
    var bytes: Int?

    init(
        _ action: Action, _ methods: String = "*", _ pattern: String = "*", every: Int? = nil, after: Int? = nil,
        count: Int? = nil, seconds: Double? = nil, fraction: Double? = nil, bytes: Int? = nil
    ) {
        self.action = action
        self.methods = methods
        self.pattern = pattern
        self.every = every
        self.after = after
        self.count = count
        self.seconds = seconds
        self.fraction = fraction
        self.bytes = bytes
    }

    var description: String {
        var fields = [action.rawValue, methods, pattern]
        if let every { fields.append("every=\(every)") }
        if let after { fields.append("after=\(after)") }
        if let count { fields.append("count=\(count)") }
        if let seconds { fields.append("seconds=\(seconds)") }
        if let fraction { fields.append("fraction=\(fraction)") }
        if let bytes { fields.append("bytes=\(bytes)") }
        return fields.joined(separator: ":")
    }
}

/// The fault-injecting HTTP proxy (`Tests/Tools/fault_proxy.py`) on 127.0.0.1, started for a
/// test in front of a server and stopped by its PID.
///
/// Point a client at `endpoint` instead of the server's: every request goes through, except
/// those the rules pick, which get a reset, a stall, a `SlowDown`, … `stats()` tells what
/// was injected, so that a test proves its faults happened rather than passing because none
/// did. The proxy speaks to the admin port through the `curl` command line tool, not through
/// the transport under test.
final class FaultProxy: @unchecked Sendable {
    /// The script, found next to this file's folder (`Tests/Tools`), as `TestVenv` finds the venv.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tools/fault_proxy.py").path

    let port: Int
    let adminPort: Int
    private let process: ChildProcess

    /// Where clients send their requests.
    var endpoint: String { "http://127.0.0.1:\(port)" }
    var pid: Int32 { process.pid }

    /// Starts the proxy in front of `127.0.0.1:upstreamPort` and waits until it listens.
    ///
    /// - Parameter dateShift: moves the `Date` header of every answer by this many seconds
    ///   (negative: back), as a server whose clock is that far off sends it; the server
    ///   itself still checks signatures against its true clock.
    init(upstreamPort: Int, rules: [FaultRule] = [], dateShift: Int = 0, timeout: TimeInterval = 15) throws {
        let arguments = ["-u", Self.script, "--upstream", "127.0.0.1:\(upstreamPort)", "--verbose"]
            + (dateShift == 0 ? [] : ["--date-shift", String(dateShift)])
            + rules.flatMap { ["--rule", $0.description] }
        process = try ChildProcess(try Self.python(), arguments)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let words = process.standardOutputSoFar.split(separator: "\n").first?.split(separator: " ") ?? []
            // "listening 127.0.0.1:PORT admin 127.0.0.1:ADMIN_PORT"
            if words.count == 4, words[0] == "listening", let port = words[1].split(separator: ":").last.flatMap({ Int($0) }),
                let adminPort = words[3].split(separator: ":").last.flatMap({ Int($0) })
            {
                self.port = port
                self.adminPort = adminPort
                return
            }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        kill(process.pid, SIGKILL)
        throw CommandFailed(command: "python3 \(Self.script) (not listening within \(timeout) s)", result: try process.wait(timeout: 5))
    }

    /// Replaces the rules; their counters start again from zero (the traffic counters do not).
    func setRules(_ rules: [FaultRule]) throws {
        let body = try JSONEncoder().encode(rules.map(\.description))
        _ = try admin(["-X", "PUT", "-H", "Content-Type: application/json", "--data-binary", String(decoding: body, as: UTF8.self)], path: "/rules")
    }

    /// What the proxy has counted so far.
    func stats() throws -> Stats {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(Stats.self, from: try admin([], path: "/stats"))
    }

    /// Zeroes the traffic counters (rules keep theirs).
    func resetStats() throws {
        _ = try admin(["-X", "DELETE"], path: "/stats")
    }

    /// What the proxy logged (every fault, with `--verbose`): worth printing when a test fails.
    var log: String { process.standardErrorSoFar }

    /// SIGTERM, then SIGKILL if it has not stopped within a few seconds.
    func stop() {
        process.terminate()
    }

    deinit { stop() }

    private func admin(_ arguments: [String], path: String) throws -> Data {
        let command = ["-sS", "--fail-with-body", "--max-time", "10"] + arguments + ["http://127.0.0.1:\(adminPort)\(path)"]
        let result = try run("/usr/bin/curl", command, timeout: 20)
        guard result.status == 0 else {
            throw CommandFailed(command: "curl \(path) on the fault proxy: \(result.stdoutText)", result: result)
        }
        return result.stdout
    }

    /// Python 3.11 or later: Debian's, else the first `python3` on the PATH.
    private static func python() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/bin/python3"] + path.split(separator: ":").map { "\($0)/python3" }
        guard let python = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CommandFailed(command: "python3", result: ProcessResult(status: 127, stdout: Data(), stderr: "python3 not found"))
        }
        return python
    }

    /// The proxy's `GET /stats` document.
    struct Stats: Decodable, Sendable {
        struct Rule: Decodable, Sendable {
            var rule: String
            var action: String
            /// Requests that matched the rule's method and pattern.
            var matched: Int
            /// Requests it injected its fault into.
            var fired: Int
        }

        struct Event: Decodable, Sendable {
            var action: String
            /// The rule's position in the list.
            var rule: Int
            var method: String
            var target: String
        }

        var connections: Int
        var requests: Int
        /// Requests relayed to the server and answered back in full.
        var forwarded: Int
        var upstreamFailures: Int
        /// Stalls the client walked away from before they ended: its timeout fired.
        var stallHangups: Int
        var bytesToUpstream: Int
        /// From the first byte sent to the server to the last.
        var upstreamSeconds: Double
        var bytesToClient: Int
        var injected: [String: Int]
        var rules: [Rule]
        /// The most recent injections (up to 1000), oldest first.
        var events: [Event]

        func injected(_ action: FaultRule.Action) -> Int { injected[action.rawValue] ?? 0 }
    }
}
