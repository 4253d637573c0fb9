import Foundation
import Testing

@testable import IngestKit

/// A mount table as a Raspberry Pi with two cards shows it: the root file system, an SD card
/// automounted under its label (exFAT, 8:17) plus a bind mount of its DCIM folder, a second
/// card whose label holds a space (vfat, 8:33), and pseudo file systems.
private let sampleMountInfo = """
    22 1 179:2 / / rw,noatime shared:1 - ext4 /dev/mmcblk0p2 rw
    23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
    24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
    31 22 0:27 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=945884k,nr_inodes=236471
    85 22 8:17 / /media/pi/EOS_DIGITAL rw,nosuid,nodev,relatime shared:45 - exfat /dev/sdb1 rw,fmask=0022,dmask=0022,iocharset=utf8,errors=remount-ro
    90 22 8:17 /DCIM /srv/dcim ro,relatime shared:45 - exfat /dev/sdb1 rw,fmask=0022,dmask=0022,iocharset=utf8,errors=remount-ro
    95 22 8:33 / /media/pi/My\\040Card rw,nosuid,nodev,relatime shared:50 master:3 - vfat /dev/sdc1 rw,fmask=0022,dmask=0022,codepage=437,shortname=mixed,errors=remount-ro

    """

@Suite struct MountTableTests {
    // MARK: parsing

    @Test func parsesEveryWellFormedLine() {
        let table = MountTable(parsing: sampleMountInfo)
        #expect(table.entries.map(\.mountPoint) == [
            "/", "/proc", "/sys", "/tmp", "/media/pi/EOS_DIGITAL", "/srv/dcim", "/media/pi/My Card",
        ])
    }

    @Test func parsesAllFieldsOfALineWithOneOptionalField() throws {
        let line = "85 22 8:17 / /media/pi/EOS_DIGITAL rw,nosuid,nodev,relatime shared:45 - exfat /dev/sdb1 rw,errors=remount-ro"
        let entry = try #require(MountTable.parseLine(line[...]))
        #expect(entry == MountEntry(
            major: 8, minor: 17, root: "/", mountPoint: "/media/pi/EOS_DIGITAL", fsType: "exfat",
            source: "/dev/sdb1", options: ["rw", "nosuid", "nodev", "relatime"]))
        #expect(!entry.isReadOnly)
    }

    @Test func parsesALineWithoutOptionalFields() throws {
        let line = "31 22 0:27 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=945884k"
        let entry = try #require(MountTable.parseLine(line[...]))
        #expect(entry.major == 0)
        #expect(entry.minor == 27)
        #expect(entry.mountPoint == "/tmp")
        #expect(entry.fsType == "tmpfs")
        #expect(entry.source == "tmpfs")
        #expect(entry.options == ["rw", "nosuid", "nodev"])
    }

    @Test func parsesALineWithSeveralOptionalFields() throws {
        // The example line of proc(5), with a second optional field.
        let line = "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue"
        let entry = try #require(MountTable.parseLine(line[...]))
        #expect(entry.major == 98)
        #expect(entry.minor == 0)
        #expect(entry.root == "/mnt1")
        #expect(entry.mountPoint == "/mnt/parent")
        #expect(entry.fsType == "ext3")
        #expect(entry.source == "/dev/root")
    }

    @Test func readOnlyComesFromTheMountOptions() throws {
        let table = MountTable(parsing: sampleMountInfo)
        let bind = try #require(table.entries.first { $0.mountPoint == "/srv/dcim" })
        #expect(bind.isReadOnly)
        #expect(bind.root == "/DCIM")
    }

    @Test func octalEscapesInPathsAreDecoded() throws {
        let line = #"95 22 8:33 /My\040Photos\011\134raw /media/pi/My\040Card rw - vfat /dev/disk/by-label/My\040Card rw"#
        let entry = try #require(MountTable.parseLine(line[...]))
        #expect(entry.root == "/My Photos\t\\raw")
        #expect(entry.mountPoint == "/media/pi/My Card")
        #expect(entry.source == "/dev/disk/by-label/My Card")
    }

    @Test func escapedNewlineIsDecoded() {
        #expect(MountTable.unescape(#"/mnt/a\012b"#[...]) == "/mnt/a\nb")
    }

    @Test func escapedBackslashFollowedByDigitsKeepsTheDigits() {
        // `\134` is the backslash; the "040" after it is plain text, not another escape.
        #expect(MountTable.unescape(#"/mnt/a\134040"#[...]) == #"/mnt/a\040"#)
    }

    @Test func pathWithoutEscapesIsUnchanged() {
        #expect(MountTable.unescape("/media/pi/EOS_DIGITAL"[...]) == "/media/pi/EOS_DIGITAL")
    }

    @Test func malformedLinesAreSkipped() {
        let text = """
            not a mount line
            85 22 8:17 / /media/card rw shared:45 exfat /dev/sdb1 rw
            85 22 eight:17 / /media/card rw - exfat /dev/sdb1 rw
            85 22 8:17 / /media/card rw -
            86 22 8:18 / /media/good rw - exfat /dev/sdb2 rw
            """
        let table = MountTable(parsing: text)
        #expect(table.entries.map(\.mountPoint) == ["/media/good"])
    }

    @Test func currentReadsAMountInfoFile() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("mountinfo-\(UUID().uuidString)")
        try Data(sampleMountInfo.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let table = try MountTable.current(path: url.path)
        #expect(table.entries.count == 7)
    }

    @Test func currentReadsThisProcessMountTable() throws {
        let table = try MountTable.current()
        #expect(table.entries.contains { $0.mountPoint == "/" })
    }

    /// The kernel escapes only space, tab, newline and backslash: other bytes of a mount
    /// point, UTF-8 or not, appear raw. One such mount must not make the whole table unreadable.
    @Test func currentToleratesAMountPointThatIsNotUTF8() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("mountinfo-\(UUID().uuidString)")
        var bytes = Array(sampleMountInfo.utf8)
        bytes += Array("96 22 8:49 / /mnt/caf".utf8) + [0xE9] + Array(" rw - vfat /dev/sdd1 rw\n".utf8)
        try Data(bytes).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let table = try MountTable.current(path: url.path)
        #expect(table.entries.contains { $0.mountPoint == "/media/pi/EOS_DIGITAL" })
        #expect(table.entries.contains { $0.source == "/dev/sdd1" })
    }

    // MARK: finding the mount of a path

    @Test func findsTheMountOfAPathOnACard() throws {
        let table = MountTable(parsing: sampleMountInfo)
        let mount = try #require(table.mount(containing: "/media/pi/EOS_DIGITAL/DCIM/100CANON", major: 8, minor: 17))
        #expect(mount.mountPoint == "/media/pi/EOS_DIGITAL")
        #expect(mount.root == "/")
    }

    @Test func findsTheMountWhenThePathIsTheMountPoint() throws {
        let table = MountTable(parsing: sampleMountInfo)
        let mount = try #require(table.mount(containing: "/media/pi/My Card", major: 8, minor: 33))
        #expect(mount.source == "/dev/sdc1")
    }

    @Test func choosesTheBindMountThatHoldsThePath() throws {
        let table = MountTable(parsing: sampleMountInfo)
        let mount = try #require(table.mount(containing: "/srv/dcim/100CANON", major: 8, minor: 17))
        #expect(mount.mountPoint == "/srv/dcim")
        #expect(mount.root == "/DCIM")
    }

    @Test func choosesTheLongestMountPointAmongNestedBindMountsOfOneDevice() throws {
        let text = """
            22 1 179:2 / / rw - ext4 /dev/mmcblk0p2 rw
            85 22 8:17 / /media/card rw - exfat /dev/sdb1 rw
            86 85 8:17 /DCIM/100CANON /media/card/view rw - exfat /dev/sdb1 rw
            87 22 8:17 /MISC /media rw - exfat /dev/sdb1 rw
            """
        let table = MountTable(parsing: text)
        let inner = try #require(table.mount(containing: "/media/card/view/IMG_0001.JPG", major: 8, minor: 17))
        #expect(inner.mountPoint == "/media/card/view")
        let outer = try #require(table.mount(containing: "/media/card/DCIM", major: 8, minor: 17))
        #expect(outer.mountPoint == "/media/card")
    }

    @Test func mountPointThatIsOnlyATextPrefixDoesNotHoldThePath() throws {
        let text = """
            85 22 8:17 / /media/card rw - exfat /dev/sdb1 rw
            86 85 8:17 /DCIM /media/card/view rw - exfat /dev/sdb1 rw
            """
        let table = MountTable(parsing: text)
        let mount = try #require(table.mount(containing: "/media/card/viewer/x", major: 8, minor: 17))
        #expect(mount.mountPoint == "/media/card")
        #expect(table.mount(containing: "/media/cardboard", major: 8, minor: 17) == nil)
    }

    /// Two bind mounts of one device on the same directory: the later one (mounted on top of
    /// the first, listed after it) is the one a path there reaches.
    @Test func laterMountOnTheSameMountPointHidesTheEarlierOne() throws {
        let text = """
            22 1 179:2 / / rw - ext4 /dev/mmcblk0p2 rw
            85 22 8:17 / /media/card rw - exfat /dev/sdb1 rw
            90 22 8:17 /DCIM /srv/view rw - exfat /dev/sdb1 rw
            91 90 8:17 /PRIVATE /srv/view rw - exfat /dev/sdb1 rw
            """
        let table = MountTable(parsing: text)
        let mount = try #require(table.mount(containing: "/srv/view/M4ROOT", major: 8, minor: 17))
        #expect(mount.root == "/PRIVATE")
    }

    @Test func noMountIsFoundForAnotherDevice() {
        let table = MountTable(parsing: sampleMountInfo)
        // Same directory as the card, wrong device numbers: e.g. the card was replaced.
        #expect(table.mount(containing: "/media/pi/EOS_DIGITAL/DCIM", major: 8, minor: 49) == nil)
        #expect(table.mount(containing: "/srv/dcim", major: 8, minor: 33) == nil)
    }

    @Test func rootMountHoldsEveryPathOnItsDevice() throws {
        let table = MountTable(parsing: sampleMountInfo)
        let mount = try #require(table.mount(containing: "/srv/incoming", major: 179, minor: 2))
        #expect(mount.mountPoint == "/")
        #expect(mount.source == "/dev/mmcblk0p2")
    }

    @Test func mountsOfDeviceListsEveryMountOfThatSource() {
        let table = MountTable(parsing: sampleMountInfo)
        #expect(table.mounts(ofDevice: "/dev/sdb1").map(\.mountPoint) == ["/media/pi/EOS_DIGITAL", "/srv/dcim"])
        #expect(table.mounts(ofDevice: "/dev/sdc1").map(\.mountPoint) == ["/media/pi/My Card"])
        #expect(table.mounts(ofDevice: "/dev/sdz1").isEmpty)
    }
}
