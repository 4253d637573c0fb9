import Foundation

/// What udev knows of the block device a card's file system lives on.
public struct BlockDevice: Equatable, Sendable, Codable {
    public var node: String
    public var fsUUID: String?
    public var fsLabel: String?
    public var fsType: String?
    public var serial: String?
    public var vendor: String?
    public var model: String?
    public var bus: String?

    /// Builds the record from udev properties (`ID_FS_UUID`, `ID_FS_LABEL`, …). An SD card in
    /// a slot (`mmcblk*`) has no `ID_SERIAL_SHORT` or `ID_MODEL`: udev names it by the card's
    /// own `ID_SERIAL` (product name and serial) and `ID_NAME`.
    public init(node: String, udevProperties p: [String: String]) {
        func value(_ key: String) -> String? { p[key].flatMap { $0.isEmpty ? nil : $0 } }
        self.node = value("DEVNAME") ?? node
        fsUUID = value("ID_FS_UUID")
        fsLabel = value("ID_FS_LABEL")
        fsType = value("ID_FS_TYPE")
        // Only an SD card's ID_SERIAL (it has an ID_NAME) is its own; a USB reader's without
        // a short serial is just its make, shared by every reader of that make.
        serial = value("ID_SERIAL_SHORT") ?? value("ID_NAME").flatMap { _ in value("ID_SERIAL") }
        vendor = value("ID_VENDOR")
        model = value("ID_MODEL") ?? value("ID_NAME")
        bus = value("ID_BUS")
    }
}

/// Which volume a path belongs to, and the stable key the journal files it under.
///
/// A card is known by its file system UUID wherever it is mounted, so a card that comes
/// back as `/dev/sdc1` at `/media/other` is still the same card. A plain directory with no
/// block device is known by its absolute path.
public struct VolumeIdentity: Equatable, Sendable, Codable {
    /// The journal's key for this volume, e.g. `uuid:1b6e…` or `path:/srv/incoming`.
    public var key: String
    /// The directory that is scanned (absolute, symlinks resolved).
    public var rootPath: String
    /// Where the file system is mounted, when it is a mount of a block device.
    public var mountPoint: String?
    /// `rootPath` within its file system ("/" for the whole card).
    public var pathInFileSystem: String
    public var fsType: String?
    public var device: BlockDevice?

    /// Whether the file system numbers a file's inode once, for good: ext4, XFS, Btrfs…
    /// FAT and exFAT (most cards) do not: Linux numbers their files afresh at every mount, so
    /// an inode compared there across mounts would call every file of a re-inserted card
    /// changed. Their files are compared by size and time alone.
    public var keepsInodeNumbers: Bool {
        ["ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "ntfs3", "hfsplus"].contains(fsType ?? "")
    }

    /// A human name for messages: a whole card by its label (else its device node), a
    /// directory by its path.
    public var displayName: String {
        guard let device, pathInFileSystem == "/" else { return rootPath }
        return device.fsLabel ?? device.node
    }

    /// Identifies the volume of `path` from the mount table and udev.
    public static func identify(
        path: String,
        mounts: MountTable? = nil,
        udevProperties: (UInt32, UInt32) -> [String: String] = Udev.blockDeviceProperties
    ) throws(IngestError) -> VolumeIdentity {
        let root: String, st: FileStatus
        do {
            root = try System.realPath(path)
            st = try System.status(root)
        } catch {
            throw .sourceUnavailable(path: path, reason: error.reason)
        }
        guard st.isDirectory else {
            throw .sourceUnavailable(path: path, reason: "not a directory (give the card's mount point or a folder)")
        }
        let table: MountTable
        do { table = try mounts ?? MountTable.current() } catch {
            throw .sourceUnavailable(path: path, reason: "cannot read /proc/self/mountinfo: \(error)")
        }
        let (major, minor) = Udev.split(st.st_dev)
        return identify(
            rootPath: root, mount: table.mount(containing: root, major: major, minor: minor),
            udevProperties: udevProperties)
    }

    /// The pure part of ``identify(path:mounts:udevProperties:)``: from a resolved path and its mount.
    static func identify(
        rootPath: String, mount: MountEntry?, udevProperties: (UInt32, UInt32) -> [String: String]
    ) -> VolumeIdentity {
        guard let mount else {
            return VolumeIdentity(
                key: "path:\(rootPath)", rootPath: rootPath, mountPoint: nil,
                pathInFileSystem: rootPath, fsType: nil, device: nil)
        }
        let below = mount.mountPoint == "/" ? rootPath : String(rootPath.dropFirst(mount.mountPoint.count))
        let inFileSystem = Self.join(mount.root, below)
        var identity = VolumeIdentity(
            key: "path:\(rootPath)", rootPath: rootPath, mountPoint: mount.mountPoint,
            pathInFileSystem: inFileSystem, fsType: mount.fsType, device: nil)
        guard mount.source.hasPrefix("/dev/") else { return identity }
        let device = BlockDevice(node: mount.source, udevProperties: udevProperties(mount.major, mount.minor))
        identity.device = device
        let scope = inFileSystem == "/" ? "" : inFileSystem
        if let uuid = device.fsUUID {
            identity.key = "uuid:\(uuid)\(scope)"
        } else if let serial = device.serial {
            identity.key = "serial:\(serial):\(device.fsLabel ?? "")\(scope)"
        }
        return identity
    }

    static func join(_ base: String, _ rest: String) -> String {
        let trimmed = rest.drop { $0 == "/" }
        if trimmed.isEmpty { return base }
        return base == "/" ? "/\(trimmed)" : "\(base)/\(trimmed)"
    }
}
