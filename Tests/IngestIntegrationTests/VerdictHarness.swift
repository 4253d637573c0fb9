import Foundation
import IngestTestSupport
import Testing

/// What the suites that try a card's verdict against a real SeaweedFS share (VerdictTests,
/// VerifyCardTests, BucketCheckTests, ReadBackRescanTests): a station's configuration for the
/// server, `ingest` run with it, and the bucket's objects as they landed, downloaded and hashed
/// with `xxh128sum` (the outside oracle).
extension SeaweedFS {
    /// Writes `ingest.toml` into `dir` for this server's endpoint and bucket, as station
    /// `device`, and returns its path. `smallParts`: parts of 5 MiB and single PUTs below 5 MiB,
    /// so that a file of a few MiB is a multipart upload. `rescan`: the `[rescan]` lines.
    func stationConfig(device: String, smallParts: Bool = false, rescan: [String] = [], in dir: TemporaryDirectory) throws -> String {
        var lines: [String] = []
        if smallParts { lines += ["[upload]", #"part_size = "5MiB""#, #"single_put_threshold = "5MiB""#] }
        lines += ["[s3]", #"endpoint = "\#(endpoint)""#, #"bucket = "\#(bucket)""#, "[device]", #"id = "\#(device)""#]
        if !rescan.isEmpty { lines += ["[rescan]"] + rescan }
        return try dir.write("ingest.toml", Array((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// `ingest ARGUMENTS --state-dir STATE --json` (without `--json` when `json` is false) with
    /// `config` and this server's credentials.
    func ingest(_ arguments: [String], state: String, config: String, json: Bool = true) throws -> IngestRun {
        var environment = awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(arguments + ["--state-dir", state] + (json ? ["--json"] : []), environment: environment)
    }

    /// Every object of `bucket` (this server's by default) but the cards' ASC MHL histories and
    /// the bucket's marker, by key, with the `xxh128sum` of its bytes, downloaded into `dir`.
    func landedObjects(in bucket: String? = nil, downloadingInto dir: TemporaryDirectory) throws -> [String: String] {
        let bucket = bucket ?? self.bucket
        let listed = try json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        var sums: [String: String] = [:]
        for key in listed.compactMap({ $0["Key"] as? String }) where !key.contains("/ascmhl/") && !key.hasPrefix(".ingest/") {
            let path = dir.path + "/download-\(UUID().uuidString)"
            let result = try aws(["s3api", "get-object", "--bucket", bucket, "--key", key, path])
            guard result.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: result) }
            sums[key] = try xxh128sum(path)
        }
        return sums
    }
}

/// A TOML array of strings, for `[rescan] roots`.
func tomlStrings(_ values: [String]) -> String { "[" + values.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
