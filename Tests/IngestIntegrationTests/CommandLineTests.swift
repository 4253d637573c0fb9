import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// The command line as scripts and people meet it: help, errors, exit statuses, dry runs.
@Suite struct CommandLineTests {
    @Test func helpTeachesTheCommandsAndTheExitStatuses() throws {
        let help = try IngestRun.ingest(["--help"])
        #expect(help.status == 0)
        let text = help.result.stdoutText
        for word in ["run", "scan", "status", "--state-dir", "--config", "--json", "Exit status", "66", "73", "74", "75", "78"] {
            #expect(text.contains(word), "--help mentions \(word)")
        }
        let runHelp = try IngestRun.ingest(["run", "--help"])
        for option in ["--no-upload", "--verify", "--verify-source", "--include", "--exclude", "--reserve"] {
            #expect(runHelp.result.stdoutText.contains(option), "run --help mentions \(option)")
        }
    }

    /// What the help says of options and defaults is what they are: `status` takes
    /// `--check-bucket`, `rescan`'s usage names its options, and its orphan sweep's default
    /// age is the one the configuration uses (one day).
    @Test func theUsageLinesNameTheRealOptionsAndTheOrphanAgeItsRealDefault() throws {
        #expect(try IngestRun.ingest(["--help"]).result.stdoutText.contains("ingest status [--check-bucket] [--json]"))
        let rescan = try IngestRun.ingest(["rescan", "--help"]).result.stdoutText
        #expect(rescan.contains("USAGE: ingest rescan [--root <path>]"), "\(rescan.prefix(300))")
        #expect(!rescan.contains("<options>"))
        #expect(rescan.contains("orphan_upload_age (default 1d"))
        #expect(IngestKit.RescanSettings.defaultOrphanUploadAge == .seconds(86_400))
    }

    /// A directory that holds the state directory is no card: its journal, locks and staged
    /// copies would be ingested, and it would never be safe to erase. Refused (78), naming
    /// both, before anything is staged.
    @Test func aCardPathThatHoldsTheStateDirectoryIsRefused() throws {
        let dir = TemporaryDirectory()
        try dir.write("DCIM/IMG_0001.JPG", randomBytes(1_000))
        for path in [dir.path, dir.path + "/."] {
            let run = try IngestRun.ingest([path, "--no-upload", "--state-dir", dir.path + "/state", "--json"])
            #expect(run.status == 78, "\(path): \(run.stderr)")
            #expect(run.stderr.contains("holds the state directory"), "\(run.stderr)")
            #expect(run.events("staged").isEmpty)
        }
        let elsewhere = TemporaryDirectory()
        #expect(try IngestRun.ingest([dir.path, "--no-upload", "--state-dir", elsewhere.path]).status == 0)
    }

    /// `--tag` without `=` is a label the run cannot make: 65, as the README's table says for
    /// labels, with the form to use.
    @Test func aTagWithoutAnEqualsSignExitsAsInvalidLabelsShowingTheForm() throws {
        let dir = TemporaryDirectory()
        try dir.write("DCIM/IMG_0001.JPG", randomBytes(1_000))
        let run = try IngestRun.ingest([dir.path, "--no-upload", "--state-dir", dir.path + "-state", "--tag", "noequals"])
        #expect(run.status == 65, "\(run.stderr)")
        #expect(run.stderr.contains("--tag site=km12"), "\(run.stderr)")
    }

    @Test func versionNamesTheLinkedLibraries() throws {
        let version = try IngestRun.ingest(["--version"])
        #expect(version.status == 0)
        #expect(version.result.stdoutText.contains("libxxhash 0.8"))
        #expect(version.result.stdoutText.contains("libcurl"))
    }

    @Test func aRelativeStateDirectoryIsMadeInTheWorkingDirectory() throws {
        let work = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/a.JPG", [1, 2, 3])
        let command = "cd \(shellQuoted(work.path)) && exec \(shellQuoted(IngestBinary.path)) \(shellQuoted(card.path)) --no-upload --state-dir new/state"
        let result = try run("/bin/sh", ["-c", command], environment: IngestRun.environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: work.path + "/new/state/journal.sqlite"))
    }

    /// A name with a newline or an escape sequence cannot forge a line or drive the
    /// operator's terminal: the console and the log show it escaped.
    @Test func namesWithControlCharactersAreShownEscapedOnTheConsoleAndInTheLog() throws {
        let card = TemporaryDirectory()
        let state = TemporaryDirectory()
        try card.write(rawName: Array("clear\u{1B}[2J\u{1B}]0;owned\u{07}.jpg".utf8), [1, 2, 3])
        try card.write(rawName: Array("two\nlines.jpg".utf8), [4, 5, 6])
        let fifo = card.path + "/pipe\u{1B}[31m\nFAKE: all uploaded"
        #expect(mkfifo(fifo, 0o600) == 0)
        let run = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path, "-v"])
        #expect(run.status == 0, "\(run.stderr)")
        let output = run.result.stdoutText + run.stderr
        #expect(!output.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, "\(output.debugDescription)")
        #expect(output.contains("pipe\\x1B[31m\\nFAKE: all uploaded"), "\(output)")
        #expect(!output.split(separator: "\n").contains { $0.hasPrefix("FAKE") })
    }

    @Test func aMissingPathExitsNoInputNamingIt() throws {
        let state = TemporaryDirectory()
        let run = try IngestRun.ingest(["/nonexistent/card", "--no-upload", "--state-dir", state.path])
        #expect(run.status == 66)
        #expect(run.stderr.contains("/nonexistent/card"))
        #expect(run.stderr.contains("mounted"))
    }

    @Test func aFileInsteadOfADirectoryExitsNoInput() throws {
        let state = TemporaryDirectory()
        let file = try state.write("photo.jpg", [1, 2, 3])
        let run = try IngestRun.ingest([file, "--no-upload", "--state-dir", state.path])
        #expect(run.status == 66)
        #expect(run.stderr.contains("not a directory"))
    }

    @Test func aMalformedBucketNameExits78BeforeAnythingIsRecorded() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/a.JPG", [1, 2, 3])
        _ = try card.write("DCIM/b.JPG", [4, 5, 6, 7])
        let state = dir.path + "/state"
        // Staged without uploading: the journal knows the files and no upload.
        let staged = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state, "--json"])
        #expect(staged.status == 0, "\(staged.stderr)")

        // Nothing listens at the endpoint: the name must be refused before anything is tried.
        let endpoint = ["--endpoint", "http://127.0.0.1:9"]
        let config = try dir.write("ingest.toml", Array("[s3]\nbucket = \"Field_Cards\"\n".utf8))
        let attempts: [(arguments: [String], environment: [String: String], origin: String)] = [
            ([card.path] + endpoint + ["--bucket", "Field_Cards"], [:], "--bucket"),
            ([card.path] + endpoint, ["INGEST_BUCKET": "field..cards"], "INGEST_BUCKET"),
            ([card.path] + endpoint, ["INGEST_CONFIG": config], "[s3] bucket"),
            (["rescan", "--root", card.path] + endpoint + ["--bucket", "192.168.1.20"], [:], "--bucket"),
        ]
        for attempt in attempts {
            let run = try IngestRun.ingest(
                attempt.arguments + ["--state-dir", state, "--json"], environment: attempt.environment)
            #expect(run.status == 78, "\(attempt.arguments): \(run.stderr)")
            #expect(run.stderr.contains("is not a valid S3 bucket name"), "\(run.stderr)")
            #expect(run.stderr.contains(attempt.origin), "the message says where to fix it: \(run.stderr)")
            #expect(run.events("staged").isEmpty && run.events("upload_started").isEmpty)
        }
        #expect(try IngestRun.ingest(["--bucket", "Field_Cards", "--state-dir", state, card.path, "--endpoint", "http://127.0.0.1:9"])
            .stderr.contains("'field-cards'"), "a valid name close to it is suggested")

        let status = try #require(
            try IngestRun.ingest(["status", "--state-dir", state, "--json"]).events("status").first)
        #expect(status.int("files_staged") == 2, "the files stay as they were")
        #expect(status.int("uploads_pending") == 0, "no upload was recorded against a bucket that cannot exist")
        #expect(status.int("uploads_completed") == 0)
    }

    @Test func aBadConfigNamesTheFileTheKeyAndTheProblemAndExits78() throws {
        let dir = TemporaryDirectory()
        let config = try dir.write("ingest.toml", Array("[staging]\nreserve = \"lots\"\n".utf8))
        let card = try dir.write("card/a.jpg", [1])
        var environment = IngestRun.environment
        environment["INGEST_CONFIG"] = config
        let result = try run(
            IngestBinary.path, [(card as NSString).deletingLastPathComponent, "--no-upload", "--state-dir", dir.path + "/state"],
            environment: environment)
        #expect(result.status == 78)
        #expect(result.stderr.contains(config))
        #expect(result.stderr.contains("staging.reserve"))
        #expect(result.stderr.contains("'lots' is not a size"))
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/state"), "nothing is created before the config is valid")
    }

    @Test func aMissingExplicitConfigIsAnError() throws {
        let dir = TemporaryDirectory()
        let run = try IngestRun.ingest(["status", "--config", dir.path + "/none.toml", "--state-dir", dir.path])
        #expect(run.status == 78)
        #expect(run.stderr.contains("none.toml"))
    }

    @Test func scanIsADryRunThatCountsAndCopiesNothing() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/a.jpg", randomBytes(1000))
        try card.write("DCIM/b.jpg", randomBytes(500))
        try card.write(".Trashes/x", [1])

        let scan = try IngestRun.ingest(["scan", card.path, "--state-dir", state.path, "--json"])

        #expect(scan.status == 0)
        #expect(Set(scan.events("would-stage").compactMap { $0.string("path") }) == ["DCIM/a.jpg", "DCIM/b.jpg"])
        let totals = try #require(scan.events("scanned").first)
        #expect(totals.int("to_stage") == 2)
        #expect(totals.int("to_stage_bytes") == 1500)
        #expect(totals.int("skipped") == 1)
        #expect(!FileManager.default.fileExists(atPath: state.path + "/staging"))

        // After an ingest the same scan finds everything known.
        #expect(try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path]).status == 0)
        let again = try IngestRun.ingest(["scan", card.path, "--state-dir", state.path, "--json"])
        #expect(again.events("scanned").first?.int("known") == 2)
        #expect(again.events("would-stage").isEmpty)
    }

    @Test func thePeopleViewSaysWhatHappenedInPlainWords() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/a.jpg", randomBytes(2048))
        try card.write("empty.txt", [])
        let run = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path])
        #expect(run.status == 0)
        #expect(run.stderr.contains("Found 2 files to copy"))
        #expect(run.stderr.contains("Staged 2 files"))
        #expect(run.stderr.contains("empty file"))
        #expect(!run.stderr.contains("\u{1B}["), "no progress drawing when not on a terminal")

        let status = try IngestRun.ingest(["status", "--state-dir", state.path])
        // Every state by its whole name, the counts in one column.
        #expect(status.result.stdoutText.contains("  staged    2"))
        #expect(status.result.stdoutText.contains("  forgotten 0"))
        #expect(status.result.stdoutText.contains(card.path))
    }

    /// An https:// endpoint whose server speaks plain http is named as such, with the URL to
    /// use, at once: not a broken connection retried five times, not the network (69) but
    /// the configuration (78). The secret is never shown.
    @Test(.timeLimit(.minutes(1)))
    func httpsToAPlainHTTPServerSaysToUseHTTPAtOnceAndExits78() throws {
        let server = try EchoServer()
        let host = "127.0.0.1:\(server.port)"
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/a.jpg", randomBytes(1000))
        let secret = "plain-http-secret-\(UInt32.random(in: 0...UInt32.max))"
        let credentials = ["AWS_ACCESS_KEY_ID": "AKIDPLAINHTTP", "AWS_SECRET_ACCESS_KEY": secret]
        let started = Date()
        let run = try IngestRun.ingest(
            [card.path, "--endpoint", "https://\(host)", "--bucket", "cards", "--state-dir", state.path],
            environment: credentials)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(run.stderr.contains(
            "the server at https://\(host) speaks plain http, not https: use http://\(host) in the endpoint"), "\(run.stderr)")
        #expect(!run.stderr.contains("attempts"), "sent once: \(run.stderr)")
        #expect(!run.stderr.contains("connection broke"), "\(run.stderr)")
        #expect(!run.stderr.contains(secret))
        #expect(Date().timeIntervalSince(started) < 20)

        let check = try IngestRun.ingest(
            ["check", "--no-station", "--json", "--endpoint", "https://\(host)", "--bucket", "cards", "--state-dir", state.path],
            environment: credentials)
        #expect(check.status == 78, "\(check.result.stdoutText)")
        let bucket = try #require(check.events("check").first { $0.string("check") == "bucket" })
        #expect(bucket.string("status") == "fail")
        #expect(bucket.string("remedy") == "set the endpoint to http://\(host) (--endpoint, INGEST_ENDPOINT, [s3] endpoint)")
        #expect(!check.result.stdoutText.contains(secret))
    }

    /// `ls` and `check` cannot stage: without an endpoint they say how to set one, never
    /// `--no-upload`, which only `ingest PATH` has (and still suggests).
    @Test func withoutAnEndpointLsAndCheckSayHowToSetItAndOnlyARunSuggestsNoUpload() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("a.jpg", [1])
        let ls = try IngestRun.ingest(["ls", "--bucket", "cards", "--state-dir", state.path])
        #expect(ls.status == 78, "\(ls.stderr)")
        #expect(ls.stderr.contains("give --endpoint URL (or INGEST_ENDPOINT, or [s3] endpoint)"), "\(ls.stderr)")
        #expect(!ls.stderr.contains("--no-upload"), "\(ls.stderr)")

        let check = try IngestRun.ingest(["check", "--no-station", "--json", "--bucket", "cards", "--state-dir", state.path])
        #expect(check.status == 78, "\(check.result.stdoutText)")
        let configuration = try #require(check.events("check").first { $0.string("check") == "config" })
        #expect(configuration.string("status") == "fail")
        #expect(!check.result.stdoutText.contains("--no-upload"), "\(check.result.stdoutText)")
        #expect(configuration.string("remedy")?.contains("give --endpoint URL (INGEST_ENDPOINT)") == true, "\(configuration)")
        #expect(configuration.string("remedy")?.contains("correct it in the file") == false, "\(configuration)")

        let run = try IngestRun.ingest([card.path, "--bucket", "cards", "--state-dir", state.path])
        #expect(run.status == 78)
        #expect(run.stderr.contains("or use --no-upload to stage only"), "\(run.stderr)")
    }

    /// `check` with a configuration file that is not there says to create it, from where,
    /// from which example; not to correct it.
    @Test func checkWithAMissingConfigurationFileSaysHowToCreateIt() throws {
        let dir = TemporaryDirectory()
        let missing = dir.path + "/ingest.toml"
        let check = try IngestRun.ingest(
            ["check", "--no-station", "--json", "--config", missing, "--state-dir", dir.path + "/state"])
        #expect(check.status == 78, "\(check.result.stdoutText)")
        let configuration = try #require(check.events("check").first { $0.string("check") == "config" })
        let remedy = try #require(configuration.string("remedy"))
        #expect(remedy.hasPrefix("create \(missing) from the example (install -m 0644 "), "\(remedy)")
        #expect(remedy.contains("ingest.toml.example \(missing))"), "\(remedy)")
        #expect(remedy.contains("set [s3] endpoint and bucket in it"), "\(remedy)")
    }

    /// `forget` of a file id the journal does not have says there is no such file, not upload.
    @Test func forgettingAnUnknownFileIDSaysNoFileHasIt() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("a.jpg", [1, 2])
        #expect(try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path]).status == 0)
        let forget = try IngestRun.ingest(["forget", "file-999", "--state-dir", state.path])
        #expect(forget.status == 64, "\(forget.stderr)")
        #expect(forget.stderr.contains("no file with id 'file-999' in the journal"), "\(forget.stderr)")
        #expect(!forget.stderr.contains("no upload"), "\(forget.stderr)")
    }

    /// The dry run says it scans, and a count of one takes the singular.
    @Test func scanSaysScanningNotIngestingAndOneFileIsOneFile() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/a.jpg", randomBytes(100))
        let scan = try IngestRun.ingest(["scan", "--list", card.path, "--state-dir", state.path])
        #expect(scan.status == 0, "\(scan.stderr)")
        #expect(scan.stderr.hasPrefix("Scanning \(try realPath(card.path))"), "\(scan.stderr)")
        #expect(!scan.stderr.contains("Ingesting"), "\(scan.stderr)")
        #expect(scan.stderr.contains("Found 1 file to copy"), "\(scan.stderr)")

        let run = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path])
        #expect(run.stderr.hasPrefix("Ingesting "), "\(run.stderr)")
        #expect(run.stderr.contains("Staged 1 file ("), "\(run.stderr)")
    }

    @Test func everyNDJSONLineIsAnObjectWithAnEvent() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("a b/é.jpg", randomBytes(100))
        let run = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path, "--json"])
        let lines = run.result.stdoutText.split(separator: "\n")
        #expect(!lines.isEmpty)
        #expect(run.events.count == lines.count, "every line parses as a JSON object")
        #expect(run.events.allSatisfy { $0["event"] is String })
        let staged = try #require(run.events("staged").first)
        #expect(staged.string("path") == "a b/é.jpg")
        #expect(staged.int("size") == 100)
        #expect(staged.string("xxh128") == (try xxh128sum(card.path + "/a b/é.jpg")))
    }
}
