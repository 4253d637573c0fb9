import Testing

@testable import IngestKit

/// Paths in the configuration are absolute: a relative one would be taken from whatever
/// directory ingest was started in, which differs between a shell, systemd and cron.
@Suite struct ConfigPathTests {
    /// The error of `body`, which must be a configuration error (exit 78).
    private func refusal(_ body: () throws -> Void) throws -> (key: String?, description: String) {
        let error = try #require(throws: IngestError.self) { try body() }
        #expect(error.exitStatus == .config, "\(error)")
        guard case let .config(_, key, _) = error else {
            Issue.record("expected a configuration error, got \(error)")
            return (nil, error.description)
        }
        return (key, error.description)
    }

    @Test(arguments: [
        ("state_dir = \"state\"\n", "state_dir", "state", "/var/lib/ingest"),
        ("state_dir = \"./var/ingest\"\n", "state_dir", "./var/ingest", "/var/lib/ingest"),
        ("state_dir = \"../ingest\"\n", "state_dir", "../ingest", "/var/lib/ingest"),
        ("[rescan]\nroots = [\"/srv/a\", \"incoming\"]\n", "rescan.roots", "incoming", "/srv/incoming"),
        ("[rescan]\nmetrics_file = \"ingest.prom\"\n", "rescan.metrics_file", "ingest.prom",
         "/var/lib/prometheus/node-exporter/ingest.prom"),
    ])
    func aRelativePathInTheFileIsRefusedNamingTheKeyTheValueAndTheFix(
        text: String, key: String, value: String, example: String
    ) throws {
        let (refusedKey, description) = try refusal { _ = try Config.parse(text, file: "/etc/ingest/ingest.toml") }
        #expect(refusedKey == key)
        #expect(description.contains("key '\(key)'") && description.contains("/etc/ingest/ingest.toml"), "\(description)")
        #expect(description.contains("'\(value)' is a relative path"), "\(description)")
        #expect(description.contains("absolute path") && description.contains("\"\(example)\""), "\(description)")
    }

    @Test func aRelativeStateDirectoryFromTheEnvironmentIsRefusedToo() throws {
        var config = Config()
        let (key, description) = try refusal { try config.applyEnvironment(["INGEST_STATE_DIR": "state"]) }
        #expect(key == "INGEST_STATE_DIR")
        #expect(description.contains("'state' is a relative path"))
        try config.applyEnvironment(["INGEST_STATE_DIR": "/srv/ingest"])
        #expect(config.stateDirectory == "/srv/ingest")
    }

    @Test func absolutePathsAreKeptAsGiven() throws {
        let config = try Config.parse(
            "state_dir = \"/var/lib/ingest\"\n[rescan]\nroots = [\"/srv/incoming\"]\nmetrics_file = \"/run/ingest.prom\"\n")
        #expect(config.stateDirectory == "/var/lib/ingest")
        #expect(config.rescan.roots == ["/srv/incoming"] && config.rescan.metricsFile == "/run/ingest.prom")
    }

    @Test(arguments: [
        ("./card-done", "./card-done"), ("hooks/card-done --json", "hooks/card-done"),
        ("\"bin/card done\" x", "bin/card"), ("LANG=C ./notify", "./notify"),
    ])
    func aHookRunningARelativePathIsRefused(command: String, program: String) throws {
        let text = "[hooks]\non_card_done = '\(command)'\n"
        let (key, description) = try refusal { _ = try Config.parse(text) }
        #expect(key == "hooks.on_card_done")
        #expect(description.contains("runs '\(program)', a relative path"), "\(description)")
        #expect(description.contains("\"/usr/local/bin/card-done\""))
    }

    @Test(arguments: [
        "/usr/local/bin/card-done --to 'dash board'", "logger -t ingest", "LANG=C /usr/bin/notify ./relative-argument",
        "~/bin/card-done",
    ])
    func aHookRunningAnAbsolutePathOrACommandFromPATHIsAccepted(command: String) throws {
        let config = try Config.parse("[hooks]\non_card_done = \"\(command)\"\n")
        #expect(config.hooks.onCardDone == command)
    }
}
