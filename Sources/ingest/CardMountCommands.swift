import ArgumentParser
import IngestKit

/// Why the ingest@ unit mounts in a step of its own, for both commands' help.
private let whyASeparateStep = """
    ingest@.service runs `ingest mount-card` as its privileged ExecStartPre=+ step and \
    `ingest unmount-card` as its ExecStopPost=+ step, so that the process that reads the \
    card and talks to the network (`ingest --device`) holds no CAP_SYS_ADMIN: a process \
    compromised by a crafted card cannot remount / read-write or mount anything. The same \
    binary does it, rather than udisks or systemd-mount, so that a station needs no extra \
    daemon or D-Bus policy, and the device is checked by the very code `--device` uses.
    """

/// `ingest mount-card NODE`: the privileged half of `ingest --device`.
struct MountCardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount-card",
        abstract: "Mount a card's file system read-only where `ingest --device` looks for it, and nothing else.",
        discussion: """
            Checks NODE exactly as `ingest --device` does (a block device udev knows, holding \
            a file system; not mounted at a system place; a type in [device] file_systems), \
            takes the device's lock while it works, and mounts the file system read-only \
            (ro,nosuid,nodev,noexec; a clean ext4 journal is not even loaded) at \
            $RUNTIME_DIRECTORY/<kernel name>, or /run/ingest/cards/<kernel name> outside \
            systemd. Prints the mount point. A card already mounted there that way (a run that \
            died) is used again; anything else mounted there is replaced; a card mounted by \
            someone else under /media or /run/media is left as it is and its mount point printed. \
            A card another ingest is mounting or ingesting is left to it: a notice, and exit 0.

            \(whyASeparateStep)

            Examples:
              ingest mount-card /dev/sdb1
              ingest unmount-card /dev/sdb1
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The card's block device, like /dev/sdb1.", valueName: "node"), completion: .file())
    var node: String

    func run() async throws {
        let logger = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            let state = try StateDirectory(path: common.statePath(config))
            let policy = MountPolicy(environment: common.environment, fileSystems: config.device.fileSystems)
            let mount: CardMount
            do {
                let attached = try DeviceIngest(state: state, policy: policy, logger: logger).attach(device: node)
                attached.lock.release()
                mount = attached.mount
            } catch {
                guard case .deviceBusy = error else { throw error }
                return notice(error, code: "busy", json: common.json)
            }
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line([
                    "event": "card_mounted", "device": .string(node), "mount_point": .string(mount.path),
                    "ours": .bool(mount.isOurs),
                ]) + "\n")
            } else {
                ReportOutput.standardOutput.line(mount.path)
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }
}

/// `ingest unmount-card NODE`: undoes `ingest mount-card`, and only that.
struct UnmountCardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount-card",
        abstract: "Unmount what `ingest mount-card` mounted for a card, and nothing else.",
        discussion: """
            Unmounts whatever is mounted at the card's place, $RUNTIME_DIRECTORY/<kernel name> \
            (or /run/ingest/cards/<kernel name>), lazily when something still holds it, and \
            removes the directory. No other mount is ever touched: a card mounted under /media \
            stays mounted. Nothing mounted there is no error, so it can run any number of times; \
            the device need not exist any more (a card pulled out is unmounted by the name it \
            had). Reads no configuration, so that a broken one cannot keep a card mounted.

            \(whyASeparateStep)
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: ArgumentHelp("The card's block device, like /dev/sdb1 (it may be gone).", valueName: "node"), completion: .file())
    var node: String

    func run() async throws {
        _ = common.bootstrapLogging()
        do throws(IngestError) {
            let place = try DeviceIngest.unmountPlace(ofDevice: node, policy: MountPolicy(environment: common.environment))
            if common.json {
                ReportOutput.standardOutput.write(JSONValue.line([
                    "event": "card_unmounted", "device": .string(node), "mount_point": .string(place),
                ]) + "\n")
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }
}
