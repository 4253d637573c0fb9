import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// The three steps of `ingest@.service`, run the way the unit runs them (systemd is not
/// PID 1 on the test machines, so the unit itself cannot be started): `mount-card` and
/// `unmount-card` with every privilege, in this mount namespace (`+`); the main process in a
/// mount namespace of its own made after the mount, a slave copy of this one (what
/// `PrivateMounts=yes` makes), with `CAP_SYS_ADMIN` out of its bounding set (what
/// `CapabilityBoundingSet=CAP_DAC_READ_SEARCH` takes away).
enum CardService {
    /// The unit's `RuntimeDirectory=ingest`: cards are mounted at /run/ingest/<kernel name>.
    static let runtimeDirectory = "/run/ingest"

    static func place(of card: LoopCard) -> String { runtimeDirectory + "/" + card.kernelName }

    static func environment(_ base: [String: String] = IngestRun.environment) -> [String: String] {
        base.merging(["RUNTIME_DIRECTORY": runtimeDirectory]) { $1 }
    }

    /// `ExecStartPre=+ingest mount-card NODE`.
    static func mountCard(_ node: String, state: TemporaryDirectory, environment: [String: String] = environment()) throws -> IngestRun {
        try IngestRun.ingest(["mount-card", node, "--state-dir", state.path], environment: environment)
    }

    /// `ExecStopPost=+ingest unmount-card NODE`.
    static func unmountCard(_ node: String) throws -> IngestRun {
        try IngestRun.ingest(["unmount-card", node], environment: environment())
    }

    /// `ExecStart=ingest ARGUMENTS` in its own namespace without CAP_SYS_ADMIN; under strace
    /// (every call, paths in full) when `trace` names a file for its log.
    static func main(_ arguments: [String], environment: [String: String] = environment(), trace: String? = nil) throws -> IngestRun {
        var command = ["--mount", "--propagation", "slave", "--", "/usr/bin/setpriv", "--bounding-set=-sys_admin", "--"]
        if let trace { command += ["/usr/bin/strace", "-f", "-qq", "-s", "256", "-o", trace] }
        return IngestRun(result: try run("/usr/bin/unshare", command + [IngestBinary.path] + arguments, environment: environment))
    }

    /// The mounts at `path` now, bottom first.
    static func mounts(at path: String) throws -> [MountEntry] {
        try MountTable.current().entries.filter { $0.mountPoint == path }
    }
}

/// `ingest mount-card` and `ingest unmount-card` on real loop devices: the privileged steps
/// of ingest@.service, and the main process that finds the card mounted.
@Suite(.serialized, needsRoot)
final class MountCardTests {
    let udev: Udevd
    let state = TemporaryDirectory()

    init() throws { udev = try Udevd() }
    deinit { udev.stop() }

    /// A card of a few photos, inserted (attached, not mounted), and its files' sums.
    func insertedCard(_ label: String) throws -> (card: LoopCard, sums: [[UInt8]: String]) {
        let (card, sums) = try pulledOutCard(sizeMiB: 32, label: label, small: 4)
        try card.insert()
        return (card, sums)
    }

    @Test(.timeLimit(.minutes(3)))
    func mountCardMountsTheCardInertAtItsPlaceTheMainProcessIngestsItWithoutMountingAndUnmountCardTakesOffThatMountAlone() throws {
        let (card, sums) = try insertedCard("SPLIT")
        let imageBefore = try xxh128sum(card.image)
        let place = CardService.place(of: card)
        // A bystander: unmount-card must leave every other mount as it was.
        let bystander = TemporaryDirectory()
        try sh("mount -t tmpfs -o size=1M ingest-test-bystander \(bystander.path)")
        defer { _ = try? sh("umount \(bystander.path)") }
        let before = try mountPoints()

        let mounted = try CardService.mountCard(card.device, state: state)
        #expect(mounted.status == 0, "\(mounted.stderr)")
        #expect(mounted.result.stdoutText == place + "\n", "it prints where the card is")
        let mount = try #require(try CardService.mounts(at: place).only, "one mount at \(place)")
        #expect(mount.source == card.device && mount.root == "/")
        for option in ["ro", "nosuid", "nodev", "noexec"] { #expect(mount.options.contains(option), "\(mount.options)") }
        let line = try sh("grep -F ' \(place) ' /proc/self/mountinfo").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasSuffix(",norecovery") || line.contains(",norecovery,"), "a clean ext4 journal is not even loaded: \(line)")
        var parent = Glibc.stat()
        #expect(stat(CardService.runtimeDirectory, &parent) == 0 && parent.st_mode & 0o077 == 0, "/run/ingest is root's alone")
        #expect(try xxh128sums(under: place) == sums)

        let again = try CardService.mountCard(card.device, state: state)
        #expect(again.status == 0 && again.result.stdoutText == place + "\n", "\(again.stderr)")
        #expect(try CardService.mounts(at: place).count == 1, "a second mount-card uses the mount, never stacks another")

        // The main process cannot mount; it finds the card at its place and leaves it there.
        let ingested = try CardService.main(["--device", card.device, "--no-upload", "--json", "--state-dir", state.path])
        #expect(ingested.status == 0, "\(ingested.stderr)")
        #expect(ingested.events("volume").first?.string("mount_point") == place)
        #expect(ingested.summary?.int("staged") == sums.count)
        #expect(try CardService.mounts(at: place).count == 1, "the mount is left to unmount-card")

        let unmounted = try CardService.unmountCard(card.device)
        #expect(unmounted.status == 0, "\(unmounted.stderr)")
        #expect(try CardService.mounts(at: place).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: place), "its directory is removed")
        #expect(try mountPoints() == before, "no other mount was touched")
        let twice = try CardService.unmountCard(card.device)
        #expect(twice.status == 0, "nothing mounted is no error: \(twice.stderr)")

        try card.detach()
        #expect(try xxh128sum(card.image) == imageBefore, "the mount wrote nothing to the card")
    }

    @Test(.timeLimit(.minutes(3)))
    func mountCardRefusesADisallowedFileSystemAndASystemMountedDeviceWithStatus66AndMountsNothing() throws {
        let ext2 = TemporaryDirectory()
        let other = try sh("""
            truncate -s 8M \(ext2.path)/ext2.img && mkfs.ext2 -q -F -L OTHER \(ext2.path)/ext2.img \
            && losetup -f --show \(ext2.path)/ext2.img && udevadm settle -t 10
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        defer { _ = try? sh("losetup -d \(other)") }
        let refusedType = try CardService.mountCard(other, state: state)
        #expect(refusedType.status == 66, "\(refusedType.stderr)")
        #expect(refusedType.stderr.contains("claims to be ext2") && refusedType.stderr.contains("[device] file_systems"))
        let kernelName = String(other.split(separator: "/").last ?? "")
        #expect(try CardService.mounts(at: CardService.runtimeDirectory + "/" + kernelName).isEmpty, "nothing was mounted")

        // Mounted where no card belongs (a temporary directory, like / or /home would be).
        let system = try LoopCard(sizeMiB: 16, label: "SYSTEM")
        let refusedSystem = try CardService.mountCard(system.device, state: state)
        #expect(refusedSystem.status == 66, "\(refusedSystem.stderr)")
        #expect(refusedSystem.stderr.contains("refusing to ingest \(system.device)"))
        #expect(refusedSystem.stderr.contains("mounted at \(system.mountPoint)"))
        #expect(try mountPoints().contains(system.mountPoint), "another's mount is left alone")
        #expect(try CardService.mounts(at: CardService.place(of: system)).isEmpty)
        let leftAlone = try CardService.unmountCard(system.device)
        #expect(leftAlone.status == 0, "\(leftAlone.stderr)")
        #expect(try mountPoints().contains(system.mountPoint), "unmount-card touches only its place")

        let notBlock = try CardService.mountCard(system.image, state: state)
        #expect(notBlock.status == 66 && notBlock.stderr.contains("not a block device"), "\(notBlock.stderr)")

        // The main process, given a card nobody mounted, says what to do instead of trying.
        let (card, _) = try insertedCard("UNMOUNTED")
        let unmounted = try CardService.main(["--device", card.device, "--no-upload", "--state-dir", state.path])
        #expect(unmounted.status == 66, "\(unmounted.stderr)")
        #expect(unmounted.stderr.contains("ingest mount-card \(card.device)"), "\(unmounted.stderr)")
        #expect(try CardService.mounts(at: CardService.place(of: card)).isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func mountCardUsesALeftoverMountOfTheCardAndReplacesAnythingElseAtItsPlace() throws {
        let (card, sums) = try insertedCard("LEFTOVER")
        let (stranger, _) = try insertedCard("STRANGER")
        let place = CardService.place(of: card)
        try sh("mkdir -p \(place)")
        defer { _ = CardMount.unmount(at: place) }

        // What a crash leaves: the card, mounted as ingest mounts it. Used as it is.
        try sh("mount -o ro,nosuid,nodev,noexec \(card.device) \(place)")
        let reused = try CardService.mountCard(card.device, state: state)
        #expect(reused.status == 0, "\(reused.stderr)")
        #expect(try CardService.mounts(at: place).map(\.source) == [card.device])

        // The card mounted writable there, then another card: both replaced by an inert mount.
        for (device, options) in [(card.device, "rw"), (stranger.device, "ro")] {
            _ = CardMount.unmount(at: place)
            try sh("mkdir -p \(place) && mount -o \(options) \(device) \(place)")
            let replaced = try CardService.mountCard(card.device, state: state)
            #expect(replaced.status == 0, "\(replaced.stderr)")
            let mount = try #require(try CardService.mounts(at: place).only, "one mount, not a stack")
            #expect(mount.source == card.device && mount.isInert, "\(mount)")
        }
        #expect(try xxh128sums(under: place) == sums)
    }

    @Test(.timeLimit(.minutes(3)))
    func unmountCardDetachesABusyMountAndTheMountOfACardPulledOut() throws {
        let (card, _) = try insertedCard("BUSY")
        let place = CardService.place(of: card)
        #expect(try CardService.mountCard(card.device, state: state).status == 0)
        let held = open(place + "/DCIM/100MEDIA/IMG_1.JPG", O_RDONLY)
        #expect(held >= 0, "a file on the card is held open")
        let busy = try CardService.unmountCard(card.device)
        close(held)
        #expect(busy.status == 0, "\(busy.stderr)")
        #expect(try CardService.mounts(at: place).isEmpty, "detached lazily")

        #expect(try CardService.mountCard(card.device, state: state).status == 0)
        let device = card.device
        try card.detach()  // the loop device goes once its mount is gone
        let pulled = try CardService.unmountCard(device)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try CardService.mounts(at: place).isEmpty)
        #expect(try !sh("losetup -a").contains(card.image), "nothing holds the card any more")

        let neverThere = try CardService.unmountCard("/dev/ingest-test-no-such-card")
        #expect(neverThere.status == 0, "\(neverThere.stderr)")
    }
}

extension Array {
    /// The single element, or nil when there are none or several.
    var only: Element? { count == 1 ? first : nil }
}
