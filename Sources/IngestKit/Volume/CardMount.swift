import Logging

/// The fields of an ext2/3/4 superblock the mount options depend on.
struct ExtSuperblock: Equatable {
    /// Where the superblock starts on the device, and how much of it is read.
    static let offset: Int64 = 1024
    static let length = 1024

    /// The file system has a journal (ext3, ext4).
    var hasJournal: Bool
    /// The journal holds changes not yet written to their place: the file system was not
    /// unmounted cleanly (a camera or robot switched off while writing).
    var needsRecovery: Bool

    /// Nil when `bytes` (read at ``offset``) are no ext superblock.
    init?(bytes: [UInt8]) {
        func le16(_ at: Int) -> UInt32 { UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 }
        func le32(_ at: Int) -> UInt32 { le16(at) | le16(at + 2) << 16 }
        guard bytes.count >= 0x64, le16(0x38) == 0xEF53 else { return nil }
        hasJournal = le32(0x5C) & 0x4 != 0  // COMPAT_HAS_JOURNAL
        needsRecovery = le32(0x60) & 0x4 != 0  // INCOMPAT_RECOVER
    }

    init(hasJournal: Bool, needsRecovery: Bool) {
        self.hasJournal = hasJournal
        self.needsRecovery = needsRecovery
    }

    /// Reads the superblock of the device at `node`; nil when it has none or cannot be read.
    static func read(node: String) -> ExtSuperblock? {
        guard let fd = try? FileDescriptor(path: node, flags: .readOnly) else { return nil }
        var bytes = [UInt8](repeating: 0, count: length)
        let count = bytes.withUnsafeMutableBytes { try? fd.read(into: $0, at: offset) }
        guard let count, count == length else { return nil }
        return ExtSuperblock(bytes: bytes)
    }
}

/// How ingest mounts a card: read-only, and never able to run or open anything on it.
///
/// ext3/ext4 get `noload` when their journal is clean, so the mount writes nothing to the
/// card. A journal that needs recovery (a device switched off while writing) is replayed
/// instead, by mounting without `noload`: it is the one write a read-only ext mount makes,
/// the same any Linux host makes when the card is mounted, and without it the newest files
/// would be missing, and could be wiped from the card believing them ingested. A card that
/// cannot be written at all (a locked SD card) is mounted with `noload` after all, and the
/// log says that its newest changes may not be visible.
enum MountOptions {
    static let flags: System.MountFlags = [.readOnly, .noSetID, .noDevices, .noExecution]

    /// The `data` argument of mount(2) for a file system of udev's type `fsType`.
    static func data(fsType: String, superblock: ExtSuperblock?) -> String? {
        guard ["ext3", "ext4", "ext2"].contains(fsType), let superblock, superblock.hasJournal else { return nil }
        return superblock.needsRecovery ? nil : "noload"
    }

    /// The kernel's names for udev's type, to try in order.
    static func kernelTypes(_ fsType: String) -> [String] {
        switch fsType {
        case "ntfs": ["ntfs3", "ntfs"]
        default: [fsType]
        }
    }
}

/// Whether this process may mount and unmount: whether it holds `CAP_SYS_ADMIN`. Root run by
/// hand does; the main process of `ingest@.service` does not, and finds the card mounted by
/// the unit's `ExecStartPre=+ingest mount-card`.
enum MountPrivilege {
    /// `CAP_SYS_ADMIN` of linux/capability.h.
    private static let sysAdmin: Int32 = 21

    static var held: Bool { System.hasEffectiveCapability(sysAdmin) }
}

extension MountEntry {
    /// Read-only, and nothing on it can run, be set-uid or be opened as a device: a mount as
    /// ingest makes one, which may be used again.
    public var isInert: Bool { ["ro", "nosuid", "nodev", "noexec"].allSatisfy(options.contains) }
}

/// A card's file system where ingest reads it: a mount that was there (left alone), or one
/// ingest made, which ``release()`` unmounts and whose directory it removes.
public final class CardMount: Sendable {
    public let path: String
    public let device: String
    /// Made by ingest (now, by `ingest mount-card`, or by a run that died before unmounting)
    /// and this process may unmount it: unmounted on release.
    public let isOurs: Bool

    init(path: String, device: String, isOurs: Bool) {
        self.path = path
        self.device = device
        self.isOurs = isOurs
    }

    /// Finds the card's file system mounted at a place for removable media, or mounts it
    /// read-only under the policy's runtime directory. Call with the device's lock held.
    ///
    /// A process without `CAP_SYS_ADMIN` (the ingest@ unit's main process) never mounts or
    /// unmounts: it uses the mount `ingest mount-card` made at the card's place and leaves
    /// it to `ingest unmount-card`.
    public static func prepare(_ card: CardDevice, policy: MountPolicy, logger: Logger) throws(IngestError) -> CardMount {
        let ours = policy.mountPoint(forKernelName: card.kernelName)
        let table: MountTable
        do { table = try MountTable.current() } catch {
            throw .mountFailed(device: card.node, mountPoint: ours, reason: "cannot read /proc/self/mountinfo: \(error)")
        }
        let mounts = card.mounts(in: table)
        try policy.checkNotSystem(mounts, device: card.node)
        try policy.checkFileSystem(card)
        let mayMount = MountPrivilege.held
        if let made = mounts.first(where: { $0.root == "/" && $0.mountPoint == ours }), made.isInert || !mayMount {
            // Mounted by `ingest mount-card`, or by an ingest that died before unmounting.
            return CardMount(path: ours, device: card.node, isOurs: mayMount)
        }
        if let existing = mounts.first(where: { $0.root == "/" && $0.mountPoint != ours }) {
            return CardMount(path: existing.mountPoint, device: card.node, isOurs: false)
        }
        guard mayMount else {
            throw .mountFailed(
                device: card.node, mountPoint: ours,
                reason: "this process may not mount (it holds no CAP_SYS_ADMIN: it is not root, or it is "
                    + "ingest@.service's, whose ExecStartPre mounts the card); as root, mount it first with "
                    + "`ingest mount-card \(card.node)`, or mount it under /media and ingest it by its path")
        }
        // Whatever is still mounted on our directory belongs to a card that has gone, or is
        // not mounted the way ingest mounts a card (writable, or with programs runnable).
        for stale in table.entries where stale.mountPoint == ours {
            logger.notice("removing a stale mount", metadata: ["mount_point": "\(ours)", "source": "\(stale.source)"])
            try? System.unmount(ours, detaching: true)
        }
        try mount(card, at: ours, logger: logger)
        return CardMount(path: ours, device: card.node, isOurs: true)
    }

    private static func mount(_ card: CardDevice, at path: String, logger: Logger) throws(IngestError) {
        func failure(_ reason: String) -> IngestError { .mountFailed(device: card.node, mountPoint: path, reason: reason) }
        do { try makePrivateDirectories(path) } catch { throw failure("cannot create the directory: \(error.reason)") }
        let superblock = ExtSuperblock.read(node: card.node)
        var data = MountOptions.data(fsType: card.fsType, superblock: superblock)
        if superblock?.needsRecovery == true, card.fsType.hasPrefix("ext") {
            logger.notice(
                "the card's journal needs recovery (it was not unmounted cleanly); the kernel replays it while mounting",
                metadata: ["device": "\(card.node)"])
        }
        var lastError: SystemError?
        for type in MountOptions.kernelTypes(card.fsType) {
            var result = mountCall(card.node, path, type, data)
            if result?.errno == .readOnlyFileSystem, data == nil, superblock?.needsRecovery == true {
                logger.warning(
                    "the card cannot be written, so its journal cannot be replayed: mounting without it; changes the card's journal still holds (the newest files) may be missing",
                    metadata: ["device": "\(card.node)"])
                data = "noload"
                result = mountCall(card.node, path, type, data)
            }
            guard let result else { return }
            lastError = result
            if result.errno != .noSuchDevice { break }
        }
        try? System.removeDirectory(path)
        let error = lastError ?? SystemError(call: "mount", errno: .invalidArgument, path: path)
        switch error.errno {
        case .noSuchDevice: throw failure("this kernel cannot mount \(card.fsType) file systems (load its module: modprobe \(card.fsType))")
        case .notPermitted, .permissionDenied: throw failure("not permitted (\(error.reason)); mounting needs root with CAP_SYS_ADMIN")
        case .resourceBusy: throw failure("the device is busy (\(error.reason)); is it in use elsewhere?")
        default: throw failure("\(error.reason); the file system may be damaged or not \(card.fsType)")
        }
    }

    /// mount(2) as ingest mounts a card; nil when it mounted, or what went wrong.
    private static func mountCall(_ source: String, _ target: String, _ type: String, _ data: String?) -> SystemError? {
        do { try System.mount(source, at: target, type: type, flags: MountOptions.flags, data: data) } catch { return error }
        return nil
    }

    /// Unmounts what ingest mounted and removes its directory (see ``unmount(at:)``); leaves
    /// any other mount alone. Returns what went wrong, for the log; nothing is lost either way.
    @discardableResult
    public func release() -> SystemError? {
        guard isOurs else { return nil }
        return Self.unmount(at: path)
    }

    /// Unmounts whatever is mounted at `path` (each of them, when mounts are stacked there;
    /// lazily when something still holds one: a card pulled mid-read can leave it busy) and
    /// removes the directory. Touches no other mount point, and is done at once when nothing
    /// is mounted there. Returns what went wrong.
    @discardableResult
    public static func unmount(at path: String) -> SystemError? {
        // Bounded: each call takes the top mount off, and a place holds one or two at most.
        unmounting: for _ in 0..<16 {
            do { try System.unmount(path, followingLinks: false) } catch {
                switch error.errno {
                case .invalidArgument, .noSuchFileOrDirectory: break unmounting  // nothing (more) mounted there
                case .resourceBusy:
                    do { try System.unmount(path, detaching: true, followingLinks: false) } catch { return error }
                default: return error
                }
            }
        }
        do { try System.removeDirectory(path) } catch where error.errno != .noSuchFileOrDirectory { return error } catch {}
        return nil
    }
}

/// Creates `path` and its missing parents, each new one with mode 0700: a card's mount is
/// reachable by root alone.
func makePrivateDirectories(_ path: String) throws(SystemError) {
    var prefix = ""
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        prefix += "/" + component
        do { try System.makeDirectory(prefix, mode: 0o700) } catch where error.errno == .fileExists {}
    }
    guard (try? System.status(path))?.isDirectory == true else {
        throw SystemError(call: "mkdir", errno: .notDirectory, path: path)
    }
}
