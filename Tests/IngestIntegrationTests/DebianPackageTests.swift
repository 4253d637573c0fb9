import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// `make deb`: the Debian package of the release build `make test` already has (never
/// rebuilt here). Lintian passes it; its files and control fields are the ones promised; it
/// installs into a scratch root with `dpkg --root`, where the packaged binary runs and
/// `ingest check` finds the rule, the units and the timer enabled; a purge takes the
/// configuration away and leaves the state.
@Suite struct DebianPackageTests {
    /// `make deb` with BINARY, its package written into `directory`. xz at level 1: lintian
    /// and dpkg read it as they read the default level, in a fraction of the time.
    static func makeDeb(binary: String, into directory: String) throws -> ProcessResult {
        try run(
            "/usr/bin/make",
            ["-C", Repository.root, "--no-print-directory", "deb", "BINARY=\(binary)", "DEB_DIR=\(directory)",
             "DEB_COMPRESSION=-Zxz -z1"])
    }

    /// The version `ingest --version` prints, as its one definition in the source says it.
    static var sourceVersion: String { IngestVersion.number }

    /// `dpkg` on the scratch root `root`. Its maintainer scripts run outside it
    /// (--force-script-chrootless, DPKG_ROOT set: they change only the root's files, and
    /// leave the host's systemd and udev alone); its database knows no library, so the
    /// dependencies are not looked for (the host has them, and the binary runs with them).
    static func dpkg(root: String, _ arguments: [String]) throws -> ProcessResult {
        try run("/usr/bin/dpkg", ["--root=\(root)", "--force-script-chrootless", "--force-depends"] + arguments)
    }

    /// The regular files of a package and their modes, as `dpkg-deb -c` lists them, by
    /// absolute path; and whether every entry is root's.
    static func contents(of deb: String) throws -> (files: [String: String], allRoot: Bool) {
        let listing = try run("/usr/bin/dpkg-deb", ["-c", deb])
        try #require(listing.status == 0, "\(listing.stderr)")
        var files: [String: String] = [:]
        var allRoot = true
        for line in listing.stdoutText.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6 else { continue }
            allRoot = allRoot && fields[1] == "root/root"
            guard fields[0].hasPrefix("-") else { continue }
            files[String(fields[5].dropFirst())] = octal(fields[0])  // "./usr/bin/ingest" → "/usr/bin/ingest"
        }
        return (files, allRoot)
    }

    /// "-rwxr-xr-x" → "755".
    static func octal(_ permissions: Substring) -> String {
        let bits: [Int] = permissions.dropFirst().map { $0 == "-" ? 0 : 1 }
        var digits = ""
        for start in [0, 3, 6] {
            let digit: Int = bits[start] * 4 + bits[start + 1] * 2 + bits[start + 2]
            digits += String(digit)
        }
        return digits
    }

    /// What the package holds: what `make install PREFIX=/usr` puts in place (the man pages
    /// compressed, no state directory), the cron file where cron reads it, the completions
    /// and what Debian asks of every package.
    static var expectedFiles: [String: String] {
        var files: [String: String] = [:]
        for (path, mode) in InstallTests.expectedFiles(prefix: "/usr") {
            files[path.contains("/share/man/") ? path + ".gz" : path] = mode
        }
        for path in [
            "/etc/cron.d/ingest", "/usr/share/bash-completion/completions/ingest", "/usr/share/zsh/vendor-completions/_ingest",
            "/usr/share/fish/vendor_completions.d/ingest.fish", "/usr/share/doc/ingest/copyright",
            "/usr/share/doc/ingest/changelog.gz",
        ] {
            files[path] = "644"
        }
        return files
    }

    @Test(.timeLimit(.minutes(10)))
    func makeDebBuildsALintianCleanPackageThatInstallsAndPurges() throws {
        let out = TemporaryDirectory()
        let made = try Self.makeDeb(binary: try ReleaseBinary.required(), into: out.path)
        try #require(made.status == 0, "make deb: \(made.stderr)\n\(made.stdoutText)")

        // lintian ran (make deb fails on any error or warning it prints) and said nothing.
        let lines = made.stdoutText.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("deb: lintian ") }, "\(made.stdoutText)")
        #expect(!lines.contains { $0.hasPrefix("E: ") || $0.hasPrefix("W: ") }, "\(made.stdoutText)")

        // ingest_<version>_<arch>.deb, the version from the source, the architecture dpkg's.
        let architecture = try sh("dpkg --print-architecture").trimmingCharacters(in: .whitespacesAndNewlines)
        let deb = out.path + "/ingest_\(Self.sourceVersion)_\(architecture).deb"
        let written = try FileManager.default.contentsOfDirectory(atPath: out.path)
        try #require(written == ["ingest_\(Self.sourceVersion)_\(architecture).deb"], "\(written)")

        // The control fields; Depends as dpkg-shlibdeps found it from the binary's libraries.
        let fields = try sh("dpkg-deb -f \(shellQuoted(deb))")
        func field(_ name: String) -> String? {
            fields.split(separator: "\n").first { $0.hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
        }
        #expect(field("Package") == "ingest")
        #expect(field("Version") == Self.sourceVersion)
        #expect(field("Architecture") == architecture)
        let depends = try #require(field("Depends")).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for library in ["libcurl4", "libudev1", "libxxhash0", "libsqlite3-0", "libisal2", "libc6"] {
            #expect(depends.contains { $0.hasPrefix(library + " (>= ") }, "Depends names \(library): \(depends)")
        }
        let conffiles = try sh("dpkg-deb --info \(shellQuoted(deb)) conffiles").split(separator: "\n").map(String.init)
        #expect(conffiles == ["/etc/cron.d/ingest", "/etc/ingest/ingest.toml"])

        // Every file, with its mode, all root's; nothing under /var (the state is never the package's).
        let (files, allRoot) = try Self.contents(of: deb)
        #expect(files == Self.expectedFiles)
        #expect(allRoot)

        // Installed into a scratch root: the maintainer scripts enable the timer there.
        let root = TemporaryDirectory()
        try sh("mkdir -p \(root.path)/var/lib/dpkg/updates && touch \(root.path)/var/lib/dpkg/status")
        let installed = try Self.dpkg(root: root.path, ["-i", deb])
        try #require(installed.status == 0, "dpkg -i: \(installed.stderr)")
        try checkInstalledFiles(root: root.path)

        // The packaged binary runs, and is the release build of this version.
        let version = try run(root.path + "/usr/bin/ingest", ["--version"])
        #expect(version.status == 0 && version.stdoutText.hasPrefix("ingest \(Self.sourceVersion) ("), "\(version.stdoutText)")

        // `ingest check` (the packaged one, with the packaged configuration) finds the rule,
        // the units and the timer enabled in the root.
        let state = TemporaryDirectory()
        let check = try run(
            root.path + "/usr/bin/ingest",
            ["check", "--json", "--station-root", root.path, "--state-dir", state.path + "/state"],
            environment: IngestRun.environment.merging(["INGEST_CONFIG": root.path + "/etc/ingest/ingest.toml"]) { $1 })
        let statuses = Dictionary(
            IngestRun(result: check).events("check").map { ($0.string("check") ?? "", $0.string("status") ?? "") }) { $1 }
        for station in ["udev_rule", "units", "rescan_timer"] {
            #expect(statuses[station] == "pass", "\(station): \(check.stdoutText)")
        }

        // What a station adds: a journal, credentials. Removing keeps the configuration...
        try sh("mkdir -p \(root.path)/var/lib/ingest && echo journal > \(root.path)/var/lib/ingest/journal.sqlite")
        try sh("echo '[default]' > \(root.path)/etc/ingest/credentials")
        let removed = try Self.dpkg(root: root.path, ["-r", "ingest"])
        #expect(removed.status == 0, "dpkg -r: \(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: root.path + "/usr/bin/ingest"))
        #expect(FileManager.default.fileExists(atPath: root.path + "/etc/ingest/ingest.toml"))

        // ...purging takes it away, and keeps the state, saying so.
        let purged = try Self.dpkg(root: root.path, ["-P", "ingest"])
        #expect(purged.status == 0, "dpkg -P: \(purged.stderr)")
        for gone in ["/etc/ingest", "/etc/cron.d/ingest", "/etc/systemd/system/timers.target.wants/ingest-rescan.timer",
                     "/etc/systemd/system/ingest-rescan.timer", "/usr/lib/udev/rules.d/99-ingest.rules"] {
            var info = stat()
            #expect(lstat(root.path + gone, &info) != 0, "\(gone) is left after purge")
        }
        #expect(try String(contentsOfFile: root.path + "/var/lib/ingest/journal.sqlite", encoding: .utf8) == "journal\n")
        #expect(purged.stdoutText.contains("kept /var/lib/ingest"), "\(purged.stdoutText)")
    }

    /// The files as installed: man pages that are the checkout's, units and cron file that
    /// run /usr/bin/ingest, completions each shell loads, the timer enabled.
    func checkInstalledFiles(root: String) throws {
        for (page, source) in ["/usr/share/man/man1/ingest.1.gz": "man/ingest.1", "/usr/share/man/man5/ingest.toml.5.gz": "man/ingest.toml.5"] {
            #expect(try sh("gzip -dc \(root)\(page)") == (try Repository.text(source)), "\(page)")
        }
        for unit in ["ingest@.service", "ingest-rescan.service"] {
            let text = try String(contentsOfFile: root + "/usr/lib/systemd/system/" + unit, encoding: .utf8)
            #expect(text.contains("ExecStart=/usr/bin/ingest ") && !text.contains("@BINDIR@"), "\(unit)")
        }
        // cron runs the rescan only where systemd does not (its timer does it there).
        let cron = try String(contentsOfFile: root + "/etc/cron.d/ingest", encoding: .utf8)
        #expect(cron.contains("root  test -d /run/systemd/system || flock -n /run/lock/ingest-rescan.lock /usr/bin/ingest rescan"))
        #expect(try String(contentsOfFile: root + "/etc/ingest/ingest.toml", encoding: .utf8) == (try Repository.text("etc/ingest.toml.example")))

        let bash = try String(contentsOfFile: root + "/usr/share/bash-completion/completions/ingest", encoding: .utf8)
        #expect(!bash.hasPrefix("#!") && bash.contains("complete -o filenames -F"), "\(bash.prefix(200))")
        #expect(try sh("bash -n \(root)/usr/share/bash-completion/completions/ingest").isEmpty)
        #expect(try String(contentsOfFile: root + "/usr/share/zsh/vendor-completions/_ingest", encoding: .utf8).hasPrefix("#compdef ingest"))
        #expect(try String(contentsOfFile: root + "/usr/share/fish/vendor_completions.d/ingest.fish", encoding: .utf8).contains("complete -c 'ingest'"))

        let link = root + "/etc/systemd/system/timers.target.wants/ingest-rescan.timer"
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == "/usr/lib/systemd/system/ingest-rescan.timer")
    }

    /// `make deb` takes only a release build, and writes nothing otherwise.
    @Test func makeDebRefusesADebugBuild() throws {
        let out = TemporaryDirectory()
        let made = try Self.makeDeb(binary: IngestBinary.path, into: out.path)
        #expect(made.status != 0)
        #expect(made.stderr.contains("is a debug build"), "\(made.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).isEmpty)
    }
}
