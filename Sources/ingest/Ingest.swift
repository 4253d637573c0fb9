import ArgumentParser
import IngestKit

@main
struct Ingest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Copy everything on a removable card into S3-compatible storage, verified, resumable.",
        usage: """
            ingest <path> --endpoint <url> --bucket <name> [--scene <name>] [--tag <k=v>] [--json] [...]
            ingest <path> --no-upload [--verify]
            ingest --device <node> [--endpoint <url>] [--bucket <name>] [...]
            ingest watch [--max-cards <n>] [--endpoint <url>] [--bucket <name>] [--json]
            ingest scan <path> [--list] [--json]
            ingest status [--check-bucket] [--json]
            ingest verify-card <path> [--device <node>] [--json]
            ingest check [--endpoint <url>] [--bucket <name>] [--no-station] [--json]
            ingest resume [<id> ...]
            ingest rescan [--root <path>] [--metrics-file <file>] [--json]
            ingest abort <id>
            ingest forget <id>
            ingest ls [<prefix>] [--endpoint <url>] [--bucket <name>]
            ingest mount-card <node>
            ingest unmount-card <node>
            """,
        discussion: """
            `ingest PATH` scans the card mounted at PATH (or any directory), copies every new \
            file into the staging area while fingerprinting it (XXH3-128) in the same read, \
            records it in the journal, and uploads it to the bucket as one object, in parts \
            that resume after a crash, a kill or a pulled network cable. Each object is \
            verified (size, fingerprint, and the server's digest of the parts) before its \
            staged copy is deleted. Running it again on the same card reads and sends nothing.

            Three ways to run it:
              by hand       ingest /media/sd
              on insertion  udev starts ingest@<name>.service, which runs
                            `ingest mount-card`, then `ingest --device /dev/<name>`
                            without CAP_SYS_ADMIN, then `ingest unmount-card`
                            (`make install` puts the rule and units in place);
                            or `ingest watch`
              nightly       `ingest rescan`, from ingest-rescan.timer or cron:
                            pending uploads, mounted cards, staging clean-up
            After each card, whichever way: the metrics file ([rescan] metrics_file, \
            --metrics-file) is rewritten and the [hooks] on_card_done program is given the \
            card's summary as JSON (see ingest.toml(5)).

            Before the first card, and after any change to the station, `sudo ingest check` \
            tries the configuration, the disk, the credentials, the bucket, the clock and the \
            installed rule and units, and says what to fix.

            Options every command takes: --config <file>, --state-dir <dir>, --json, -v. \
            See `ingest run --help` for the options of an ingest.

            Environment:
              INGEST_CONFIG           configuration file (default /etc/ingest/ingest.toml)
              INGEST_STATE_DIR        journal and staging directory
              INGEST_STAGING_RESERVE  free space to keep on the staging disk (e.g. 2GiB)
              INGEST_STAGING_VERIFY   off, staged or both
              INGEST_ENDPOINT         S3 endpoint URL (several gateways: comma-separated), or tus+https://HOST/PATH/
              INGEST_BUCKET           bucket (not used with a tus endpoint)
              INGEST_TUS_HEADERS_FILE file of Name: value headers for a tus server (mode 600)
              AWS_REGION              region for signing (default us-east-1)
              AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE,
              AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE   credentials, as the AWS CLI reads them
              INGEST_LOG_LEVEL        trace, debug, info, notice, warning (default), error

            Exit status:
            \(ExitStatus.allCases.map { "  \(String($0.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0))\($0.meaning)" }.joined(separator: "\n"))
            """,
        version: BuildInfo.versionLine,
        subcommands: [
            RunCommand.self, ScanCommand.self, StatusCommand.self, ResumeCommand.self, AbortCommand.self,
            ForgetCommand.self, ListCommand.self, WatchCommand.self, RescanCommand.self, MountCardCommand.self,
            UnmountCardCommand.self, CheckCommand.self, VerifyCardCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}
