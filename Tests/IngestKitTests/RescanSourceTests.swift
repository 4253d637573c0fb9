import Foundation
import Testing

@testable import IngestKit

/// Which mounted file systems `ingest rescan` takes for cards the journal knows.
@Suite struct RescanSourceTests {
    /// Two cards (sdb1, sdc1), a card that is mounted twice (sdd1), the root file system, a
    /// data disk under /mnt (sde1), and pseudo and network file systems.
    static let mountText = """
        22 1 179:2 / / rw,noatime shared:1 - ext4 /dev/mmcblk0p2 rw
        23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
        31 22 0:27 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=945884k
        32 22 0:28 / /mnt/nas rw - nfs4 nas:/export rw
        85 22 8:17 / /media/pi/EOS_DIGITAL rw,nosuid,nodev,relatime shared:45 - exfat /dev/sdb1 rw
        95 22 8:33 / /media/pi/DRONE rw,nosuid,nodev,relatime shared:50 - vfat /dev/sdc1 rw
        96 22 8:49 / /media/a rw - ext4 /dev/sdd1 rw
        97 22 8:49 / /media/b rw - ext4 /dev/sdd1 rw
        98 22 8:65 / /mnt/data rw - ext4 /dev/sde1 rw
        """
    static let mounts = MountTable(parsing: mountText)

    /// The same, with a folder of sdb1 bind-mounted at a system place.
    static let withBindMount = MountTable(
        parsing: mountText + "\n90 22 8:17 /DCIM /srv/dcim ro,relatime shared:45 - exfat /dev/sdb1 rw\n")

    static let uuids: [UInt32: String] = [17: "EOS-1", 33: "DRONE-2", 49: "TWICE-3", 2: "ROOT-0", 65: "DATA-4"]
    static let policy = MountPolicy(runtimeBase: "/run/ingest/cards")

    /// Identifies a mount point as the real function does from a mount, with udev's answers faked.
    final class Identifier: @unchecked Sendable {
        var asked: [String] = []
        var failing: Set<String> = []

        func identify(_ path: String) throws(IngestError) -> VolumeIdentity {
            asked.append(path)
            if failing.contains(path) { throw .sourceUnavailable(path: path, reason: "gone") }
            let mount = RescanSourceTests.mounts.entries.last { $0.mountPoint == path }
            return VolumeIdentity.identify(rootPath: path, mount: mount) { _, minor in
                RescanSourceTests.uuids[minor].map { ["ID_FS_UUID": $0] } ?? [:]
            }
        }
    }

    @Test func onlyMountedFileSystemsTheJournalKnowsAreTaken() {
        let identifier = Identifier()
        let found = RescanSource.mountedKnownCards(
            policy: Self.policy, known: ["uuid:EOS-1", "uuid:DRONE-2", "uuid:NOT-HERE", "path:/tmp"], mounts: Self.mounts,
            identify: identifier.identify)
        #expect(found.map(\.key) == ["uuid:EOS-1", "uuid:DRONE-2"])
        #expect(found.map(\.rootPath) == ["/media/pi/EOS_DIGITAL", "/media/pi/DRONE"])
    }

    @Test func onlyMountsOfBlockDevicesAreLookedAt() {
        let identifier = Identifier()
        _ = RescanSource.mountedKnownCards(policy: Self.policy, known: ["path:/tmp", "path:/mnt/nas"], mounts: Self.mounts, identify: identifier.identify)
        #expect(!identifier.asked.contains("/proc"))
        #expect(!identifier.asked.contains("/tmp"))
        #expect(!identifier.asked.contains("/mnt/nas"), "a dead network mount could hang a stat")
        #expect(identifier.asked.contains("/media/pi/DRONE"))
    }

    @Test func aCardMountedTwiceIsTakenOnce() {
        let found = RescanSource.mountedKnownCards(policy: Self.policy, known: ["uuid:TWICE-3"], mounts: Self.mounts, identify: Identifier().identify)
        #expect(found.map(\.rootPath) == ["/media/a"])
    }

    @Test func theSystemsOwnFileSystemsAreNeverCardsWhateverUUIDTheyCarry() {
        // A crafted card cloned with the root's UUID was ingested once: the journal knows it.
        let found = RescanSource.mountedKnownCards(
            policy: Self.policy, known: ["uuid:ROOT-0", "uuid:DATA-4", "uuid:DRONE-2"], mounts: Self.mounts,
            identify: Identifier().identify)
        #expect(found.map(\.key) == ["uuid:DRONE-2"], "/ and /mnt/data are the station's")
    }

    @Test func aDeviceWithAnyMountAtASystemPlaceIsNotACard() {
        let found = RescanSource.mountedKnownCards(
            policy: Self.policy, known: ["uuid:EOS-1", "uuid:EOS-1/DCIM", "uuid:DRONE-2"], mounts: Self.withBindMount,
            identify: Identifier().identify)
        #expect(found.map(\.key) == ["uuid:DRONE-2"], "sdb1 also backs /srv/dcim")
    }

    @Test func aMountThatCannotBeIdentifiedIsPassedOver() {
        let identifier = Identifier()
        identifier.failing = ["/media/pi/EOS_DIGITAL"]
        let found = RescanSource.mountedKnownCards(
            policy: Self.policy, known: ["uuid:EOS-1", "uuid:DRONE-2"], mounts: Self.mounts, identify: identifier.identify)
        #expect(found.map(\.key) == ["uuid:DRONE-2"])
    }

    /// A known card mounted by hand at /mnt/sd is not ingested by rescan, but named, with
    /// the command that ingests it; so is one mounted under /media and also bind-mounted at a
    /// place outside. The system's own file systems never are, whatever UUID they carry.
    @Test func aKnownCardMountedElsewhereIsNamedWithTheCommandThatIngestsIt() {
        let text = Self.mountText + """

            99 22 8:81 / /mnt/sd rw - vfat /dev/sdf1 rw
            100 22 8:17 /DCIM /srv/dcim ro - exfat /dev/sdb1 rw
            101 22 8:97 / /mnt/my\\040card rw - vfat /dev/sdg1 rw
            """
        let mounts = MountTable(parsing: text)
        let uuids: [UInt32: String] = Self.uuids.merging([81: "BYHAND-5", 97: "SPACE-6"]) { $1 }
        let identify = { (path: String) throws(IngestError) -> VolumeIdentity in
            let mount = mounts.entries.last { $0.mountPoint == path }
            return VolumeIdentity.identify(rootPath: path, mount: mount) { _, minor in
                uuids[minor].map { ["ID_FS_UUID": $0, "ID_FS_LABEL": "L\($0.prefix(3))"] } ?? [:]
            }
        }
        let known: Set<String> = ["uuid:ROOT-0", "uuid:DATA-4", "uuid:EOS-1", "uuid:BYHAND-5", "uuid:DRONE-2", "uuid:SPACE-6"]
        let taken = Set(RescanSource.mountedKnownCards(policy: Self.policy, known: known, mounts: mounts, identify: identify).map(\.key))
        #expect(taken == ["uuid:DRONE-2"])

        let elsewhere = RescanSource.knownCardsElsewhere(
            policy: Self.policy, known: known, taken: taken, mounts: mounts, identify: identify)
        #expect(elsewhere.map(\.volumeKey) == ["uuid:EOS-1", "uuid:DATA-4", "uuid:BYHAND-5", "uuid:SPACE-6"],
                "in the mount table's order; / is the system's; /mnt/data could be a card, it is only named")
        let eos = elsewhere.first { $0.volumeKey == "uuid:EOS-1" }
        #expect(eos?.mountPoints == ["/media/pi/EOS_DIGITAL"], "the bind mount of a folder is not the card's root")
        #expect(eos?.command == "ingest /media/pi/EOS_DIGITAL")
        let byHand = elsewhere.first { $0.volumeKey == "uuid:BYHAND-5" }
        #expect(byHand?.mountPoints == ["/mnt/sd"])
        #expect(byHand?.name == "LBYH")
        #expect(byHand?.command == "ingest /mnt/sd")
        #expect(elsewhere.first { $0.volumeKey == "uuid:SPACE-6" }?.command == "ingest '/mnt/my card'")

        let none = RescanSource.knownCardsElsewhere(
            policy: Self.policy, known: ["uuid:DRONE-2", "uuid:NOT-HERE"], taken: ["uuid:DRONE-2"], mounts: mounts,
            identify: identify)
        #expect(none.isEmpty, "a card rescan takes, or one not mounted, is not named")
    }

    /// The note for people and for programs: which card, where, why not, and how.
    @Test func theNoteSaysWhereTheCardIsAndHowToIngestIt() {
        let card = KnownCardElsewhere(volumeKey: "uuid:BYHAND-5", name: "DRONE_A", mountPoints: ["/mnt/sd"])
        let event = RescanEvent.knownCardElsewhere(card, lookedIn: Self.policy.removableRoots)
        #expect(event.text == "DRONE_A (uuid:BYHAND-5), a card the journal knows, is mounted at /mnt/sd, not where rescan "
            + "takes cards from (/media, /run/media, /run/ingest): not ingested. To ingest it: ingest /mnt/sd")
        let json = event.json
        #expect(json["event"] == .string("known_card_elsewhere"))
        #expect(json["mount_points"] == .array([.string("/mnt/sd")]))
        #expect(json["command"] == .string("ingest /mnt/sd"))

        var report = RescanReport(resume: ResumeOutcome(pending: 0, totals: UploadTotals(), problem: nil))
        report.elsewhere = [card]
        let summary = RescanEvent.finished(report, exitStatus: .success, metricsFile: nil)
        #expect(summary.text.hasPrefix("Rescan: 0 cards (0 skipped), 0 uploads resumed\n"), "\(summary.text)")
        #expect(summary.text.contains("\n  known cards mounted elsewhere, not ingested: DRONE_A (ingest /mnt/sd)\n"))
        #expect(summary.json["known_cards_elsewhere"] == .int(1))
    }

    @Test func aPlainDirectoryKeyNeverMakesAMountACard() {
        // A directory ingested by path on a file system udev knows nothing of.
        let found = RescanSource.mountedKnownCards(policy: Self.policy, known: ["path:/media/a"], mounts: Self.mounts) { path throws(IngestError) in
            VolumeIdentity(key: "path:\(path)", rootPath: path, mountPoint: path, pathInFileSystem: "/", fsType: nil, device: nil)
        }
        #expect(found.isEmpty)
    }
}
