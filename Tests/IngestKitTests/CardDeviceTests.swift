import Testing

@testable import IngestKit

/// A partition as udev describes it after its rules ran.
private func partition(
    _ kernelName: String, _ properties: [String: String], mmcType: String? = nil, subsystem: String = "block",
    action: String? = "add"
) -> UdevDevice {
    UdevDevice(
        action: action, kernelName: kernelName, node: "/dev/\(kernelName)", major: 8, minor: 17, subsystem: subsystem,
        properties: properties, mmcType: mmcType)
}

private let filesystem = ["ID_FS_USAGE": "filesystem", "ID_FS_TYPE": "exfat", "ID_FS_UUID": "3E5A-1B2C"]

private func mount(_ mountPoint: String, root: String = "/") -> MountEntry {
    MountEntry(major: 179, minor: 2, root: root, mountPoint: mountPoint, fsType: "ext4", source: "/dev/root", options: ["rw"])
}

@Suite struct CardPredicateTests {
    @Test func aFileSystemInAUSBReaderIsACard() {
        #expect(CardPredicate.isCard(partition("sdb1", filesystem.merging(["ID_BUS": "usb"]) { $1 })))
    }

    @Test func aFileSystemOnAnSDCardInAnSDSlotIsACard() {
        #expect(CardPredicate.isCard(partition("mmcblk0p1", filesystem, mmcType: "SD")))
    }

    @Test func theEMMCABoardBootsFromIsNotACard() {
        #expect(!CardPredicate.isCard(partition("mmcblk0p2", filesystem, mmcType: "MMC")))
        #expect(!CardPredicate.isCard(partition("mmcblk1p1", filesystem, mmcType: nil)))
    }

    @Test func aDiskOnAnotherBusIsNotACard() {
        #expect(!CardPredicate.isCard(partition("sda1", filesystem.merging(["ID_BUS": "ata"]) { $1 })))
        #expect(!CardPredicate.isCard(partition("nvme0n1p1", filesystem)))
        #expect(!CardPredicate.isCard(partition("loop3", filesystem)))
    }

    @Test func somethingOtherThanAFileSystemIsNotACard() {
        let usb = ["ID_BUS": "usb"]
        #expect(!CardPredicate.isCard(partition("sdb", usb.merging(["ID_PART_TABLE_TYPE": "dos"]) { $1 })))
        #expect(!CardPredicate.isCard(partition("sdb2", usb.merging(["ID_FS_USAGE": "crypto", "ID_FS_TYPE": "crypto_LUKS"]) { $1 })))
        #expect(!CardPredicate.isCard(partition("sdb3", usb.merging(["ID_FS_USAGE": "other", "ID_FS_TYPE": "swap"]) { $1 })))
        #expect(!CardPredicate.isCard(partition("mmcblk0", ["ID_PART_TABLE_TYPE": "dos"], mmcType: "SD")))
    }

    @Test func onlyBlockDevicesAreCards() {
        #expect(!CardPredicate.isCard(partition("sdb1", filesystem.merging(["ID_BUS": "usb"]) { $1 }, subsystem: "scsi")))
    }
}

@Suite struct MountPolicyTests {
    let policy = MountPolicy(runtimeBase: "/run/ingest/cards")

    @Test func placesForRemovableMediaAreAccepted() throws {
        for place in ["/media/pi/EOS_DIGITAL", "/media/EOS", "/run/media/li/DRONE", "/run/ingest/cards/sdb1"] {
            #expect(policy.isRemovableMediaLocation(place), "\(place)")
            try policy.checkNotSystem([mount(place)], device: "/dev/sdb1")
        }
    }

    @Test func aDeviceMountedAtASystemPlaceIsRefusedNamingThePlace() {
        // /mnt too: a station's own data or staging disk is often mounted there.
        for place in ["/", "/boot", "/boot/firmware", "/usr", "/var", "/home", "/srv/data", "/tmp/x", "/mediafiles", "/mnt", "/mnt/data"] {
            #expect(!policy.isRemovableMediaLocation(place), "\(place)")
            let error = #expect(throws: IngestError.self) {
                try policy.checkNotSystem([mount("/media/pi/CARD"), mount(place)], device: "/dev/mmcblk0p2")
            }
            #expect(error == .systemDevice(device: "/dev/mmcblk0p2", mountPoint: place))
            #expect(error?.description.contains("refusing to ingest /dev/mmcblk0p2") == true)
            #expect(error?.description.contains("mounted at \(place)") == true)
            #expect(error?.exitStatus == .noInput)
        }
    }

    @Test func onlyTheAllowedFileSystemTypesAreMountedOrRead() throws {
        func card(_ type: String) -> CardDevice {
            CardDevice(node: "/dev/sdb1", kernelName: "sdb1", major: 8, minor: 17, fsType: type, properties: [:])
        }
        for type in ["vfat", "exfat", "ext4"] { try policy.checkFileSystem(card(type)) }
        for type in ["hfsplus", "ufs", "nilfs2", "f2fs", "btrfs", "ext2", "ntfs", "squashfs"] {
            let error = #expect(throws: IngestError.self) { try policy.checkFileSystem(card(type)) }
            #expect(error == .fileSystemRefused(device: "/dev/sdb1", fsType: type, allowed: ["vfat", "exfat", "ext4"]))
            #expect(error?.exitStatus == .noInput)
            #expect(error?.description.contains("[device] file_systems") == true)
        }
        let wider = MountPolicy(runtimeBase: "/run/ingest/cards", fileSystems: ["vfat", "hfsplus"])
        try wider.checkFileSystem(card("hfsplus"))
    }

    @Test func anUnmountedDeviceIsNotRefused() throws {
        try policy.checkNotSystem([], device: "/dev/sdb1")
    }

    @Test func systemdsRuntimeDirectoryIsWhereCardsAreMounted() {
        let systemd = MountPolicy(environment: ["RUNTIME_DIRECTORY": "/run/ingest/sdb1:/run/other"])
        #expect(systemd.runtimeBase == "/run/ingest/sdb1")
        #expect(systemd.mountPoint(forKernelName: "sdb1") == "/run/ingest/sdb1/sdb1")
        #expect(systemd.isRemovableMediaLocation("/run/ingest/sdb1/sdb1"))
        let plain = MountPolicy(environment: [:])
        #expect(plain.mountPoint(forKernelName: "mmcblk0p1") == "/run/ingest/cards/mmcblk0p1")
        #expect(MountPolicy(environment: ["RUNTIME_DIRECTORY": "relative"]).runtimeBase == MountPolicy.defaultRuntimeBase)
    }

    @Test func aDevicesMountsAreFoundByDeviceNumberWhateverTheirSourceName() {
        let card = CardDevice(node: "/dev/mmcblk0p2", kernelName: "mmcblk0p2", major: 179, minor: 2, fsType: "ext4", properties: [:])
        let table = MountTable(entries: [
            mount("/"),  // /dev/root, 179:2
            MountEntry(major: 179, minor: 1, root: "/", mountPoint: "/boot/firmware", fsType: "vfat", source: "/dev/mmcblk0p1", options: []),
        ])
        #expect(card.mounts(in: table).map(\.mountPoint) == ["/"])
    }
}

@Suite struct CardDeviceTests {
    @Test func aDeviceWithAFileSystemIsACardDevice() throws {
        let card = try CardDevice.check(node: "/dev/sdb1", udev: partition("sdb1", filesystem))
        #expect(card.kernelName == "sdb1")
        #expect(card.fsType == "exfat")
    }

    @Test func anSDCardInASlotIsNamedByItsOwnSerialAndProductName() {
        // What udev's 60-persistent-storage.rules gives mmcblk0p1.
        let device = BlockDevice(
            node: "/dev/mmcblk0p1",
            udevProperties: ["ID_FS_UUID": "3E5A-1B2C", "ID_NAME": "SL16G", "ID_SERIAL": "SL16G_0x8a1c42d3"])
        #expect(device.serial == "SL16G_0x8a1c42d3")
        #expect(device.model == "SL16G")
        let reader = BlockDevice(
            node: "/dev/sdb1", udevProperties: ["ID_SERIAL": "Generic_STORAGE_DEVICE_000000123456-0:0", "ID_SERIAL_SHORT": "000000123456"])
        #expect(reader.serial == "000000123456", "a USB reader's short serial comes first")
        let anonymous = BlockDevice(node: "/dev/sdc1", udevProperties: ["ID_SERIAL": "Generic_STORAGE_DEVICE"])
        #expect(anonymous.serial == nil, "a reader without a serial of its own has none")
    }

    @Test func aWholeDiskWithAPartitionTableIsRefusedNamingThePartitionToGive() {
        let error = #expect(throws: IngestError.self) {
            try CardDevice.check(node: "/dev/sdb", udev: partition("sdb", ["ID_PART_TABLE_TYPE": "dos", "DEVTYPE": "disk"]))
        }
        #expect(error?.description.contains("partition table") == true)
        #expect(error?.description.contains("like /dev/sdb1") == true)
        #expect(error?.exitStatus == .noInput)
    }

    @Test func anEncryptedVolumeIsNotAFileSystem() {
        let error = #expect(throws: IngestError.self) {
            try CardDevice.check(node: "/dev/sdb2", udev: partition("sdb2", ["ID_FS_USAGE": "crypto", "ID_FS_TYPE": "crypto_LUKS"]))
        }
        #expect(error?.description.contains("'crypto'") == true)
    }

    @Test func aDeviceUdevHasNotSeenPointsAtUdevd() {
        var unseen = partition("sdb1", ["DEVTYPE": "partition"])
        unseen.isInitialized = false
        let error = #expect(throws: IngestError.self) { try CardDevice.check(node: "/dev/sdb1", udev: unseen) }
        #expect(error?.description.contains("systemd-udevd") == true)
    }
}

@Suite struct MountOptionsTests {
    /// An ext superblock (as read at byte 1024) with the given feature bits.
    func superblock(compat: UInt32, incompat: UInt32, magic: UInt16 = 0xEF53) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 1024)
        bytes[0x38] = UInt8(magic & 0xff)
        bytes[0x39] = UInt8(magic >> 8)
        for i in 0..<4 {
            bytes[0x5C + i] = UInt8((compat >> (8 * UInt32(i))) & 0xff)
            bytes[0x60 + i] = UInt8((incompat >> (8 * UInt32(i))) & 0xff)
        }
        return bytes
    }

    @Test func aCleanJournalledExtCardIsMountedWithoutLoadingItsJournal() throws {
        let clean = try #require(ExtSuperblock(bytes: superblock(compat: 0x4 | 0x38, incompat: 0x2 | 0x40)))
        #expect(clean == ExtSuperblock(hasJournal: true, needsRecovery: false))
        #expect(MountOptions.data(fsType: "ext4", superblock: clean) == "noload")
        #expect(MountOptions.data(fsType: "ext3", superblock: clean) == "noload")
    }

    @Test func aJournalThatNeedsRecoveryIsReplayedSoTheNewestFilesAreSeen() throws {
        let dirty = try #require(ExtSuperblock(bytes: superblock(compat: 0x4, incompat: 0x4 | 0x2)))
        #expect(dirty.needsRecovery)
        #expect(MountOptions.data(fsType: "ext4", superblock: dirty) == nil)
    }

    @Test func otherFileSystemsGetNoData() throws {
        let ext2 = try #require(ExtSuperblock(bytes: superblock(compat: 0x38, incompat: 0x2)))
        #expect(!ext2.hasJournal)
        #expect(MountOptions.data(fsType: "ext2", superblock: ext2) == nil)
        #expect(MountOptions.data(fsType: "vfat", superblock: nil) == nil)
        #expect(MountOptions.data(fsType: "exfat", superblock: nil) == nil)
        #expect(ExtSuperblock(bytes: superblock(compat: 0x4, incompat: 0, magic: 0x1234)) == nil)
    }

    @Test func theMountIsReadOnlyAndCanRunNothing() {
        // MS_RDONLY 1, MS_NOSUID 2, MS_NODEV 4, MS_NOEXEC 8 (linux/mount.h), and nothing else.
        #expect(MountOptions.flags.rawValue == 0b1111)
        #expect(MountOptions.kernelTypes("ntfs") == ["ntfs3", "ntfs"])
        #expect(MountOptions.kernelTypes("vfat") == ["vfat"])
    }
}
