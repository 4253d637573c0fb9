import CSystemShims
import Glibc

/// An open file descriptor that closes itself.
///
/// A class so that one descriptor can be handed from a reader thread to a writer thread
/// without being copied; each is used by one thread at a time.
final class FileDescriptor: @unchecked Sendable {
    let raw: Int32
    private var isOpen = true

    init(adopting raw: Int32) { self.raw = raw }

    /// `openat(2)` relative to `directory` (or the working directory), `O_CLOEXEC` always set.
    convenience init(
        at directory: FileDescriptor? = nil, path: String, flags: Int32, mode: mode_t = 0
    ) throws(SystemError) {
        let dirfd = directory?.raw ?? AT_FDCWD
        let fd = try retryingEINTR("open", path: path) {
            openat(dirfd, path, flags | O_CLOEXEC, mode)
        }
        self.init(adopting: fd)
    }

    /// Closes now and reports the error `close` gives (for files we wrote, it matters).
    func close() throws(SystemError) {
        guard isOpen else { return }
        isOpen = false
        if Glibc.close(raw) == -1, errno != EINTR { throw SystemError.last("close") }
    }

    deinit { if isOpen { _ = Glibc.close(raw) } }

    /// Clean pages of this byte range leave the page cache (`POSIX_FADV_DONTNEED`); a
    /// length of 0 means to the end. Advice only: it cannot fail in a way that matters.
    func dropFromCache(offset: Int64 = 0, length: Int64 = 0) {
        _ = posix_fadvise(raw, off_t(offset), off_t(length), POSIX_FADV_DONTNEED)
    }

    func stat() throws(SystemError) -> Glibc.stat {
        var st = Glibc.stat()
        try retryingEINTR("fstat") { fstat(raw, &st) }
        return st
    }

    /// The mount this open file is reached through (`statx`, `AT_EMPTY_PATH`).
    func mount() throws(SystemError) -> MountIdentity {
        try MountIdentity.of([0], inDirectory: raw, path: nil)
    }

    /// This open file's status and the mount it is reached through, in one call. `path`
    /// names it in errors.
    func statusAndMount(path: String) throws(SystemError) -> (Glibc.stat, MountIdentity) {
        guard let found = MountIdentity.lstat([0], inDirectory: raw) else { throw .last("statx", path: path) }
        return found
    }

    /// The mount of the entry `name` (NUL-terminated, any bytes) in this directory, a symbolic
    /// link not followed: for a mount point, the mount over it. `path` names it in errors.
    func mount(of name: [CChar], path: String) throws(SystemError) -> MountIdentity {
        try MountIdentity.of(name, inDirectory: raw, path: path)
    }

    /// Reads until `buffer` is full or the file ends; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, path: String? = nil) throws(SystemError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = try retryingEINTR("read", path: path) {
                Glibc.read(raw, buffer.baseAddress! + filled, buffer.count - filled)
            }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Reads at `offset` (`pread`, the file position untouched) until `buffer` is full or the
    /// file ends; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) -> Int {
        var isDirect = false
        return try read(into: buffer, at: offset, isDirect: &isDirect, path: path)
    }

    /// Writes all of `bytes` at `offset` (`pwrite`, the file position untouched).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            written += try retryingEINTR("write", path: path) {
                Glibc.pwrite(raw, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            }
        }
    }
}

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
    static func of(_ name: [CChar], inDirectory descriptor: Int32, path: String?) throws(SystemError) -> MountIdentity {
        var device: UInt64 = 0, mountID: UInt64 = 0
        var hasMountID: Int32 = 0
        try retryingEINTR("statx", path: path) {
            ingest_statx_mount(descriptor, name, &device, &mountID, &hasMountID)
        }
        return MountIdentity(device: device, mountID: hasMountID != 0 ? mountID : nil)
    }

    /// The `lstat` of the entry `name` (NUL-terminated) in the open directory `descriptor`
    /// (of the open file itself when `name` is empty, `[0]`) and the mount it is on, asked in
    /// one call (a walk asks it of every entry of a card, an open of every file it reads).
    static func lstat(_ name: [CChar], inDirectory descriptor: Int32) -> (stat, MountIdentity)? {
        var st = stat()
        var mountID: UInt64 = 0
        var hasMountID: Int32 = 0
        while ingest_lstat_mount(descriptor, name, &st, &mountID, &hasMountID) != 0 {
            guard errno == EINTR else { return nil }
        }
        return (st, MountIdentity(device: UInt64(st.st_dev), mountID: hasMountID != 0 ? mountID : nil))
    }
}

/// `mkdir -p` with mode 0750 for what it creates; the error names the call and the path.
func makeDirectories(_ path: String) throws(SystemError) {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
        if mkdir(prefix, 0o750) != 0, errno != EEXIST { throw .last("mkdir", path: prefix) }
    }
    var st = Glibc.stat()
    guard stat(path, &st) == 0, st.isDirectory else { throw SystemError(call: "mkdir", errno: ENOTDIR, path: path) }
}

/// Reads a whole file of the kernel's (`/proc`, `/sys`: they report no size) as UTF-8 text,
/// without bound. What configures ingest, which anyone may point at a FIFO or `/dev/zero`, is
/// read with ``BoundedFile`` instead.
func readTextFile(_ path: String) throws(SystemError) -> String {
    try readTextFile(FileDescriptor(path: path, flags: O_RDONLY), path: path)
}

/// The rest of an open file, as UTF-8 text.
func readTextFile(_ file: FileDescriptor, path: String) throws(SystemError) -> String {
    var bytes: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
    defer { buffer.deallocate() }
    while true {
        let count = try file.read(into: buffer, path: path)
        bytes += buffer[..<count]
        if count < buffer.count { break }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Why a file that configures ingest (its configuration, AWS's shared files, which can
/// name a `credential_process` to run) cannot be trusted, or nil: it must belong to root or
/// to the user running ingest, and neither group nor others may write it. Anyone who can
/// write such a file can run commands as the station's ingest, which is root.
func untrustedReason(_ info: Glibc.stat, euid: uid_t = geteuid()) -> String? {
    if info.st_uid != 0, info.st_uid != euid {
        return "it belongs to user \(info.st_uid), not root or the user running ingest (\(euid)); "
            + "whoever owns it can make ingest run commands. Run `chown root: FILE` (or your own user)"
    }
    let mode = UInt32(info.st_mode) & 0o777
    if mode & 0o022 != 0 {
        return "its mode \(String(mode, radix: 8)) lets group or others change it, and with it what ingest runs. "
            + "Run `chmod go-w FILE`"
    }
    return nil
}

extension Glibc.stat {
    var isRegularFile: Bool { (st_mode & S_IFMT) == S_IFREG }
    var isDirectory: Bool { (st_mode & S_IFMT) == S_IFDIR }
    var isSymlink: Bool { (st_mode & S_IFMT) == S_IFLNK }
    /// Modification time in nanoseconds since the epoch, held at `Int64.max` (or `.min`)
    /// beyond what 64 bits of nanoseconds hold (after 2262-04-11, before 1677-09-21): the
    /// time is the card's to say, and ext4 holds dates up to 2446.
    var mtimeNanoseconds: Int64 { nanosecondsSinceEpoch(seconds: Int64(st_mtim.tv_sec), nanoseconds: Int64(st_mtim.tv_nsec)) }
}

/// `seconds × 10⁹ + nanoseconds`, saturated at `Int64.min` and `.max` instead of trapping.
func nanosecondsSinceEpoch(seconds: Int64, nanoseconds: Int64) -> Int64 {
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    return scaled.addingSaturating(nanoseconds)
}

extension Int64 {
    /// The sum, held at `.max` or `.min` instead of trapping. Sizes and times come from the
    /// card, and a damaged or hostile file system can report any value at all.
    public func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other < 0 ? .min : .max }
        return sum
    }
}
