import Foundation
import Testing

@testable import IngestKit

/// The parts of a configuration error, after checking it is one and that it exits as `.config`.
private struct ConfigFailure {
    var file: String?
    var key: String?
    var problem: String
    var description: String
}

private func configFailure(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Config
) throws -> ConfigFailure {
    let error = try #require(throws: IngestError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error.exitStatus == .config, sourceLocation: sourceLocation)
    guard case let .config(file, key, problem) = error else {
        Issue.record("expected a configuration error, got \(error)", sourceLocation: sourceLocation)
        throw error
    }
    return ConfigFailure(file: file, key: key, problem: problem, description: error.description)
}

/// A file in a fresh temporary directory, removed with it.
private final class TemporaryConfigFile {
    let directory: URL
    let path: String

    init(_ text: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ingest-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("ingest.toml").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

private let fullConfig = """
    # ingest settings for the darkroom Pi
    state_dir = "/var/lib/ingest"   # journal and staging

    [scan]
    include = ["DCIM/**", "PRIVATE/M4ROOT/CLIP/*.MP4"]
    exclude = ["*.tmp", "MISC"]

    [staging]
    reserve = "2GiB"
    verify = "both"
    """

@Suite struct ConfigTests {
    // MARK: valid files

    @Test func fullValidFileSetsEverySetting() throws {
        let config = try Config.parse(fullConfig, file: "/etc/ingest/ingest.toml")
        #expect(config.stateDirectory == "/var/lib/ingest")
        #expect(config.scan.include.map(\.pattern) == ["DCIM/**", "PRIVATE/M4ROOT/CLIP/*.MP4"])
        #expect(config.scan.exclude.map(\.pattern) == ["*.tmp", "MISC"])
        #expect(config.staging.reserve == 2 * 1024 * 1024 * 1024)
        #expect(config.staging.verify == .both)
        #expect(config.source == "/etc/ingest/ingest.toml")
    }

    @Test func patternsFromTheFileMatchLikeGlobs() throws {
        let config = try Config.parse(fullConfig)
        #expect(config.scan.include[0].matches(CardPath("DCIM/100CANON/IMG_0001.JPG")))
        #expect(config.scan.exclude[1].matches(CardPath("DCIM/MISC")))
    }

    @Test func emptyFileLeavesTheDefaults() throws {
        #expect(try Config.parse("") == Config())
        #expect(try Config.parse("# nothing here\n\n") == Config())
    }

    @Test func sectionsMayBeLeftOut() throws {
        let config = try Config.parse("[staging]\nverify = \"staged\"\n")
        #expect(config.staging.verify == .staged)
        #expect(config.staging.reserve == Config().staging.reserve)
        #expect(config.stateDirectory == nil)
        #expect(config.scan == ScanRules())
    }

    @Test(arguments: ["off", "staged", "both"])
    func everyVerifyModeIsAccepted(mode: String) throws {
        let config = try Config.parse("[staging]\nverify = \"\(mode)\"\n")
        #expect(config.staging.verify.rawValue == mode)
    }

    // MARK: unknown keys

    @Test func unknownTopLevelKeyIsNamed() throws {
        let failure = try configFailure { try Config.parse("statedir = \"/var/lib/ingest\"\n", file: "/etc/x.toml") }
        #expect(failure.key == "statedir")
        #expect(failure.file == "/etc/x.toml")
        #expect(failure.problem.contains("state_dir"))
    }

    @Test func unknownKeyInATableIsNamedWithItsFullDottedKey() throws {
        let failure = try configFailure { try Config.parse("[staging]\nreserv = \"1GiB\"\n") }
        #expect(failure.key == "staging.reserv")
        #expect(failure.problem.contains("staging.reserve"))
        #expect(failure.problem.contains("staging.verify"))
        #expect(failure.description.contains("key 'staging.reserv'"))
    }

    @Test func unknownKeyInScanIsNamedWithItsFullDottedKey() throws {
        let failure = try configFailure { try Config.parse("[scan]\nincludes = [\"DCIM/**\"]\n") }
        #expect(failure.key == "scan.includes")
    }

    @Test func unknownSubtableIsNamedWithItsFullDottedKey() throws {
        let failure = try configFailure { try Config.parse("[scan.rules]\nx = 1\n") }
        #expect(failure.key == "scan.rules")
    }

    @Test func unknownTableIsNamed() throws {
        let failure = try configFailure { try Config.parse("[uploads]\nurl = \"https://example.org\"\n") }
        #expect(failure.key == "uploads")
    }

    // MARK: wrong types

    @Test func stateDirMustBeAString() throws {
        let failure = try configFailure { try Config.parse("state_dir = 42\n") }
        #expect(failure.key == "state_dir")
        #expect(failure.problem.contains("string"))
    }

    @Test func scanMustBeATable() throws {
        let failure = try configFailure { try Config.parse("scan = \"DCIM\"\n") }
        #expect(failure.key == "scan")
        #expect(failure.problem.contains("table"))
    }

    @Test func includeMustBeAnArray() throws {
        let failure = try configFailure { try Config.parse("[scan]\ninclude = \"DCIM/**\"\n") }
        #expect(failure.key == "scan.include")
        #expect(failure.problem.contains("array"))
    }

    @Test func excludeMustHoldOnlyStrings() throws {
        let failure = try configFailure { try Config.parse("[scan]\nexclude = [\"*.tmp\", 3]\n") }
        #expect(failure.key == "scan.exclude")
        #expect(failure.problem.contains("strings"))
    }

    @Test func reserveMustBeAString() throws {
        let failure = try configFailure { try Config.parse("[staging]\nreserve = 1073741824\n") }
        #expect(failure.key == "staging.reserve")
        #expect(failure.problem.contains("string"))
    }

    @Test func verifyMustBeAString() throws {
        let failure = try configFailure { try Config.parse("[staging]\nverify = true\n") }
        #expect(failure.key == "staging.verify")
    }

    // MARK: bad values

    @Test func badSizeTextIsRejectedWithItsKeyAndText() throws {
        let failure = try configFailure { try Config.parse("[staging]\nreserve = \"lots\"\n", file: "/etc/x.toml") }
        #expect(failure.key == "staging.reserve")
        #expect(failure.file == "/etc/x.toml")
        #expect(failure.problem.contains("'lots'"))
        #expect(failure.description.contains("/etc/x.toml"))
        #expect(failure.description.contains("key 'staging.reserve'"))
    }

    @Test func badVerifyValueIsRejectedListingTheChoices() throws {
        let failure = try configFailure { try Config.parse("[staging]\nverify = \"sometimes\"\n") }
        #expect(failure.key == "staging.verify")
        #expect(failure.problem.contains("'sometimes'"))
        for choice in ["off", "staged", "both"] { #expect(failure.problem.contains(choice)) }
    }

    @Test func badPatternIsRejectedWithItsKey() throws {
        let failure = try configFailure { try Config.parse("[scan]\nexclude = [\"*.[jJ\"]\n") }
        #expect(failure.key == "scan.exclude")
        #expect(failure.problem.contains("*.[jJ"))
    }

    @Test func emptyPatternIsRejectedWithItsKey() throws {
        let failure = try configFailure { try Config.parse("[scan]\ninclude = [\"\"]\n") }
        #expect(failure.key == "scan.include")
    }

    // MARK: syntax

    @Test func syntaxErrorNamesItsLine() throws {
        let text = """
            state_dir = "/var/lib/ingest"

            [staging
            verify = "off"
            """
        let failure = try configFailure { try Config.parse(text, file: "/etc/x.toml") }
        #expect(failure.key == nil)
        #expect(failure.file == "/etc/x.toml")
        #expect(failure.problem.contains("line 3"))
    }

    @Test func unterminatedStringNamesItsLine() throws {
        let failure = try configFailure { try Config.parse("[staging]\nreserve = \"1GiB\nverify = \"off\"\n") }
        #expect(failure.problem.contains("line 2"))
    }

    @Test func duplicateKeyIsASyntaxError() throws {
        let failure = try configFailure { try Config.parse("state_dir = \"/a\"\nstate_dir = \"/b\"\n") }
        #expect(failure.key == nil)
        #expect(failure.problem.contains("line 2"))
    }

    @Test func aConfigurationOthersCanWriteOrAnotherUserOwnsIsRefused() throws {
        let file = try TemporaryConfigFile(fullConfig)
        chmod(file.path, 0o666)
        let writable = try configFailure { try Config.load(explicitPath: file.path, environment: [:]) }
        #expect(writable.problem.contains("is not trusted") && writable.problem.contains("chmod go-w \(file.path)"))
        chmod(file.path, 0o644)
        #expect(chown(file.path, 65534, 65534) == 0)
        let owned = try configFailure { try Config.load(explicitPath: file.path, environment: [:]) }
        #expect(owned.problem.contains("belongs to user 65534"))
    }

    /// `--config` may name anything: a FIFO would block the open forever, `/dev/zero` would
    /// fill the memory. Anything but a regular file, or one over 1 MiB, is refused (78) before
    /// anything of it is read, naming the file, what it is and the fix.
    @Test(arguments: ["fifo", "/dev/zero", "/dev/urandom", "directory", "over 1 MiB"])
    func aConfigurationThatIsNoRegularFileIsRefusedAtOnce(kind: String) throws {
        let file = try TemporaryConfigFile(fullConfig)
        let path: String
        switch kind {
        case "fifo":
            path = file.directory.path + "/fifo.toml"
            #expect(mkfifo(path, 0o600) == 0)
        case "directory":
            path = file.directory.path
        case "over 1 MiB":
            path = file.path
            try Data((fullConfig + "\n" + String(repeating: "#", count: 1 << 20)).utf8).write(to: URL(fileURLWithPath: path))
        default:
            path = kind
        }
        let started = ContinuousClock.now
        let failure = try configFailure { try Config.load(explicitPath: path, environment: [:]) }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(failure.file == path)
        let what =
            switch kind {
            case "fifo": "is a FIFO (named pipe), not a regular file"
            case "directory": "is a directory, not a regular file"
            case "over 1 MiB": "is larger than 1 MiB"
            default: "is a device node (a character device), not a regular file"
            }
        #expect(failure.problem.hasPrefix(what), "\(failure.problem)")
        #expect(failure.problem.contains("point --config or INGEST_CONFIG at the configuration itself"))
    }

    @Test func aConfigurationReachedThroughALinkIsRead() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let link = file.directory.path + "/link.toml"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: file.path)
        #expect(try Config.load(explicitPath: link, environment: [:]).staging.verify == .both)
    }

    @Test func devNullIsNoConfiguration() throws {
        #expect(try Config.load(explicitPath: "/dev/null", environment: [:]) == Config.parse("", file: "/dev/null"))
    }

    // MARK: environment

    @Test func environmentOverridesTheFile() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let config = try Config.load(explicitPath: file.path, environment: [
            "INGEST_STATE_DIR": "/srv/ingest",
            "INGEST_STAGING_RESERVE": "512MiB",
            "INGEST_STAGING_VERIFY": "staged",
        ])
        #expect(config.stateDirectory == "/srv/ingest")
        #expect(config.staging.reserve == 512 * 1024 * 1024)
        #expect(config.staging.verify == .staged)
        // What the environment does not set stays as the file says.
        #expect(config.scan.exclude.map(\.pattern) == ["*.tmp", "MISC"])
        #expect(config.source == file.path)
    }

    @Test func emptyEnvironmentValuesAreIgnored() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let config = try Config.load(explicitPath: file.path, environment: [
            "INGEST_STATE_DIR": "", "INGEST_STAGING_RESERVE": "", "INGEST_STAGING_VERIFY": "",
        ])
        #expect(config.stateDirectory == "/var/lib/ingest")
        #expect(config.staging.reserve == 2 * 1024 * 1024 * 1024)
        #expect(config.staging.verify == .both)
    }

    @Test func unrelatedEnvironmentVariablesAreIgnored() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let config = try Config.load(explicitPath: file.path, environment: ["INGEST_STAGING": "x", "HOME": "/root"])
        #expect(config == (try Config.parse(fullConfig, file: file.path)))
    }

    @Test func badReserveInTheEnvironmentNamesTheVariable() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let failure = try configFailure {
            try Config.load(explicitPath: file.path, environment: ["INGEST_STAGING_RESERVE": "huge"])
        }
        #expect(failure.key == "INGEST_STAGING_RESERVE")
        #expect(failure.file == nil)
        #expect(failure.problem.contains("'huge'"))
    }

    @Test func badVerifyInTheEnvironmentNamesTheVariable() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let failure = try configFailure {
            try Config.load(explicitPath: file.path, environment: ["INGEST_STAGING_VERIFY": "always"])
        }
        #expect(failure.key == "INGEST_STAGING_VERIFY")
        #expect(failure.file == nil)
    }

    @Test func everyListedEnvironmentOverrideIsHonoured() throws {
        // A value no setting accepts as a size, a verify mode or a path (it is relative): each
        // listed variable that takes one must reject it, naming the variable; the text settings
        // take any text.
        let file = try TemporaryConfigFile("")
        let text: [String: KeyPath<Config, String?>] = [
            "s3.endpoint": \.s3.endpoint, "s3.bucket": \.s3.bucket,
        ]
        for (variable, key) in Config.environmentOverrides {
            let environment = [variable: "not-a-value"]
            if let path = text[key] {
                let config = try Config.load(explicitPath: file.path, environment: environment)
                #expect(config[keyPath: path] == "not-a-value", "\(variable)")
            } else if key == "s3.region" {
                #expect(try Config.load(explicitPath: file.path, environment: environment).s3.region == "not-a-value")
            } else {
                let failure = try configFailure { try Config.load(explicitPath: file.path, environment: environment) }
                #expect(failure.key == variable)
            }
        }
        #expect(Set(Config.environmentOverrides.map(\.variable))
            == ["INGEST_STATE_DIR", "INGEST_STAGING_RESERVE", "INGEST_STAGING_VERIFY", "INGEST_ENDPOINT", "INGEST_BUCKET",
                "AWS_REGION", "INGEST_TUS_HEADERS_FILE"])
    }

    @Test func uploadSettingsAreReadAndCheckedAgainstS3Limits() throws {
        let config = try Config.parse("""
            [s3]
            endpoint = "http://127.0.0.1:8333"
            bucket = "cards"
            prefix = "field/"
            key_template = "{device}/{path}"
            object_tags = ["device", "scene"]
            stall_timeout = "5s"
            [upload]
            part_size = "8MiB"
            parts_in_flight = 6
            checksum = "md5"
            [staging]
            retention = "7d"
            [device]
            id = "station-7"
            tags = { site = "north" }
            [scene]
            name = "survey"
            """)
        #expect(try config.s3.target() == S3Destination(
            endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path))
        #expect(config.s3.transport.lowSpeedTime == .seconds(5))
        #expect(config.upload.partSize == 8 << 20)
        #expect(config.upload.partsInFlight == 6)
        #expect(config.upload.checksum == .md5)
        #expect(config.upload.stagingRetention == .seconds(7 * 86400))
        #expect(config.device.tags == ["site": "north"])
        #expect(config.scene.name == "survey")

        #expect(try configFailure { try Config.parse("[upload]\npart_size = \"1MiB\"\n") }.problem.contains("upload.part_size"))
        #expect(try configFailure { try Config.parse("[s3]\nkey_template = \"{device}\"\n") }.key == "s3.key_template")
        #expect(try configFailure { try Config.parse("[upload]\nparts_in_flight = 0\n") }.key == "upload.parts_in_flight")
        #expect(try configFailure { try Config.parse("[staging]\nretention = \"soon\"\n") }.key == "staging.retention")
        #expect(try configFailure { () throws -> Config in
            let empty = Config()
            _ = try empty.s3.target()
            return empty
        }.key == "s3.endpoint")
    }

    @Test func plainHTTPToAnotherHostNeedsAllowHTTPAndLoopbackNeverDoes() throws {
        for endpoint in ["http://127.0.0.1:8333", "http://localhost:9000", "http://[::1]:8333", "https://s3.example.net"] {
            let config = try Config.parse("[s3]\nendpoint = \"\(endpoint)\"\nbucket = \"cards\"\n")
            _ = try config.s3.target()
        }
        for endpoint in ["http://10.0.0.5:8333", "http://s3.example.net", "http://127.example.net", "http://128.0.0.1"] {
            let config = try Config.parse("[s3]\nendpoint = \"\(endpoint)\"\nbucket = \"cards\"\n")
            let refused = try configFailure { () throws -> Config in
                _ = try config.s3.target()
                return config
            }
            #expect(refused.key == "s3.allow_http", "\(endpoint)")
            #expect(refused.problem.contains("Use https") && refused.problem.contains("allow_http = true"))
            let allowed = try Config.parse("[s3]\nendpoint = \"\(endpoint)\"\nbucket = \"cards\"\nallow_http = true\n")
            _ = try allowed.s3.target()
        }
        #expect(try configFailure { try Config.parse("[s3]\nallow_http = \"yes\"\n") }.key == "s3.allow_http")
        #expect(try Config.parse("[upload]\nsign_payloads = true\n").upload.signPayloads)
    }

    @Test func theCardDoneHookAndItsTimeoutAreReadAndChecked() throws {
        let none = try Config.parse("")
        #expect(none.hooks.onCardDone == nil)
        #expect(none.hooks.timeout == .seconds(30))
        let config = try Config.parse("[hooks]\non_card_done = \"/usr/local/bin/card-done --to 'dash board'\"\ntimeout = \"5s\"\n")
        #expect(config.hooks.onCardDone == "/usr/local/bin/card-done --to 'dash board'")
        #expect(config.hooks.timeout == .seconds(5))
        let empty = try configFailure { try Config.parse("[hooks]\non_card_done = \"  \"\n") }
        #expect(empty.key == "hooks.on_card_done")
        #expect(empty.problem.contains("give a command"))
        for timeout in ["0s", "2h"] {
            let wrong = try configFailure { try Config.parse("[hooks]\ntimeout = \"\(timeout)\"\n") }
            #expect(wrong.key == "hooks.timeout")
            #expect(wrong.problem.contains("at most 1h"))
        }
        #expect(try configFailure { try Config.parse("[hooks]\non_card_start = \"x\"\n") }.key == "hooks.on_card_start")
        #expect(try configFailure { try Config.parse("[hooks]\non_card_done = [\"x\"]\n") }.key == "hooks.on_card_done")
    }

    @Test func watchTakesTwoCardsAtOnceUnlessConfiguredAndTheBoundIsChecked() throws {
        #expect(try Config.parse("").watch.maxCards == 2)
        #expect(try Config.parse("[watch]\nmax_cards = 4\n").watch.maxCards == 4)
        let zero = try configFailure { try Config.parse("[watch]\nmax_cards = 0\n") }
        #expect(zero.key == "watch.max_cards")
        #expect(zero.problem.contains("outside 1…16"))
        #expect(try configFailure { try Config.parse("[watch]\ncards = 2\n") }.key == "watch.cards")
    }

    @Test func maxRateCapsTheUploadTransportAndIsOffByDefault() throws {
        #expect(try Config.parse("").upload.maxRate == nil)
        #expect(try Config.parse("").uploadTransport.maxSendRate == nil)
        let capped = try Config.parse("[upload]\nmax_rate = \"2MiB/s\"\n")
        #expect(capped.upload.maxRate == ByteRate(bytesPerSecond: 2 << 20))
        #expect(capped.uploadTransport.maxSendRate == ByteRate(bytesPerSecond: 2 << 20))
        #expect(try Config.parse("[upload]\nmax_rate = \"10 MB/s\"\n").upload.maxRate == ByteRate(bytesPerSecond: 10_000_000))
        #expect(try Config.parse("[upload]\nmax_rate = \"off\"\n").upload.maxRate == nil)
    }

    @Test(arguments: ["0", "0MiB/s", "-2MiB/s", "fast", "2Mbit/s", "2MiB/h", "", "2"])
    func aMaxRateThatIsNoUsableRateIsRejectedNamingTheKeyWithAnExample(text: String) throws {
        let failure = try configFailure { try Config.parse("[upload]\nmax_rate = \"\(text)\"\n", file: "/etc/x.toml") }
        #expect(failure.key == "upload.max_rate")
        #expect(failure.problem.contains("'\(text)'"))
        #expect(failure.problem.contains("\"2MiB/s\""), "\(failure.problem)")
    }

    @Test func aMaxRateBelowTheSlowestCapSaysWhatTheSlowestIs() throws {
        let failure = try configFailure { try Config.parse("[upload]\nmax_rate = \"1KiB/s\"\n") }
        #expect(failure.problem.contains("below 16.0 KiB/s"), "\(failure.problem)")
    }

    // MARK: loading

    @Test func missingExplicitFileFails() throws {
        let directory = try TemporaryConfigFile("")
        let missing = directory.directory.appendingPathComponent("absent.toml").path
        let failure = try configFailure { try Config.load(explicitPath: missing, environment: [:]) }
        #expect(failure.file == missing)
        #expect(failure.key == nil)
    }

    @Test(.enabled(if: !FileManager.default.fileExists(atPath: Config.defaultPath), "needs no \(Config.defaultPath)"))
    func missingDefaultFileIsFine() throws {
        let config = try Config.load(explicitPath: nil, environment: ["INGEST_STAGING_VERIFY": "both"])
        #expect(config.source == nil)
        #expect(config.stateDirectory == nil)
        #expect(config.staging.verify == .both)
    }

    @Test func explicitFileIsReadAndNamedAsTheSource() throws {
        let file = try TemporaryConfigFile(fullConfig)
        let config = try Config.load(explicitPath: file.path, environment: [:])
        #expect(config.source == file.path)
        #expect(config.stateDirectory == "/var/lib/ingest")
    }

    @Test func errorsInALoadedFileNameTheFile() throws {
        let file = try TemporaryConfigFile("[staging]\nverify = \"never\"\n")
        let failure = try configFailure { try Config.load(explicitPath: file.path, environment: [:]) }
        #expect(failure.file == file.path)
        #expect(failure.key == "staging.verify")
    }

    @Test func explicitPathThatIsADirectoryFails() throws {
        let file = try TemporaryConfigFile("")
        let failure = try configFailure { try Config.load(explicitPath: file.directory.path, environment: [:]) }
        #expect(failure.file == file.directory.path)
    }

    // MARK: [rescan]

    @Test func rescanRootsAndMetricsFileAreRead() throws {
        let config = try Config.parse("""
            [rescan]
            roots = ["/srv/incoming", "/media/usb/DCIM"]
            metrics_file = "/var/lib/prometheus/node-exporter/ingest.prom"
            """)
        #expect(config.rescan.roots == ["/srv/incoming", "/media/usb/DCIM"])
        #expect(config.rescan.metricsFile == "/var/lib/prometheus/node-exporter/ingest.prom")
    }

    @Test func rescanDefaultsToNoRootsAndNoMetrics() throws {
        #expect(try Config.parse("").rescan == RescanSettings())
        #expect(RescanSettings().roots.isEmpty)
        #expect(RescanSettings().metricsFile == nil)
    }

    @Test(arguments: ["roots = [\"incoming\"]", "metrics_file = \"ingest.prom\""])
    func rescanPathsMustBeAbsolute(line: String) throws {
        let failure = try configFailure { try Config.parse("[rescan]\n\(line)\n") }
        #expect(failure.key?.hasPrefix("rescan.") == true)
        #expect(failure.problem.contains("absolute"))
    }

    @Test func rescanRootsMustBeAnArrayOfStrings() throws {
        #expect(try configFailure { try Config.parse("[rescan]\nroots = \"/srv/incoming\"\n") }.key == "rescan.roots")
        #expect(try configFailure { try Config.parse("[rescan]\nroots = [1]\n") }.key == "rescan.roots")
    }

    @Test func orphanUploadAgeIsADurationOrOffAndSevenDaysByDefault() throws {
        #expect(try Config.parse("").rescan.orphanUploadAge == .seconds(86400))
        #expect(try Config.parse("[rescan]\norphan_upload_age = \"36h\"\n").rescan.orphanUploadAge == .seconds(36 * 3600))
        #expect(try Config.parse("[rescan]\norphan_upload_age = \"0s\"\n").rescan.orphanUploadAge == .zero)
        #expect(try Config.parse("[rescan]\norphan_upload_age = \"off\"\n").rescan.orphanUploadAge == nil)
        let failure = try configFailure { try Config.parse("[rescan]\norphan_upload_age = \"a week\"\n") }
        #expect(failure.key == "rescan.orphan_upload_age")
        #expect(failure.problem.contains("\"7d\""), "the error shows how to write one")
    }

    @Test func unknownKeyInRescanIsNamedWithTheKnownOnes() throws {
        let failure = try configFailure { try Config.parse("[rescan]\nroot = [\"/srv\"]\n") }
        #expect(failure.key == "rescan.root")
        #expect(failure.problem.contains("rescan.roots"))
        #expect(failure.problem.contains("rescan.metrics_file"))
    }
}

/// A NUL in the config is never silently cut short: TOMLKit's C strings would end a value
/// (or the whole file) at it.
@Suite struct ConfigNULTests {
    @Test(arguments: [
        ("[device]\nid = \"station\\u00007\"\n", "device"),
        ("[device]\ntags = { site = \"north\\u0000x\" }\n", "site"),
        ("[scene]\nname = \"survey\\u0000\"\n", "scene"),
        ("[scene.tags]\noperator = \"li\\u0000\"\n", "operator"),
    ])
    func aNULInALabelIsALabelErrorNamingTheKey(text: String, key: String) throws {
        let error = try #require(throws: IngestError.self) { try Config.parse(text, file: "/etc/ingest/ingest.toml") }
        #expect(error.exitStatus == .dataError, "\(error)")
        #expect(error.description.contains("label '\(key)'"), "\(error)")
        #expect(error.description.contains("U+0000"))
        #expect(error.description.contains("/etc/ingest/ingest.toml"))
    }

    @Test func aNULInAnyOtherStringIsAConfigErrorNamingTheKey() throws {
        let failure = try configFailure { try Config.parse("[s3]\nbucket = \"cards\\u0000x\"\n", file: "/c.toml") }
        #expect(failure.key == "s3.bucket")
        #expect(failure.problem.contains("U+0000"))
    }

    @Test func aRawNULIsAConfigErrorSayingWhereNotAFileCutShort() throws {
        let failure = try configFailure {
            try Config.parse("[device]\nid = \"a\"\n\u{0}\n[s3]\nbucket = \"x\"\n", file: "/c.toml")
        }
        #expect(failure.problem.contains("line 3, column 1"), "\(failure.problem)")
        #expect(failure.problem.contains("U+0000"))
    }

    @Test func datesFloatsAndEmojiRaiseNoFalseAlarmAndArraysAreSearched() throws {
        // Unknown keys, so the file fails after the NUL check: with the unknown key, not a NUL.
        let clean = try configFailure {
            try Config.parse(
                "a = 1979-05-27T07:32:00Z\nb = inf\nc = nan\nd = \"😀 été\"\ne = [1, \"x\", { f = 2.5 }]\n", file: "/c.toml")
        }
        #expect(!clean.problem.contains("U+0000"), "\(clean.problem)")
        let nested = try configFailure { try Config.parse("[s3]\nobject_tags = [\"device\", \"a\\u0000\"]\n", file: "/c.toml") }
        #expect(nested.key == "s3.object_tags.1", "\(nested.description)")
    }
}
