import ArgumentParser
import Glibc
import IngestKit

/// `ingest check`: is this station ready to ingest a card?
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check that this station is ready: configuration, disk, credentials, bucket, clock, installed files.",
        discussion: """
            Runs what a card's ingest depends on, without a card, and prints one line per \
            check: ✓ passed, ! passed with a warning, ✗ failed (with the fix on the line \
            below), – not checked (and why). Every check that can run does, so one run shows \
            everything to fix. Nothing is changed but two small objects, written and deleted.

            The checks, in order:
              configuration      read as a run reads it (--config, INGEST_CONFIG or
                                 /etc/ingest/ingest.toml, the environment, the options),
                                 with an endpoint and a bucket; with no file, the fix
                                 says how to create one from the installed example
              state directory    exists (or can be made), writable by this user, not
                                 writable by others; a warning if others can read it
              staging space      free space on the staging disk above [staging] reserve
              credentials        found as a run finds them (a credential_process is run),
                                 and accepted by the server
              bucket             HeadBucket: the bucket exists and the endpoint answers
                                 (an https:// endpoint whose server speaks plain http
                                 is named as such, with the http:// URL to use)
              conditional write  an empty PutObject with If-None-Match: * at the probe key
                                 under [s3] prefix, refused (412) once the key holds an
                                 object, then deleted; a warning if the server ignores it
              checksums          a one-part multipart upload with its CRC32C at a new key
                                 under .ingest/, then HEAD with x-amz-checksum-mode:
                                 ENABLED: the CRC32C form reported (composite, or
                                 full-object) and the proof ingest takes; a warning when
                                 none is reported (ETag of part MD5s, recorded identity)
              tagging            a tag put on that object is read back, then the object is
                                 deleted; a warning when tags are not kept (the fix:
                                 [upload] stream_parts = false)
              clock              the server's Date against this clock: ✗ at 15 minutes
                                 (S3 refuses signed requests), a warning from 1 minute
              gateway            with several S3 gateways, one line each: it answers, and
                                 shows the bucket id (.ingest/bucket-id) the others show;
                                 ✗ for one of another bucket, a warning for a dead one
                                 while another answers
              udev rule, systemd units, nightly rescan
                                 as root (or with --station-root): 99-ingest.rules,
                                 ingest@.service, ingest-rescan.service and .timer where
                                 udev and systemd read them, none masked, and the timer
                                 enabled (its link in timers.target.wants, or
                                 systemctl is-enabled) or the rescan in cron
                                 (/etc/cron.d/ingest, or a line of /etc/cron.d or
                                 /etc/crontab running ingest rescan); neither is a
                                 warning on a station with cron, a failure elsewhere

            Exit status: 0 when no check failed (warnings allowed); otherwise the status of \
            the first failed check, the one a run would end with: 78 configuration, bucket \
            missing, station files; 73 state directory, staging space; 77 credentials, \
            clock; 76 a server whose checksums match no form of the bytes sent; 69 the \
            endpoint cannot be reached.

            With --json: one NDJSON "check" object per check (check, status: pass, warn, \
            fail or skip, detail, remedy, exit_status), then a "check_summary" (ready, \
            failed_checks, exit_status and the counts).

            Examples:
              sudo ingest check
              ingest check --endpoint http://127.0.0.1:8333 --bucket cards --no-station
              ingest check --json | jq -r 'select(.status == "fail") | .check'
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var destination: DestinationOptions

    @Flag(name: .long, help: "Do not look at the udev rule, units and timer (looked at when run as root).")
    var noStation = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Look for the udev rule, units and timer under this root instead of / (an image, a DESTDIR).",
            valueName: "dir"),
        completion: .directory)
    var stationRoot: String?

    func validate() throws {
        if noStation, stationRoot != nil { throw ValidationError("Give either --no-station or --station-root, not both.") }
    }

    func run() async throws {
        let logger = common.bootstrapLogging()
        let config = Result { () throws(IngestError) -> Config in
            var config = try common.loadConfig()
            destination.apply(to: &config)
            return config
        }
        let station: ReadinessChecker.StationFiles =
            if noStation {
                .notChecked(because: "--no-station")
            } else if let stationRoot {
                .under(root: stationRoot)
            } else if geteuid() == 0 {
                .under(root: "/")
            } else {
                .notChecked(because: "not run as root (a station's files are checked by sudo ingest check)")
            }
        let checker = ReadinessChecker(
            config: config, statePath: try? common.statePath(config.get()), station: station,
            environment: common.environment, logger: logger)
        let report = await checker.run()
        let output = ReportOutput.standardOutput
        if common.json {
            for line in report.jsonLines { output.write(line + "\n") }
        } else {
            for line in report.consoleLines { output.line(line) }
        }
        if report.exitStatus != .success { throw ExitCode(report.exitStatus.rawValue) }
    }
}
