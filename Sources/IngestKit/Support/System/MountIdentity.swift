import CSystemShims

/// Which mount a file is reached through: its file system's device and, where the kernel
/// reports it (Linux 5.8 and later), the mount's id.
///
/// The device alone cannot tell a bind mount from the file system it shows: a folder of the
/// card bind-mounted inside the card (or a host folder of the same disk, for a card that is
/// a folder) has the card's `st_dev`, yet it is another mount, and what is beneath it may
/// be anywhere on that file system. Mount ids differ for every mount, bind mounts included.
struct MountIdentity: Equatable, Sendable {
    /// The file system's device, as `st_dev` gives it.
    var device: UInt64
    /// The mount's id (`stx_mnt_id`), nil where the kernel does not report it.
    var mountID: UInt64?

    /// Whether `other` is reached through the same mount: the same mount id where both
    /// have one, otherwise (an older kernel) the same device, all that can be told there.
    func isSameMount(as other: MountIdentity) -> Bool {
        guard device == other.device else { return false }
        guard let mountID, let otherID = other.mountID else { return true }
        return mountID == otherID
    }

    /// The mount of the entry `name` (NUL-terminated) in the open directory `descriptor`, or
    /// of the open file itself when `name` is empty (`[0]`).
    static func of(_ name: [CChar], inDirectory directory: FileDescriptor, path: String?) throws(SystemError) -> MountIdentity {
        var device: UInt64 = 0, mountID: UInt64 = 0
        var hasMountID: Int32 = 0
        try valueOrErrno("statx", path: path) {
            ingest_statx_mount(directory.raw, name, &device, &mountID, &hasMountID)
        }
        return MountIdentity(device: device, mountID: hasMountID != 0 ? mountID : nil)
    }

    /// The `lstat` of the entry `name` (NUL-terminated) in the open directory `descriptor`
    /// (of the open file itself when `name` is empty, `[0]`) and the mount it is on, asked in
    /// one call (a walk asks it of every entry of a card, an open of every file it reads).
    /// `path` names it in errors.
    static func lstat(_ name: [CChar], inDirectory directory: FileDescriptor, path: String?) throws(SystemError) -> (FileStatus, MountIdentity) {
        var st = FileStatus()
        var mountID: UInt64 = 0
        var hasMountID: Int32 = 0
        try valueOrErrno("statx", path: path) { ingest_lstat_mount(directory.raw, name, &st, &mountID, &hasMountID) }
        return (st, MountIdentity(device: UInt64(st.st_dev), mountID: hasMountID != 0 ? mountID : nil))
    }
}
