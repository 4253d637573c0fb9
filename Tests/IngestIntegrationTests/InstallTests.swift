import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `make install` and `make uninstall` into a DESTDIR, with the release build `make test` made
/// (`BINARY=`): the only kind `make install` takes.
@Suite struct InstallTests {
    /// Runs a make target of the checkout with DESTDIR and BINARY (the release build unless given) set.
    static func make(_ target: String, destdir: String, _ variables: [String: String] = [:], binary: String? = nil)
        throws -> ProcessResult
    {
        let binary = try binary ?? ReleaseBinary.required()
        let assignments = (["DESTDIR": destdir, "BINARY": binary].merging(variables) { $1 })
            .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return try run("/usr/bin/make", ["-C", Repository.root, "--no-print-directory", target] + assignments)
    }

    /// Every file `make install` puts in place for a PREFIX, with its mode. The rule and units
    /// go where udev and systemd read them whatever the PREFIX; the configuration where
    /// `ingest` reads it.
    static func expectedFiles(prefix: String) -> [String: String] {
        [
            "\(prefix)/bin/ingest": "755",
            "/usr/lib/udev/rules.d/99-ingest.rules": "644",
            "/usr/lib/systemd/system/ingest@.service": "644",
            "/usr/lib/systemd/system/ingest-rescan.service": "644",
            "/usr/lib/systemd/system/ingest-rescan.timer": "644",
            "\(prefix)/share/man/man1/ingest.1": "644",
            "\(prefix)/share/man/man5/ingest.toml.5": "644",
            "\(prefix)/share/doc/ingest/ingest.toml.example": "644",
            "\(prefix)/share/doc/ingest/ingest.cron": "644",
            "/etc/ingest/ingest.toml": "644",
        ]
    }

    /// The regular files under `root`, by absolute path inside it, with their octal modes.
    static func files(under root: String) throws -> [String: String] {
        var files: [String: String] = [:]
        for line in try sh("cd \(shellQuoted(root)) && find . -type f -printf '/%P %m\\n'").split(separator: "\n") {
            let fields = line.split(separator: " ")
            files[String(fields[0])] = String(fields[1])
        }
        return files
    }

    @Test(arguments: ["/usr", "/usr/local"])
    func installPutsEveryFileAtItsDocumentedPlace(prefix: String) throws {
        let destdir = TemporaryDirectory()
        let result = try Self.make("install", destdir: destdir.path, ["PREFIX": prefix])
        #expect(result.status == 0, "\(result.stderr)")

        #expect(try Self.files(under: destdir.path) == Self.expectedFiles(prefix: prefix))
        var state = stat()
        #expect(stat(destdir.path + "/var/lib/ingest", &state) == 0)
        #expect(state.st_mode & S_IFMT == S_IFDIR)
        #expect(state.st_mode & 0o7777 == 0o700, "the state directory holds the journal and staged copies: 0700")

        // The binary given, the repository's rule, man pages and example, byte for byte.
        let same: [(String, String)] = [
            (try ReleaseBinary.required(), "\(prefix)/bin/ingest"),
            (Repository.root + "/udev-rules/99-ingest.rules", "/usr/lib/udev/rules.d/99-ingest.rules"),
            (Repository.root + "/man/ingest.1", "\(prefix)/share/man/man1/ingest.1"),
            (Repository.root + "/man/ingest.toml.5", "\(prefix)/share/man/man5/ingest.toml.5"),
            (Repository.root + "/etc/ingest.toml.example", "\(prefix)/share/doc/ingest/ingest.toml.example"),
            (Repository.root + "/etc/ingest.toml.example", "/etc/ingest/ingest.toml"),
        ]
        for (source, installed) in same {
            #expect(FileManager.default.contentsEqual(atPath: source, andPath: destdir.path + installed), "\(installed)")
        }

        // The units and the cron example run the installed binary.
        let binary = "\(prefix)/bin/ingest"
        let commands = [
            "/usr/lib/systemd/system/ingest@.service": "ExecStart=\(binary) --device /dev/%I",
            "/usr/lib/systemd/system/ingest-rescan.service": "ExecStart=\(binary) rescan",
            "/usr/lib/systemd/system/ingest-rescan.timer": "",
            "\(prefix)/share/doc/ingest/ingest.cron": " \(binary) rescan",
        ]
        for (path, command) in commands {
            let text = try String(contentsOfFile: destdir.path + path, encoding: .utf8)
            #expect(!text.contains("@BINDIR@"), "\(path) has a placeholder left")
            #expect(command.isEmpty || text.contains(command), "\(path) runs \(command)")
        }
    }

    /// A cron.d line: five schedule fields, the user, the command; or a variable.
    @Test func theCronExampleRunsOneNightlyRescanUnderALockAsRoot() throws {
        let destdir = TemporaryDirectory()
        let result = try Self.make("install", destdir: destdir.path, ["PREFIX": "/usr"])
        #expect(result.status == 0, "\(result.stderr)")
        let text = try String(contentsOfFile: destdir.path + "/usr/share/doc/ingest/ingest.cron", encoding: .utf8)
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace) }
        var jobs: [[Substring]] = []  // a job's command keeps its spaces
        for line in lines {
            if line.range(of: #"^[A-Z_]+=\S+$"#, options: .regularExpression) != nil { continue }
            jobs.append(line.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: true))
        }
        #expect(jobs.count == 1, "\(lines)")
        let job = try #require(jobs.first).map { $0.trimmingCharacters(in: .whitespaces) }
        try #require(job.count == 7, "m h dom mon dow user command: \(job)")
        let (minute, hour) = (Int(job[0]), Int(job[1]))
        #expect(minute.map { (0...59).contains($0) } == true && hour.map { (0...23).contains($0) } == true, "once a night: \(job)")
        #expect(job[2...4] == ["*", "*", "*"], "every day")
        #expect(job[5] == "root")
        #expect(
            job[6].hasPrefix("test -d /run/systemd/system || flock -n "),
            "where systemd runs, its timer does the rescan; a run still going skips the next: \(job[6])")
        #expect(job[6].contains(" /usr/bin/ingest rescan"))
    }

    @Test func installKeepsAnExistingConfiguration() throws {
        let destdir = TemporaryDirectory()
        #expect(try Self.make("install", destdir: destdir.path).status == 0)
        let config = destdir.path + "/etc/ingest/ingest.toml"
        try "[s3]\nbucket = \"mine\"\n".write(toFile: config, atomically: true, encoding: .utf8)

        let again = try Self.make("install", destdir: destdir.path)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "[s3]\nbucket = \"mine\"\n")
        #expect(again.stdoutText.contains("kept"), "\(again.stdoutText)")
    }

    @Test func uninstallRemovesAllButTheConfigurationAndTheState() throws {
        let destdir = TemporaryDirectory()
        #expect(try Self.make("install", destdir: destdir.path, ["PREFIX": "/usr"]).status == 0)
        try "journal".write(toFile: destdir.path + "/var/lib/ingest/journal.sqlite", atomically: true, encoding: .utf8)

        let result = try Self.make("uninstall", destdir: destdir.path, ["PREFIX": "/usr"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Self.files(under: destdir.path) == ["/etc/ingest/ingest.toml": "644", "/var/lib/ingest/journal.sqlite": "644"])
    }

    /// A debug build carries the tests' fault hooks: its `--version` says what it is, and
    /// `make install` refuses it on that word, installing nothing.
    @Test func installRefusesADebugBuildAndInstallsNothing() throws {
        let debug = try run(IngestBinary.path, ["--version"])
        #expect(debug.stdoutText.contains("ingest \(IngestVersion.number) debug build ("), "\(debug.stdoutText)")
        let release = try run(try ReleaseBinary.required(), ["--version"])
        #expect(release.status == 0 && !release.stdoutText.contains("debug"), "\(release.stdoutText)")

        let destdir = TemporaryDirectory()
        let result = try Self.make("install", destdir: destdir.path, binary: IngestBinary.path)
        #expect(result.status != 0)
        #expect(result.stderr.contains("is a debug build") && result.stderr.contains("make release"), "\(result.stderr)")
        #expect(try Self.files(under: destdir.path).isEmpty)
    }

    @Test func installWithoutABinarySaysToBuildOneAndInstallsNothing() throws {
        let destdir = TemporaryDirectory()
        let result = try Self.make("install", destdir: destdir.path, binary: destdir.path + "/no-such-build/ingest")
        #expect(result.status != 0)
        #expect(result.stderr.contains("make release"), "\(result.stderr)")
        #expect(try Self.files(under: destdir.path).isEmpty)
    }
}
