// The configuration file read: TOML to `Config`, each key checked and every error naming it,
// and the values (sizes, rates, durations) written as the file and the environment write them.

import Foundation
import TOMLKit

extension Config {
    /// Refuses a key or string holding a NUL (`"\u0000"`), which TOMLKit would silently cut
    /// short. In a label (`[device]` and `[scene]`: `id`, `name`, their tags) it is a label
    /// error naming the label's key, as a control character in a label from anywhere else is;
    /// anywhere else a configuration error naming the key.
    private static func refuseNUL(in table: TOMLTable, file: String?) throws(IngestError) {
        guard let path = table.keyPathHoldingNUL() else { return }
        let source = file.map { "the config's \($0)" } ?? "the config"
        let parts = path.split(separator: ".", maxSplits: 2).map(String.init)
        let label: (key: String, source: LabelSource)? =
            switch parts.first {
            case "device" where parts.count == 2 && parts[1] == "id": ("device", .deviceID)
            case "device" where parts.count == 3 && parts[1] == "tags": (parts[2], .deviceConfig)
            case "scene" where parts.count == 2 && parts[1] == "name": ("scene", .sceneConfig)
            case "scene" where parts.count == 3 && parts[1] == "tags": (parts[2], .sceneConfig)
            default: nil
            }
        if let label {
            throw .runLabels(
                LabelError.controlCharacter(key: label.key, source: label.source, character: "U+0000 (NUL)").description
                    + " (in \(source), key '\(path)')")
        }
        throw .config(
            file: file, key: path, problem: "holds the control character U+0000 (NUL), which would cut it short; remove it")
    }

    /// Parses the text of a configuration file; `file` names it in errors.
    public static func parse(_ text: String, file: String? = nil) throws(IngestError) -> Config {
        // TOMLKit hands the text to its parser as a C string: a NUL would end the file there.
        if let nul = text.utf8.firstIndex(of: 0) {
            let before = text.utf8[..<nul]
            let line = before.count(where: { $0 == UInt8(ascii: "\n") }) + 1
            let column = before.reversed().prefix { $0 != UInt8(ascii: "\n") }.count + 1
            throw .config(
                file: file, key: nil,
                problem: "line \(line), column \(column): holds the control character U+0000 (NUL), which TOML "
                    + "allows nowhere in a file; remove it")
        }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw .config(
                file: file, key: nil,
                problem: "line \(error.source.begin.line), column \(error.source.begin.column): \(error.description)")
        } catch {
            throw .config(file: file, key: nil, problem: "\(error)")
        }
        try refuseNUL(in: table, file: file)
        var config = Config()
        config.source = file
        let root = TableReader(table: table, prefix: "", file: file)
        try root.allowOnly(["state_dir", "scan", "staging", "s3", "tus", "upload", "device", "scene", "watch", "rescan", "hooks"])
        config.stateDirectory = try root.absolutePath("state_dir", example: "/var/lib/ingest")
        if let scan = try root.table("scan") {
            try scan.allowOnly(["include", "exclude"])
            config.scan.include = try scan.globs("include") ?? []
            config.scan.exclude = try scan.globs("exclude") ?? []
        }
        if let staging = try root.table("staging") {
            try staging.allowOnly(["reserve", "verify", "retention"])
            if let reserve = try staging.string("reserve") { config.staging.reserve = try parseSize(reserve, key: "staging.reserve", file: file) }
            if let verify = try staging.string("verify") { config.staging.verify = try parseVerify(verify, key: "staging.verify", file: file) }
            if let retention = try staging.duration("retention") { config.uploadSection.stagingRetention = retention }
        }
        if let s3 = try root.table("s3") {
            try s3.allowOnly(["endpoint", "bucket", "region", "addressing", "prefix", "key_template", "object_tags",
                              "connect_timeout", "stall_timeout", "allow_http"])
            config.s3.endpoints = try s3.endpoints("endpoint")
            config.s3.bucket = try s3.string("bucket")
            if let bucket = config.s3.bucket, !bucket.isEmpty, let problem = BucketName.problem(bucket) {
                throw s3.fail("bucket", BucketName.fix(bucket, problem: problem, origin: "[s3] bucket"))
            }
            if let region = try s3.string("region") { config.s3.region = region }
            if let addressing = try s3.string("addressing") {
                guard let style = S3AddressingStyle(rawValue: addressing) else {
                    throw s3.fail("addressing", "'\(addressing)' is not one of path, virtual-host")
                }
                config.s3.addressing = style
            }
            try readKeysOfS3(s3, into: &config.s3)
            if let keys = try s3.strings("object_tags") { config.s3.objectTagKeys = keys }
        }
        let tus = try root.table("tus")
        if let tus { try parseTus(tus, s3: try root.table("s3"), into: &config) }
        do { _ = try KeyTemplate(prefix: config.s3.prefix, template: config.s3.keyTemplate) } catch {
            // Named in the section that set it: [tus] prefix and key_template are [s3]'s fields.
            let key = error.configKey.map { key in
                let name = key.split(separator: ".").last.map(String.init) ?? key
                if let tus, tus.table[name] != nil { return tus.key(name) }
                return key
            }
            throw .config(file: file, key: key, problem: error.description)
        }
        if let upload = try root.table("upload") {
            try upload.allowOnly(["part_size", "single_put_threshold", "max_restarts", "files_in_flight",
                                  "parts_in_flight", "bytes_in_flight", "checksum", "quarantine_after",
                                  "sign_payloads", "max_rate", "stream_parts", "adopt_after"])
            if let size = try upload.string("part_size") {
                if config.s3.isTus {
                    throw upload.fail(
                        "part_size",
                        "is S3's, but the destination is a tus server (\(config.tus.url != nil ? "tus.url" : "s3.endpoint")): "
                            + "the size of each of its PATCH requests is [tus] chunk_size; set that instead")
                }
                config.uploadSection.partSize = try parseSize(size, key: "upload.part_size", file: file)
            }
            if let size = try upload.string("single_put_threshold") {
                config.uploadSection.singlePutThreshold = try parseSize(size, key: "upload.single_put_threshold", file: file)
            }
            if let count = try upload.integer("max_restarts", in: 0...100) { config.uploadSection.maxRestarts = count }
            if let count = try upload.integer("files_in_flight", in: 1...64) { config.uploadSection.filesInFlight = count }
            if let count = try upload.integer("parts_in_flight", in: 1...64) { config.uploadSection.partsInFlight = count }
            if let count = try upload.integer("quarantine_after", in: 1...1000) { config.uploadSection.quarantineAfter = count }
            if let sign = try upload.bool("sign_payloads") { config.uploadSection.signPayloads = sign }
            if let stream = try upload.bool("stream_parts") { config.uploadSection.streamParts = stream }
            if let checksum = try upload.string("checksum") {
                guard let algorithm = PartDigestAlgorithm(rawValue: checksum.uppercased()) else {
                    let choices = PartDigestAlgorithm.allCases.map { $0.rawValue.lowercased() }.joined(separator: ", ")
                    throw upload.fail("checksum", "'\(checksum)' is not one of \(choices)")
                }
                config.uploadSection.checksum = algorithm
            }
            if let size = try upload.string("bytes_in_flight") {
                config.uploadSection.bytesInFlight = try parseSize(size, key: "upload.bytes_in_flight", file: file)
            }
            if let wait = try upload.string("adopt_after") {
                config.uploadSection.adoptAfter = try parseDuration(wait, key: "upload.adopt_after", file: file)
            }
            if let rate = try upload.string("max_rate") {
                config.uploadSection.maxRate = try parseRate(rate, key: "upload.max_rate", file: file)
            }
        }
        if let device = try root.table("device") {
            try device.allowOnly(["id", "tags", "file_systems"])
            config.device.id = try device.string("id")
            config.device.tags = try device.stringTable("tags") ?? [:]
            if let types = try device.strings("file_systems") {
                if let bad = types.first(where: { $0.isEmpty || !$0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }) {
                    throw device.fail("file_systems", "'\(bad)' is not a file-system type as udev names them (vfat, exfat, ext4…)")
                }
                config.device.fileSystems = types
            }
        }
        if let scene = try root.table("scene") {
            try scene.allowOnly(["name", "tags"])
            config.scene.name = try scene.string("name")
            config.scene.tags = try scene.stringTable("tags") ?? [:]
        }
        if let watch = try root.table("watch") {
            try watch.allowOnly(["max_cards"])
            if let count = try watch.integer("max_cards", in: WatchSettings.maxCardsRange) { config.watch.maxCards = count }
        }
        if let rescan = try root.table("rescan") {
            try rescan.allowOnly(["roots", "metrics_file", "orphan_upload_age", "bucket_check_days", "read_back_bytes"])
            if let budget = try rescan.string("read_back_bytes") {
                config.rescan.readBackBytes =
                    budget.trimmingCharacters(in: .whitespaces) == "off"
                    ? 0 : try parseSize(budget, key: "rescan.read_back_bytes", file: file)
            }
            if let days = try rescan.integer("bucket_check_days", in: 0...36_500) { config.rescan.bucketCheckDays = days }
            config.rescan.roots = try rescan.absolutePaths("roots", example: "/srv/incoming") ?? []
            config.rescan.metricsFile = try rescan.absolutePath(
                "metrics_file", example: "/var/lib/prometheus/node-exporter/ingest.prom")
            if let age = try rescan.string("orphan_upload_age") {
                config.rescan.orphanUploadAge =
                    age.trimmingCharacters(in: .whitespaces) == "off"
                    ? nil : try parseDuration(age, key: "rescan.orphan_upload_age", file: file)
            }
        }
        if let hooks = try root.table("hooks") {
            try hooks.allowOnly(["on_card_done", "timeout"])
            if let command = try hooks.string("on_card_done") {
                guard !command.allSatisfy(\.isWhitespace) else {
                    throw hooks.fail("on_card_done", "is empty; give a command, like \"/usr/local/bin/card-done\", or leave the key out")
                }
                if let program = HookSettings.relativeProgram(command) {
                    throw hooks.fail(
                        "on_card_done",
                        "runs '\(program)', a relative path, which would be looked for from whatever directory ingest "
                            + "was started in (a shell's, systemd's /, cron's home); write the program's absolute path, "
                            + "like \"/usr/local/bin/card-done\"")
                }
                config.hooks.onCardDone = command
            }
            if let timeout = try hooks.duration("timeout") {
                guard HookSettings.timeoutRange.contains(timeout) else {
                    throw hooks.fail("timeout", "must be at least 100ms and at most 1h; a hook never holds a card back longer")
                }
                config.hooks.timeout = timeout
            }
        }
        try config.uploadSection.check(file: file)
        return config
    }

    /// The keys `[tus]` shares with `[s3]`: they set ``S3Settings``'s fields, from one
    /// section or the other.
    static let tusKeysOfS3 = ["prefix", "key_template", "allow_http", "connect_timeout", "stall_timeout"]

    /// Reads `[tus]`: the creation URL becomes the endpoint (`tus+URL`), the keys it shares
    /// with `[s3]` set the same fields (set in both sections, they are an error naming both),
    /// the headers file and the chunk size are its own.
    private static func parseTus(_ tus: TableReader, s3: TableReader?, into config: inout Config) throws(IngestError) {
        try tus.allowOnly(Set(["url", "headers_file", "chunk_size"] + tusKeysOfS3))
        for name in tusKeysOfS3 where tus.table[name] != nil {
            if let s3, s3.table[name] != nil {
                throw tus.fail(
                    name, "is set in [s3] too (\(s3.key(name))): set it in one section only, the one of the destination")
            }
        }
        if let url = try tus.string("url") {
            if let s3, s3.table["endpoint"] != nil {
                throw tus.fail(
                    "url",
                    "and s3.endpoint are both set, but ingest sends to one destination: keep [tus] url for a tus "
                        + "server, or [s3] endpoint for S3")
            }
            if let s3, s3.table["bucket"] != nil {
                throw tus.fail("url", "is a tus server, which has no buckets, but s3.bucket is set too: remove it")
            }
            guard !url.isEmpty else { throw tus.fail("url", "is empty; give the creation URL, like \"https://uploads.example.net/files/\"") }
            if S3Destination.tusCreationURL(of: url) != nil {
                throw tus.fail(
                    "url", "starts with tus+, which only --endpoint and [s3] endpoint need; write the creation URL itself, "
                        + "like \"\(url.dropFirst(S3Destination.tusScheme.count))\"")
            }
            do { _ = try TusEndpoint(url) } catch { throw tus.fail("url", "'\(url)': \(error)") }
            config.tus.url = url
            config.s3.endpoint = S3Destination.tusScheme + url
        }
        config.tus.headersFile = try tus.absolutePath("headers_file", example: "/etc/ingest/tus-headers")
        if let size = try tus.string("chunk_size") {
            let bytes = try parseSize(size, key: tus.key("chunk_size"), file: tus.file)
            guard TusSettings.chunkSizeRange.contains(bytes) else {
                throw tus.fail("chunk_size", "'\(size)' is outside 5MiB…5GiB, the sizes a part of an upload may have")
            }
            config.tus.chunkSize = bytes
        }
        try readKeysOfS3(tus, into: &config.s3)
    }

    /// The keys `[s3]` and `[tus]` share (``tusKeysOfS3``), read from either section into
    /// the same fields.
    private static func readKeysOfS3(_ section: TableReader, into s3: inout S3Settings) throws(IngestError) {
        if let prefix = try section.string("prefix") { s3.prefix = prefix }
        if let template = try section.string("key_template") { s3.keyTemplate = template }
        if let timeout = try section.duration("connect_timeout") { s3.connectTimeout = timeout }
        if let timeout = try section.duration("stall_timeout") { s3.stallTimeout = timeout }
        if let allow = try section.bool("allow_http") { s3.allowHTTP = allow }
    }

    /// Parses a size such as "2GiB"; `key` names the setting in the error.
    public static func parseSize(_ text: String, key: String, file: String?) throws(IngestError) -> Int64 {
        guard let bytes = ByteCount.parse(text) else {
            throw .config(file: file, key: key, problem: "'\(text)' is not a size; write it like \"512MiB\" or \"2GiB\"")
        }
        return bytes
    }

    /// Parses a cap on the upload rate such as "2MiB/s", or "off" for none; `key` names the
    /// setting in the error.
    public static func parseRate(_ text: String, key: String, file: String?) throws(IngestError) -> ByteRate? {
        if text.trimmingCharacters(in: .whitespaces) == "off" { return nil }
        let example = "write it like \"2MiB/s\" (bytes per second, in KiB/s, MiB/s, MB/s…), or \"off\" for no cap"
        guard let rate = ByteRate.parse(text) else {
            throw .config(file: file, key: key, problem: "'\(text)' is not a rate; \(example)")
        }
        guard rate >= ByteRate.slowestCap else {
            throw .config(
                file: file, key: key,
                problem: "'\(text)' is below \(ByteRate.slowestCap), the slowest cap ingest holds; \(example)")
        }
        return rate
    }

    /// Parses a duration such as "30s", "15m", "12h" or "7d"; `key` names the setting in the error.
    public static func parseDuration(_ text: String, key: String, file: String?) throws(IngestError) -> Duration {
        let units: [(String, Int64)] = [("ms", 0), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (suffix, seconds) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)
            guard let value = Int64(number), value >= 0, value < 1 << 40 else { break }
            return seconds == 0 ? .milliseconds(value) : .seconds(value * seconds)
        }
        throw .config(file: file, key: key, problem: "'\(text)' is not a duration; write it like \"30s\", \"15m\", \"12h\" or \"7d\"")
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

    /// A string, or an array of strings (the gateways of `[s3] endpoint`): empty when absent.
    func endpoints(_ name: String) throws(IngestError) -> [String] {
        guard let value = table[name] else { return [] }
        if let text = value.string { return [text] }
        guard let array = value.array else {
            throw fail(name, "must be a URL or a list of URLs, like [\"https://gw1.example.net\", \"https://gw2.example.net\"]")
        }
        var urls: [String] = []
        for element in array {
            guard let text = element.string else { throw fail(name, "must hold only URL strings, not \(element.type)") }
            urls.append(text)
        }
        guard !urls.isEmpty else { throw fail(name, "is an empty list: give at least one gateway URL") }
        return urls
    }

    func table(_ name: String) throws(IngestError) -> TableReader? {
        guard let value = table[name] else { return nil }
        guard let child = value.table else { throw fail(name, "must be a table ([\(key(name))]), not \(value.type)") }
        return TableReader(table: child, prefix: key(name), file: file)
    }

    func bool(_ name: String) throws(IngestError) -> Bool? {
        guard let value = table[name] else { return nil }
        guard let flag = value.bool else { throw fail(name, "must be true or false, not \(value.type)") }
        return flag
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws(IngestError) -> Int? {
        guard let value = table[name] else { return nil }
        guard let number = value.int else { throw fail(name, "must be a whole number, not \(value.type)") }
        guard range.contains(number) else { throw fail(name, "\(number) is outside \(range.lowerBound)…\(range.upperBound)") }
        return number
    }

    func duration(_ name: String) throws(IngestError) -> Duration? {
        guard let text = try string(name) else { return nil }
        return try Config.parseDuration(text, key: key(name), file: file)
    }

    func strings(_ name: String) throws(IngestError) -> [String]? {
        guard let value = table[name] else { return nil }
        guard let array = value.array else { throw fail(name, "must be an array of strings, like [\"device\", \"scene\"]") }
        var strings: [String] = []
        for element in array {
            guard let text = element.string else { throw fail(name, "must hold only strings, not \(element.type)") }
            strings.append(text)
        }
        return strings
    }

    /// A table of string values (`tags = { site = "north" }`).
    func stringTable(_ name: String) throws(IngestError) -> [String: String]? {
        guard let value = table[name] else { return nil }
        guard let child = value.table else { throw fail(name, "must be a table of strings, like { site = \"north\" }") }
        var result: [String: String] = [:]
        for tagKey in child.keys {
            guard let text = child[tagKey]?.string else {
                throw .config(file: file, key: "\(key(name)).\(tagKey)", problem: "must be a string")
            }
            result[tagKey] = text
        }
        return result
    }

    /// An absolute path: a relative one would depend on where a shell, a timer or cron starts
    /// the job. `example` shows the fix in the error.
    func absolutePath(_ name: String, example: String) throws(IngestError) -> String? {
        guard let path = try string(name) else { return nil }
        guard path.hasPrefix("/") else { throw fail(name, Config.relativePathProblem(path, example: example)) }
        return path
    }

    func absolutePaths(_ name: String, example: String) throws(IngestError) -> [String]? {
        guard let paths = try strings(name) else { return nil }
        for path in paths where !path.hasPrefix("/") {
            throw fail(name, Config.relativePathProblem(path, example: example))
        }
        return paths
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

extension UploadSettings {
    /// Checks the part settings against S3's limits, so a bad value fails at start-up.
    func check(file: String?) throws(IngestError) {
        do { _ = try PartPlan.plan(fileSize: 0, preferredPartSize: partSize, singlePutThreshold: singlePutThreshold) } catch {
            throw .config(file: file, key: nil, problem: error.description)
        }
    }
}
