import Testing

@testable import IngestKit

/// The SD card of the examples: exFAT, UUID 3E5A-1B2C, label EOS_DIGITAL, on /dev/sdb1 (8:17).
private let cardUdev: [String: String] = [
    "DEVNAME": "/dev/sdb1", "ID_FS_UUID": "3E5A-1B2C", "ID_FS_LABEL": "EOS_DIGITAL", "ID_FS_TYPE": "exfat",
    "ID_SERIAL_SHORT": "000000123456", "ID_VENDOR": "Generic", "ID_MODEL": "STORAGE_DEVICE", "ID_BUS": "usb",
]

private func cardMount(at mountPoint: String = "/media/pi/EOS_DIGITAL", root: String = "/") -> MountEntry {
    MountEntry(
        major: 8, minor: 17, root: root, mountPoint: mountPoint, fsType: "exfat", source: "/dev/sdb1",
        options: ["rw", "nosuid", "nodev"])
}

private func identify(_ rootPath: String, _ mount: MountEntry?, udev: [String: String] = cardUdev) -> VolumeIdentity {
    VolumeIdentity.identify(rootPath: rootPath, mount: mount) { _, _ in udev }
}

@Suite struct VolumeIdentityTests {
    // MARK: cards with a file system UUID

    @Test func wholeCardIsKeyedByItsFileSystemUUID() {
        let identity = identify("/media/pi/EOS_DIGITAL", cardMount())
        #expect(identity.key == "uuid:3E5A-1B2C")
        #expect(identity.rootPath == "/media/pi/EOS_DIGITAL")
        #expect(identity.mountPoint == "/media/pi/EOS_DIGITAL")
        #expect(identity.pathInFileSystem == "/")
        #expect(identity.fsType == "exfat")
    }

    @Test func subdirectoryOfACardIsKeyedByUUIDAndItsPathOnTheCard() {
        let identity = identify("/media/pi/EOS_DIGITAL/DCIM", cardMount())
        #expect(identity.key == "uuid:3E5A-1B2C/DCIM")
        #expect(identity.pathInFileSystem == "/DCIM")
        #expect(identity.mountPoint == "/media/pi/EOS_DIGITAL")
    }

    @Test func deeperSubdirectoryKeepsItsFullPathOnTheCard() {
        let identity = identify("/media/pi/EOS_DIGITAL/DCIM/100CANON", cardMount())
        #expect(identity.key == "uuid:3E5A-1B2C/DCIM/100CANON")
    }

    @Test func sameCardMountedElsewhereKeepsItsKey() {
        let first = identify("/media/pi/EOS_DIGITAL/DCIM", cardMount())
        let again = identify("/mnt/other/DCIM", cardMount(at: "/mnt/other"))
        #expect(first.key == again.key)
        #expect(first.rootPath != again.rootPath)
    }

    @Test func deviceRecordComesFromUdevProperties() throws {
        let identity = identify("/media/pi/EOS_DIGITAL", cardMount())
        let device = try #require(identity.device)
        #expect(device.node == "/dev/sdb1")
        #expect(device.fsUUID == "3E5A-1B2C")
        #expect(device.fsLabel == "EOS_DIGITAL")
        #expect(device.fsType == "exfat")
        #expect(device.serial == "000000123456")
        #expect(device.vendor == "Generic")
        #expect(device.model == "STORAGE_DEVICE")
        #expect(device.bus == "usb")
    }

    @Test func udevIsAskedAboutTheMountedDevice() {
        var asked: [String] = []
        _ = VolumeIdentity.identify(rootPath: "/media/pi/EOS_DIGITAL", mount: cardMount()) { major, minor in
            asked.append("\(major):\(minor)")
            return cardUdev
        }
        #expect(asked == ["8:17"])
    }

    // MARK: bind mounts

    @Test func bindMountRootIsJoinedWithThePathBelowTheMountPoint() {
        let identity = identify("/srv/dcim/100CANON", cardMount(at: "/srv/dcim", root: "/DCIM"))
        #expect(identity.pathInFileSystem == "/DCIM/100CANON")
        #expect(identity.key == "uuid:3E5A-1B2C/DCIM/100CANON")
    }

    @Test func bindMountGivesTheSameKeyAsThePathThroughTheCardMount() {
        let viaBind = identify("/srv/dcim/100CANON", cardMount(at: "/srv/dcim", root: "/DCIM"))
        let viaCard = identify("/media/pi/EOS_DIGITAL/DCIM/100CANON", cardMount())
        #expect(viaBind.key == viaCard.key)
    }

    @Test func bindMountPointItselfIsKeyedByItsRootOnTheCard() {
        let identity = identify("/srv/dcim", cardMount(at: "/srv/dcim", root: "/DCIM"))
        #expect(identity.pathInFileSystem == "/DCIM")
        #expect(identity.key == "uuid:3E5A-1B2C/DCIM")
    }

    @Test func directoryOnTheRootFileSystemJoinsItsWholePath() {
        let rootMount = MountEntry(
            major: 179, minor: 2, root: "/", mountPoint: "/", fsType: "ext4", source: "/dev/mmcblk0p2",
            options: ["rw"])
        let identity = identify("/srv/incoming", rootMount, udev: ["ID_FS_UUID": "0b8e3f9a-1111-2222-3333-444455556666"])
        #expect(identity.pathInFileSystem == "/srv/incoming")
        #expect(identity.key == "uuid:0b8e3f9a-1111-2222-3333-444455556666/srv/incoming")
        #expect(identity.mountPoint == "/")
    }

    // MARK: fallbacks

    @Test func serialAndLabelAreTheKeyWhenThereIsNoUUID() {
        var udev = cardUdev
        udev["ID_FS_UUID"] = nil
        #expect(identify("/media/pi/EOS_DIGITAL", cardMount(), udev: udev).key == "serial:000000123456:EOS_DIGITAL")
        #expect(identify("/media/pi/EOS_DIGITAL/DCIM", cardMount(), udev: udev).key
            == "serial:000000123456:EOS_DIGITAL/DCIM")
    }

    @Test func serialKeyWithoutLabelHasAnEmptyLabelPart() {
        var udev = cardUdev
        udev["ID_FS_UUID"] = nil
        udev["ID_FS_LABEL"] = nil
        #expect(identify("/media/pi/EOS_DIGITAL", cardMount(), udev: udev).key == "serial:000000123456:")
    }

    @Test func emptyUdevValuesCountAsMissing() throws {
        var udev = cardUdev
        udev["ID_FS_UUID"] = ""
        udev["ID_FS_LABEL"] = ""
        let identity = identify("/media/pi/EOS_DIGITAL", cardMount(), udev: udev)
        #expect(identity.key == "serial:000000123456:")
        let device = try #require(identity.device)
        #expect(device.fsUUID == nil)
        #expect(device.fsLabel == nil)
    }

    @Test func blockDeviceWithoutUUIDOrSerialIsKeyedByPath() {
        let identity = identify("/media/pi/EOS_DIGITAL", cardMount(), udev: ["DEVNAME": "/dev/sdb1"])
        #expect(identity.key == "path:/media/pi/EOS_DIGITAL")
        #expect(identity.device?.node == "/dev/sdb1")
    }

    @Test func pathWithoutAMountIsKeyedByPath() {
        let identity = identify("/srv/incoming", nil)
        #expect(identity.key == "path:/srv/incoming")
        #expect(identity.rootPath == "/srv/incoming")
        #expect(identity.mountPoint == nil)
        #expect(identity.pathInFileSystem == "/srv/incoming")
        #expect(identity.device == nil)
        #expect(identity.fsType == nil)
    }

    @Test func mountOfANonDeviceSourceIsKeyedByPathWithoutAskingUdev() {
        let tmpfs = MountEntry(
            major: 0, minor: 27, root: "/", mountPoint: "/tmp", fsType: "tmpfs", source: "tmpfs", options: ["rw"])
        var asked = false
        let identity = VolumeIdentity.identify(rootPath: "/tmp/incoming", mount: tmpfs) { _, _ in
            asked = true
            return cardUdev
        }
        #expect(identity.key == "path:/tmp/incoming")
        #expect(identity.device == nil)
        #expect(identity.fsType == "tmpfs")
        #expect(identity.mountPoint == "/tmp")
        #expect(identity.pathInFileSystem == "/incoming")
        #expect(!asked)
    }

    @Test func networkShareSourceIsNotTreatedAsADevice() {
        let share = MountEntry(
            major: 0, minor: 52, root: "/", mountPoint: "/mnt/nas", fsType: "nfs4", source: "nas:/export/photos",
            options: ["rw"])
        let identity = identify("/mnt/nas/in", share)
        #expect(identity.key == "path:/mnt/nas/in")
        #expect(identity.device == nil)
    }

    // MARK: display names

    @Test func wholeCardIsShownByItsLabel() {
        #expect(identify("/media/pi/EOS_DIGITAL", cardMount()).displayName == "EOS_DIGITAL")
    }

    @Test func wholeCardWithoutLabelIsShownByItsDeviceNode() {
        var udev = cardUdev
        udev["ID_FS_LABEL"] = nil
        #expect(identify("/media/pi/EOS_DIGITAL", cardMount(), udev: udev).displayName == "/dev/sdb1")
    }

    @Test func deviceNodeFallsBackToTheMountSourceWithoutDEVNAME() {
        let identity = identify("/media/pi/EOS_DIGITAL", cardMount(), udev: ["ID_FS_UUID": "3E5A-1B2C"])
        #expect(identity.device?.node == "/dev/sdb1")
        #expect(identity.displayName == "/dev/sdb1")
    }

    @Test func subdirectoryOfACardIsShownByItsPath() {
        #expect(identify("/media/pi/EOS_DIGITAL/DCIM", cardMount()).displayName == "/media/pi/EOS_DIGITAL/DCIM")
    }

    @Test func plainDirectoryIsShownByItsPath() {
        #expect(identify("/srv/incoming", nil).displayName == "/srv/incoming")
    }

    /// A bind mount of the card's DCIM folder is a directory of the card, not the whole card:
    /// per the documentation ("a whole card by its label, a directory by its path") it is
    /// shown by its path, not by the card's label.
    @Test func bindMountedSubdirectoryIsShownByItsPathNotTheCardLabel() {
        let identity = identify("/srv/dcim", cardMount(at: "/srv/dcim", root: "/DCIM"))
        #expect(identity.displayName == "/srv/dcim")
    }
}
