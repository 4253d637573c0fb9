import CSystemShims
import Glibc

// The system calls IngestKit makes by path or for the process, each wrapped once, as
// swift-system's Syscalls.swift does; calls on an open file are ``FileDescriptor``'s methods,
// a directory's listing is ``DirectoryReader``'s. Only this folder imports Glibc
// (scripts/layers.py holds every other file to that): code elsewhere calls these.
//
// Every wrapper reports failure the same way: a ``SystemError`` naming the call, the
// ``Errno`` it left and the path it concerned. A call a signal interrupts (`EINTR`) is made
// again in one place, ``retryingOnInterrupt(_:)``, never in a loop of the caller's.
//
// Where each raw call went:
//   open/openat ............ FileDescriptor(at:path:flags:mode:described:), flags typed (.readOnly, …)
//   read/pread/write/pwrite  FileDescriptor.read(into:…)/readOnce/write(_:at:…)/writeOnce (DirectIO.swift: direct I/O)
//   fstat, statx ........... FileDescriptor.stat(), statusAndMount(path:), mount(); MountIdentity
//   stat/lstat/fstatat ..... System.status(_:in:followingLinks:) → FileStatus (.type, .isDirectory, …)
//   fsync/fdatasync/syncfs . FileDescriptor.sync(path:)/syncData(path:)/syncFileSystem(path:)
//   ftruncate/fallocate .... FileDescriptor.truncate(to:path:)/reserve(length:path:)
//   sync_file_range ........ FileDescriptor.startWriteback(offset:length:)/waitForWriteback(offset:length:)
//   posix_fadvise .......... FileDescriptor.dropFromCache(offset:length:)/adviseSequential(offset:length:)
//   flock, F_OFD_SETLK ..... FileDescriptor.lockExclusively(waiting:path:)/unlock(), lockByte/unlockByte (FileLock)
//   mkstemp, fchmod ........ FileDescriptor.temporary(in:hiding:), changeMode(_:path:) (AtomicFile)
//   opendir/readdir ........ DirectoryReader
//   rename/link/unlink ..... System.rename(_:to:)/link(_:to:)/unlink(_:)/removeIfPresent(_:)/unlinkDetached(_:)
//   mkdir/rmdir/truncate ... System.makeDirectory(_:mode:)/removeDirectory(_:)/truncate(_:to:); makeDirectories (Files.swift)
//   access ................. System.access(_:_:)/exists(_:)
//   statvfs/realpath ....... System.fileSystemStatus(_:)/realPath(_:)
//   mount/umount2 .......... System.mount(_:at:type:flags:data:)/unmount(_:detaching:followingLinks:)
//   getpid/geteuid/getpwuid  System.processID/effectiveUserID/homeDirectory; gethostname: hostName
//   kill(pid, 0) ........... System.processExists(_:); signal/raise: ignoreSignal, endProcess(bySignal:)
//   gmtime_r/timegm ........ System.universalTime(_:)/seconds(universal:)
//   isatty/TIOCGWINSZ ...... System.isTerminal(_:)/terminalColumns(_:)
// A call not here yet gets its wrapper here (or in FileDescriptor), not a Glibc import
// elsewhere: scripts/layers.py refuses one.

/// Makes `call`, a system call that returns -1 with `errno` set when it fails, again for as
/// long as a signal interrupts it (`EINTR`), and gives its result or the error it left: the
/// one place `EINTR` is retried.
func retryingOnInterrupt<Value: FixedWidthInteger>(_ call: () -> Value) -> Result<Value, Errno> {
    while true {
        let value = call()
        if value != -1 { return .success(value) }
        let error = Errno.current
        if error != .interrupted { return .failure(error) }
    }
}

/// `call`'s result (made again while interrupted, ``retryingOnInterrupt(_:)``), or a
/// ``SystemError`` naming `name` and `path` when it fails.
@discardableResult
func valueOrErrno<Value: FixedWidthInteger>(
    _ name: String, path: String? = nil, _ call: () -> Value
) throws(SystemError) -> Value {
    switch retryingOnInterrupt(call) {
    case .success(let value): value
    case .failure(let errno): throw SystemError(call: name, errno: errno, path: path)
    }
}

/// The system calls that take a path or concern the process, typed, each throwing a
/// ``SystemError`` that names the call and the path. (Public only for what a public default
/// argument asks: ``effectiveUserID``.)
public enum System {
    // MARK: Files by path

    /// `fstatat(2)` of `path` (relative to `directory`, or to the working directory): with
    /// `followingLinks` false, a symbolic link's own status (`lstat`). Takes a C string so a
    /// card's path need not be UTF-8; a `String` converts on its own.
    static func status(
        _ path: UnsafePointer<CChar>, in directory: FileDescriptor? = nil, followingLinks: Bool = true
    ) throws(SystemError) -> FileStatus {
        var status = FileStatus()
        let flags = followingLinks ? 0 : AT_SYMLINK_NOFOLLOW
        if case .failure(let errno) = retryingOnInterrupt({ fstatat(directory?.raw ?? AT_FDCWD, path, &status, flags) }) {
            throw SystemError(call: followingLinks ? "stat" : "lstat", errno: errno, path: String(cString: path))
        }
        return status
    }

    /// What `access(2)` checks: the permissions this process's real user has on a path.
    struct Access: OptionSet, Sendable {
        let rawValue: Int32
        /// Only that the path exists (`F_OK`).
        static let exists: Access = []
        static let read = Access(rawValue: R_OK)
        static let write = Access(rawValue: W_OK)
        static let execute = Access(rawValue: X_OK)
    }

    /// `access(2)`: fails unless this process's real user may `mode` the path.
    static func access(_ path: String, _ mode: Access) throws(SystemError) {
        try valueOrErrno("access", path: path) { Glibc.access(path, mode.rawValue) }
    }

    /// Whether something is at `path` (a symbolic link followed) that this process may see.
    static func exists(_ path: String) -> Bool { Glibc.access(path, F_OK) == 0 }

    /// `rename(2)`: `path` takes the name `newPath`, replacing what had it.
    static func rename(_ path: String, to newPath: String) throws(SystemError) {
        try valueOrErrno("rename", path: path) { Glibc.rename(path, newPath) }
    }

    /// `truncate(2)`: cuts (or extends with zeros) the file at `path` to `length` bytes.
    static func truncate(_ path: String, to length: Int64) throws(SystemError) {
        try valueOrErrno("truncate", path: path) { Glibc.truncate(path, off_t(length)) }
    }

    /// `link(2)`: `newPath` becomes a second name of the file at `path`.
    static func link(_ path: String, to newPath: String) throws(SystemError) {
        try valueOrErrno("link", path: newPath) { Glibc.link(path, newPath) }
    }

    /// `unlink(2)`: the name goes (the file with it once no name or descriptor holds it).
    static func unlink(_ path: String) throws(SystemError) {
        try valueOrErrno("unlink", path: path) { Glibc.unlink(path) }
    }

    /// Removes the name `path` and says whether it is gone: removed now, or not there in the
    /// first place (`ENOENT`). What a cleanup wants to know.
    @discardableResult
    static func removeIfPresent(_ path: String) -> Bool {
        do { try unlink(path) } catch { return error.errno == .noSuchFileOrDirectory }
        return true
    }

    /// Deletes the file at `path` in a process of its own that this one neither waits for
    /// nor outlives the need of (`ingest_unlink_detached`, CSystemShims): freeing a large
    /// file's blocks can take long, and a process cannot exit while one of its threads is in
    /// `unlink(2)`. Fails only when that process cannot be started (then nothing is deleted).
    static func unlinkDetached(_ path: String) throws(SystemError) {
        try valueOrErrno("fork", path: path) { ingest_unlink_detached(path) }
    }

    /// `mkdir(2)` of one directory with `mode` (less the umask).
    static func makeDirectory(_ path: String, mode: mode_t) throws(SystemError) {
        try valueOrErrno("mkdir", path: path) { mkdir(path, mode) }
    }

    /// `rmdir(2)`: removes an empty directory.
    static func removeDirectory(_ path: String) throws(SystemError) {
        try valueOrErrno("rmdir", path: path) { rmdir(path) }
    }

    /// `realpath(3)`: the absolute path, every symbolic link and `.`/`..` resolved.
    static func realPath(_ path: String) throws(SystemError) -> String {
        guard let resolved = Glibc.realpath(path, nil) else { throw .last("realpath", path: path) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `statvfs(3)` of the file system that holds `path`.
    static func fileSystemStatus(_ path: String) throws(SystemError) -> FileSystemStatus {
        var status = FileSystemStatus()
        try valueOrErrno("statvfs", path: path) { statvfs(path, &status) }
        return status
    }

    /// `mount(2)`'s flags, typed.
    struct MountFlags: OptionSet, Sendable {
        let rawValue: UInt
        static let readOnly = MountFlags(rawValue: UInt(MS_RDONLY))
        /// Set-user-id and set-group-id bits do nothing (`MS_NOSUID`).
        static let noSetID = MountFlags(rawValue: UInt(MS_NOSUID))
        /// Device nodes cannot be opened (`MS_NODEV`).
        static let noDevices = MountFlags(rawValue: UInt(MS_NODEV))
        /// Nothing on it can be run (`MS_NOEXEC`).
        static let noExecution = MountFlags(rawValue: UInt(MS_NOEXEC))
    }

    /// `mount(2)` of `source` at `target`, a file system of `type`; `data` is the file
    /// system's own options.
    static func mount(
        _ source: String, at target: String, type: String, flags: MountFlags, data: String?
    ) throws(SystemError) {
        try valueOrErrno("mount", path: target) {
            guard let data else { return Glibc.mount(source, target, type, flags.rawValue, nil) }
            return data.withCString { Glibc.mount(source, target, type, flags.rawValue, $0) }
        }
    }

    /// Takes the top mount at `target` off (`umount2`). `detaching`: at once even while
    /// something uses it (`MNT_DETACH`; the file system is released when nothing does). Not
    /// `followingLinks`: a symbolic link at `target` is not followed (`UMOUNT_NOFOLLOW`).
    static func unmount(_ target: String, detaching: Bool = false, followingLinks: Bool = true) throws(SystemError) {
        let flags = (detaching ? Int32(MNT_DETACH) : 0) | (followingLinks ? 0 : Int32(UMOUNT_NOFOLLOW))
        try valueOrErrno(detaching ? "umount2 (detach)" : "umount", path: target) { umount2(target, flags) }
    }

    /// Whether the calling thread holds `capability` (a `CAP_*` number of
    /// linux/capability.h) in its effective set; false where the kernel cannot say.
    static func hasEffectiveCapability(_ capability: Int32) -> Bool {
        ingest_has_effective_capability(capability) == 1
    }

    // MARK: The process

    /// This process's id (`getpid`).
    static var processID: Int32 { getpid() }

    /// The user whose permissions this process has (`geteuid`).
    public static var effectiveUserID: UInt32 { geteuid() }

    /// The home directory of this process's real user, from the password database
    /// (`getpwuid(getuid())`); nil when it has none.
    static var homeDirectory: String? {
        guard let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir else { return nil }
        let home = String(cString: directory)
        return home.isEmpty ? nil : home
    }

    /// The machine's host name (`gethostname`); nil when it cannot be read.
    static var hostName: String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether the process `pid` exists, as `kill(pid, 0)` tells: it does when the signal
    /// could be sent, or was refused (`EPERM`: another user's process).
    static func processExists(_ pid: Int32) -> Bool {
        Glibc.kill(pid, 0) == 0 || Errno.current == .notPermitted
    }

    /// Names the calling thread for the kernel (`pthread_setname_np`), as `top -H`, `ps -L`
    /// and `perf` show it: at most 15 bytes, or the name is left as it was.
    static func nameThisThread(_ name: String) { _ = ingest_name_this_thread(name) }

    /// The signals a run turns from deaths into requests to stop (``ShutdownSignals``).
    static let terminationSignals: [Int32] = [SIGTERM, SIGINT]

    /// Runs `body` when the process calls `exit` (`atexit`): not on `_exit`, nor on death by
    /// a signal.
    static func atExit(_ body: @convention(c) () -> Void) { _ = atexit(body) }

    /// The signal's conventional name (`SIGINT`), as `kill -l` lists it; `signal N` for one
    /// a run never handles.
    public static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        case SIGKILL: "SIGKILL"
        default: "signal \(signal)"
        }
    }

    /// The signal's arrival is ignored: a dispatch source watching it then hears it instead.
    static func ignoreSignal(_ signal: Int32) { _ = Glibc.signal(signal, SIG_IGN) }

    /// Ends the process by `signal` with its default action, so that a parent (a shell,
    /// systemd) sees what it sent and not an exit status made up for it.
    static func endProcess(bySignal signal: Int32) -> Never {
        _ = Glibc.signal(signal, SIG_DFL)
        // Dispatch watches the signal with it blocked: unblocked here, or raising it would
        // only leave it pending and the process would end by the exit status below.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        _exit(128 + signal)
    }

    /// Kills this process outright (`SIGKILL`): nothing of it runs on, as when the power goes.
    static func killThisProcess() -> Never {
        raise(SIGKILL)
        _exit(128 + SIGKILL)
    }

    /// Whether the descriptor `fd` is a terminal (`isatty`).
    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// The width of the terminal `fd` is (`TIOCGWINSZ`); nil when it is no terminal.
    static func terminalColumns(_ fd: Int32) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    // MARK: The calendar

    /// The UTC calendar fields of `seconds` since the epoch (`gmtime_r`).
    static func universalTime(_ seconds: Int64) -> CalendarTime {
        var time = time_t(seconds)
        var fields = CalendarTime()
        gmtime_r(&time, &fields)
        return fields
    }

    /// Seconds since the epoch of UTC calendar fields (`timegm`), normalising any out of range.
    static func seconds(universal fields: CalendarTime) -> Int64 {
        var fields = fields
        return Int64(timegm(&fields))
    }
}

/// What `stat(2)` and its kin say of a file (`struct stat`); its type in words is
/// ``FileStatus/type``.
typealias FileStatus = Glibc.stat

/// What `statvfs(3)` says of a file system (`struct statvfs`).
typealias FileSystemStatus = Glibc.statvfs

/// A date and time in calendar fields (`struct tm`): years since 1900, months from 0.
typealias CalendarTime = Glibc.tm

extension FileStatus {
    /// The file's type, from its mode.
    var type: FileType { FileType(mode: st_mode) }
    var isRegularFile: Bool { type == .regular }
    var isDirectory: Bool { type == .directory }
    var isSymlink: Bool { type == .symbolicLink }
    /// Modification time in nanoseconds since the epoch, held at `Int64.max` (or `.min`)
    /// beyond what 64 bits of nanoseconds hold (after 2262-04-11, before 1677-09-21): the
    /// time is the card's to say, and ext4 holds dates up to 2446.
    var mtimeNanoseconds: Int64 { nanosecondsSinceEpoch(seconds: Int64(st_mtim.tv_sec), nanoseconds: Int64(st_mtim.tv_nsec)) }

    /// `/dev/null` by its numbers (character device 1, 3), under whatever name.
    var isDevNull: Bool { type == .characterDevice && st_rdev == Self.devNullNumber }

    /// `makedev(1, 3)`.
    private static let devNullNumber: dev_t = (1 << 8) | 3
}

extension FileType {
    /// The type `st_mode` holds (`S_IFMT`'s bits).
    init(mode: mode_t) {
        self =
            switch mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFLNK: .symbolicLink
            case S_IFIFO: .fifo
            case S_IFCHR: .characterDevice
            case S_IFBLK: .blockDevice
            case S_IFSOCK: .socket
            default: .unknown
            }
    }
}
