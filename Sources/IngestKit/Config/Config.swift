import Foundation
import TOMLKit

/// The settings of a run, from `/etc/ingest/ingest.toml` (or `--config`), then environment
/// variables, then command-line flags, each overriding the one before.
///
/// ```toml
/// state_dir = "/var/lib/ingest"   # journal and staging
///
/// [scan]
/// include = ["DCIM/**"]           # only these (default: everything)
/// exclude = ["*.tmp", "MISC"]     # never these; a matching directory is not entered
///
/// [staging]
/// reserve = "1GiB"                # free space to leave on the staging disk
/// verify = "off"                  # off | staged | both: read back after copying
/// ```
public struct Config: Sendable, Equatable {
    public static let defaultPath = "/etc/ingest/ingest.toml"

    /// Environment variables that override the file, and the key each one sets.
    public static let environmentOverrides: [(variable: String, key: String)] = [
        ("INGEST_STATE_DIR", "state_dir"),
        ("INGEST_STAGING_RESERVE", "staging.reserve"),
        ("INGEST_STAGING_VERIFY", "staging.verify"),
    ]

    public var stateDirectory: String?
    public var scan = ScanRules()
    public var staging = StageSettings()
    /// The file the settings came from, if any.
    public var source: String?

    public init() {}

    /// Loads the configuration: `explicitPath` (from `--config` or `INGEST_CONFIG`) must
    /// exist; without one, the default path is read if it exists. Environment overrides apply.
    public static func load(explicitPath: String?, environment: [String: String]) throws(IngestError) -> Config {
        let path = explicitPath ?? defaultPath
        var config = Config()
        if FileManager.default.fileExists(atPath: path) {
            let text: String
            do { text = try readTextFile(path) } catch {
                throw .config(file: path, key: nil, problem: "cannot be read: \(error.reason)")
            }
            config = try parse(text, file: path)
        } else if explicitPath != nil {
            throw .config(file: path, key: nil, problem: "no such file (check --config or INGEST_CONFIG)")
        }
        try config.applyEnvironment(environment)
        return config
    }

    /// Parses the text of a configuration file; `file` names it in errors.
    public static func parse(_ text: String, file: String? = nil) throws(IngestError) -> Config {
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw .config(
                file: file, key: nil,
                problem: "line \(error.source.begin.line), column \(error.source.begin.column): \(error.description)")
        } catch {
            throw .config(file: file, key: nil, problem: "\(error)")
        }
        var config = Config()
        config.source = file
        let root = TableReader(table: table, prefix: "", file: file)
        try root.allowOnly(["state_dir", "scan", "staging"])
        config.stateDirectory = try root.string("state_dir")
        if let scan = try root.table("scan") {
            try scan.allowOnly(["include", "exclude"])
            config.scan.include = try scan.globs("include") ?? []
            config.scan.exclude = try scan.globs("exclude") ?? []
        }
        if let staging = try root.table("staging") {
            try staging.allowOnly(["reserve", "verify"])
            if let reserve = try staging.string("reserve") { config.staging.reserve = try parseSize(reserve, key: "staging.reserve", file: file) }
            if let verify = try staging.string("verify") { config.staging.verify = try parseVerify(verify, key: "staging.verify", file: file) }
        }
        return config
    }

    mutating func applyEnvironment(_ environment: [String: String]) throws(IngestError) {
        func value(_ variable: String) -> String? { environment[variable].flatMap { $0.isEmpty ? nil : $0 } }
        if let dir = value("INGEST_STATE_DIR") { stateDirectory = dir }
        if let reserve = value("INGEST_STAGING_RESERVE") {
            staging.reserve = try Self.parseSize(reserve, key: "INGEST_STAGING_RESERVE", file: nil)
        }
        if let verify = value("INGEST_STAGING_VERIFY") {
            staging.verify = try Self.parseVerify(verify, key: "INGEST_STAGING_VERIFY", file: nil)
        }
    }

    /// Parses a size such as "2GiB"; `key` names the setting in the error.
    public static func parseSize(_ text: String, key: String, file: String?) throws(IngestError) -> Int64 {
        guard let bytes = ByteCount.parse(text) else {
            throw .config(file: file, key: key, problem: "'\(text)' is not a size; write it like \"512MiB\" or \"2GiB\"")
        }
        return bytes
    }

    static func parseVerify(_ text: String, key: String, file: String?) throws(IngestError) -> VerifyMode {
        guard let mode = VerifyMode(rawValue: text) else {
            let choices = VerifyMode.allCases.map(\.rawValue).joined(separator: ", ")
            throw .config(file: file, key: key, problem: "'\(text)' is not one of \(choices)")
        }
        return mode
    }
}

/// Reads typed values from one TOML table, naming the full key in every error.
private struct TableReader {
    let table: TOMLTable
    let prefix: String
    let file: String?

    func key(_ name: String) -> String { prefix.isEmpty ? name : "\(prefix).\(name)" }

    func fail(_ name: String, _ problem: String) -> IngestError {
        .config(file: file, key: key(name), problem: problem)
    }

    func allowOnly(_ names: Set<String>) throws(IngestError) {
        for name in table.keys.sorted() where !names.contains(name) {
            let known = names.sorted().map { key($0) }.joined(separator: ", ")
            throw fail(name, "unknown key; known keys here: \(known)")
        }
    }

    func string(_ name: String) throws(IngestError) -> String? {
        guard let value = table[name] else { return nil }
        guard let text = value.string else { throw fail(name, "must be a string, not \(value.type)") }
        return text
    }

    func table(_ name: String) throws(IngestError) -> TableReader? {
        guard let value = table[name] else { return nil }
        guard let child = value.table else { throw fail(name, "must be a table ([\(key(name))]), not \(value.type)") }
        return TableReader(table: child, prefix: key(name), file: file)
    }

    func globs(_ name: String) throws(IngestError) -> [Glob]? {
        guard let value = table[name] else { return nil }
        guard let array = value.array else { throw fail(name, "must be an array of patterns, like [\"*.tmp\"]") }
        var globs: [Glob] = []
        for element in array {
            guard let pattern = element.string else { throw fail(name, "must hold only strings, not \(element.type)") }
            do { globs.append(try Glob(pattern)) } catch { throw fail(name, error.description) }
        }
        return globs
    }
}
