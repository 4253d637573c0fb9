
/// Which block devices are cards. The same test as the shipped udev rule
/// (`udev-rules/99-ingest.rules`), so that `ingest watch` and the systemd units take the
/// same devices: a file system (`ID_FS_USAGE=filesystem`) on a block device that is either
/// on USB (a card reader, `ID_BUS=usb`) or an SD slot (`mmcblk*` whose `mmc` parent has
/// `type` `SD`; not the eMMC a board boots from, whose type is `MMC`).
public enum CardPredicate {
    public static func isCard(_ device: UdevDevice) -> Bool {
        guard device.subsystem == "block", device.properties["ID_FS_USAGE"] == "filesystem" else { return false }
        if device.properties["ID_BUS"] == "usb" { return true }
        return device.kernelName.hasPrefix("mmcblk") && device.mmcType == "SD"
    }
}

/// Where cards may be found mounted, where ingest mounts those it mounts itself, and which
/// file systems it lets the kernel parse from a card.
///
/// A file system mounted anywhere else (`/`, `/boot`, `/home`, `/var`, `/mnt`…) is a
/// system's, not a card's: a Raspberry Pi's root is on an SD card (`mmcblk0p2`), and a
/// station's data or staging disk is often mounted under `/mnt`; neither must ever be
/// ingested as a card.
public struct MountPolicy: Sendable, Equatable {
    /// The directory under which ingest mounts cards, one directory per kernel name.
    public var runtimeBase: String
    /// Mount points under these hold removable media.
    public var removableRoots: [String]
    /// The file-system types a card may have (udev's `ID_FS_TYPE`); any other is refused
    /// before it is mounted or read.
    public var fileSystems: [String]

    public static let standardRemovableRoots = ["/media", "/run/media"]
    /// What cameras, drones and robots write: FAT and exFAT, and ext4 for Linux boards.
    /// Each other driver (hfsplus, ufs, nilfs2, btrfs…) is more kernel code a crafted
    /// superblock can reach.
    public static let standardFileSystems = ["vfat", "exfat", "ext4"]
    /// Where root mounts cards when systemd gave no runtime directory.
    public static let defaultRuntimeBase = "/run/ingest/cards"

    public init(
        runtimeBase: String, removableRoots: [String] = standardRemovableRoots, fileSystems: [String] = standardFileSystems
    ) {
        self.runtimeBase = runtimeBase
        self.removableRoots = removableRoots + [runtimeBase, "/run/ingest"]
        self.fileSystems = fileSystems
    }

    /// `$RUNTIME_DIRECTORY` (the first, when systemd gives several) when set, else
    /// ``defaultRuntimeBase``.
    public init(environment: [String: String], fileSystems: [String] = standardFileSystems) {
        let given = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
        self.init(runtimeBase: given.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? Self.defaultRuntimeBase, fileSystems: fileSystems)
    }

    /// Refuses a card whose file system is not one of ``fileSystems``.
    public func checkFileSystem(_ card: CardDevice) throws(IngestError) {
        guard fileSystems.contains(card.fsType) else {
            throw .fileSystemRefused(device: card.node, fsType: card.fsType, allowed: fileSystems)
        }
    }

    /// Where ingest mounts the card whose kernel name is `kernelName`.
    public func mountPoint(forKernelName kernelName: String) -> String { "\(runtimeBase)/\(kernelName)" }

    /// Whether a file system mounted at `mountPoint` may be a card: at or under one of the
    /// ``removableRoots``.
    public func isRemovableMediaLocation(_ mountPoint: String) -> Bool {
        removableRoots.contains { root in mountPoint == root || mountPoint.hasPrefix(root + "/") }
    }

    /// Refuses a device any of whose mounts is at a system place (the first such mount is
    /// named); `mounts` are the device's own.
    public func checkNotSystem(_ mounts: [MountEntry], device: String) throws(IngestError) {
        if let system = mounts.first(where: { !isRemovableMediaLocation($0.mountPoint) }) {
            throw .systemDevice(device: device, mountPoint: system.mountPoint)
        }
    }
}

/// A block device given with `--device` (or seen by `ingest watch`), checked to be a card's
/// file system: a block device udev knows, with a file system on it.
public struct CardDevice: Sendable, Equatable {
    /// The node as given, e.g. `/dev/sdb1`.
    public var node: String
    /// The kernel's name, e.g. `sdb1`.
    public var kernelName: String
    public var major: UInt32
    public var minor: UInt32
    /// `ID_FS_TYPE`, e.g. `vfat`, `exfat`, `ext4`.
    public var fsType: String
    public var properties: [String: String]

    /// The device's file system's mounts, from `table`: matched by device number, so that
    /// a mount made through another name (`/dev/root`, `/dev/disk/by-uuid/…`) is found too.
    public func mounts(in table: MountTable) -> [MountEntry] {
        table.entries.filter { $0.major == major && $0.minor == minor }
    }

    /// Checks `node` and reads what udev knows of it.
    public static func inspect(node: String) throws(IngestError) -> CardDevice {
        let st: FileStatus
        do { st = try System.status(node) } catch { throw .notACard(device: node, reason: error.reason) }
        guard st.type == .blockDevice else {
            throw .notACard(
                device: node,
                reason: "not a block device (give the card's device node, like /dev/sdb1, or ingest a directory by its path)")
        }
        let (major, minor) = Udev.split(st.st_rdev)
        guard let udev = Udev.blockDevice(major: major, minor: minor) else {
            throw .notACard(device: node, reason: "the kernel has no block device \(major):\(minor)")
        }
        return try check(node: node, udev: udev)
    }

    /// The pure part of ``inspect(node:)``: what udev says must describe a file system.
    static func check(node: String, udev: UdevDevice) throws(IngestError) -> CardDevice {
        let properties = udev.properties
        guard udev.isInitialized else {
            throw .notACard(
                device: node,
                reason: "udev has no record of it (is systemd-udevd running? `udevadm info \(node)` shows what it knows)")
        }
        guard properties["ID_FS_USAGE"] == "filesystem", let fsType = properties["ID_FS_TYPE"], !fsType.isEmpty else {
            let found = properties["ID_FS_USAGE"].map { "its content is '\($0)'" }
                ?? (properties["ID_PART_TABLE_TYPE"] != nil ? "it holds a partition table" : "no file system was found on it")
            throw .notACard(
                device: node,
                reason: "it holds no file system (\(found)); give the partition that holds the files, like /dev/sdb1")
        }
        return CardDevice(
            node: node, kernelName: udev.kernelName.isEmpty ? Self.baseName(node) : udev.kernelName,
            major: udev.major, minor: udev.minor, fsType: fsType, properties: properties)
    }

    /// The kernel name of the device `node` names, without asking udev or even needing the
    /// device to exist (a card pulled out): the last component of the node, after resolving
    /// links when it still resolves (`/dev/disk/by-uuid/…` names `sdb1`).
    public static func kernelName(ofNode node: String) throws(IngestError) -> String {
        let resolved = try? System.realPath(node)
        let name = baseName(resolved ?? node)
        guard node.hasPrefix("/"), !name.isEmpty, name != ".", name != ".." else {
            throw .notACard(device: node, reason: "give the card's device node, like /dev/sdb1")
        }
        return name
    }

    static func baseName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
