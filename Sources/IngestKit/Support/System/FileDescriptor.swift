import CSystemShims
import Glibc

/// An open file descriptor that closes itself, and the system calls made on one: every call
/// on an open file goes through its methods (the calls by path are ``System``'s), each
/// failing with a ``SystemError`` and made again when a signal interrupts it
/// (``retryingOnInterrupt(_:)``).
///
/// A class so that one descriptor can be handed from a reader thread to a writer thread
/// without being copied; each is used by one thread at a time.
final class FileDescriptor: @unchecked Sendable {
    let raw: Int32
    private var isOpen = true

    init(adopting raw: Int32) { self.raw = raw }

    /// The descriptor `raw`, which another owner closes (a ``DirectoryReader``'s).
    init(borrowing raw: Int32) {
        self.raw = raw
        isOpen = false
    }

    /// Someone else closes it from now on (`fdopendir` took it over).
    func handOver() { isOpen = false }

    /// How to open a file: `open(2)`'s flags, typed. `O_CLOEXEC` is always added.
    struct Flags: OptionSet, Sendable {
        let rawValue: Int32
        static let readOnly = Flags(rawValue: O_RDONLY)
        static let writeOnly = Flags(rawValue: O_WRONLY)
        static let readWrite = Flags(rawValue: O_RDWR)
        /// Create the file if there is none (`O_CREAT`), with the mode given.
        static let create = Flags(rawValue: O_CREAT)
        /// With ``create``: fail if something has the name already (`O_EXCL`).
        static let exclusive = Flags(rawValue: O_EXCL)
        /// Empty the file as it opens (`O_TRUNC`).
        static let truncate = Flags(rawValue: O_TRUNC)
        /// Fail unless it is a directory (`O_DIRECTORY`).
        static let directory = Flags(rawValue: O_DIRECTORY)
        /// Fail on a symbolic link as the last component (`O_NOFOLLOW`: `ELOOP`).
        static let noFollow = Flags(rawValue: O_NOFOLLOW)
        /// Never wait, at the open (a FIFO with no writer) or after (`O_NONBLOCK`).
        static let nonBlocking = Flags(rawValue: O_NONBLOCK)
        /// A terminal opened does not become the process's (`O_NOCTTY`).
        static let noControllingTerminal = Flags(rawValue: O_NOCTTY)
    }

    /// `openat(2)` of `path` relative to `directory` (or the working directory), `O_CLOEXEC`
    /// always set. Takes a C string, so a card's path need not be UTF-8 (a `String`
    /// converts on its own); errors name `described`, or the path.
    convenience init(
        at directory: FileDescriptor? = nil, path: UnsafePointer<CChar>, flags: Flags, mode: mode_t = 0,
        described: String? = nil
    ) throws(SystemError) {
        let dirfd = directory?.raw ?? AT_FDCWD
        switch retryingOnInterrupt({ openat(dirfd, path, flags.rawValue | O_CLOEXEC, mode) }) {
        case .success(let fd): self.init(adopting: fd)
        case .failure(let errno): throw SystemError(call: "open", errno: errno, path: described ?? String(cString: path))
        }
    }

    /// A new file of its own in `directory`, named `.NAME.XXXXXX` (`mkstemp`), open for
    /// reading and writing with mode 0600; and its path.
    static func temporary(in directory: String, hiding name: String) throws(SystemError) -> (FileDescriptor, String) {
        var template = Array("\(directory)/.\(name).XXXXXX".utf8CString)
        let fd = try valueOrErrno("mkstemp", path: directory) {
            template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        }
        return (FileDescriptor(adopting: fd), String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Closes now and reports the error `close` gives (for files we wrote, it matters). Not
    /// made again on `EINTR`: Linux has closed the descriptor by then, and a second `close`
    /// could close another thread's new file.
    func close() throws(SystemError) {
        guard isOpen else { return }
        isOpen = false
        if Glibc.close(raw) == -1, Errno.current != .interrupted { throw SystemError.last("close") }
    }

    deinit { if isOpen { _ = Glibc.close(raw) } }

    // MARK: Status

    func stat() throws(SystemError) -> FileStatus {
        var st = FileStatus()
        try valueOrErrno("fstat") { fstat(raw, &st) }
        return st
    }

    /// The mount this open file is reached through (`statx`, `AT_EMPTY_PATH`).
    func mount() throws(SystemError) -> MountIdentity {
        try MountIdentity.of([0], inDirectory: self, path: nil)
    }

    /// This open file's status and the mount it is reached through, in one call. `path`
    /// names it in errors.
    func statusAndMount(path: String) throws(SystemError) -> (FileStatus, MountIdentity) {
        try MountIdentity.lstat([0], inDirectory: self, path: path)
    }

    /// The mount of the entry `name` (NUL-terminated, any bytes) in this directory, a symbolic
    /// link not followed: for a mount point, the mount over it. `path` names it in errors.
    func mount(of name: [CChar], path: String) throws(SystemError) -> MountIdentity {
        try MountIdentity.of(name, inDirectory: self, path: path)
    }

    // MARK: Reading and writing

    /// One `read(2)` into `buffer`: the bytes read, 0 at the end of the file.
    func readOnce(into buffer: UnsafeMutableRawBufferPointer, path: String? = nil) throws(SystemError) -> Int {
        try valueOrErrno("read", path: path) { Glibc.read(raw, buffer.baseAddress, buffer.count) }
    }

    /// Reads until `buffer` is full or the file ends; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, path: String? = nil) throws(SystemError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = try readOnce(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), path: path)
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// One `pread(2)` into `buffer` at `offset` (the file position untouched): the bytes
    /// read, 0 at the end of the file.
    func readOnce(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) -> Int {
        try valueOrErrno("pread", path: path) { pread(raw, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Reads at `offset` (`pread`, the file position untouched) until `buffer` is full or the
    /// file ends; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) -> Int {
        var isDirect = false
        return try read(into: buffer, at: offset, isDirect: &isDirect, path: path)
    }

    /// One `write(2)` of `bytes` at the file position (a pipe's, a terminal's): the bytes written.
    func writeOnce(_ bytes: UnsafeRawBufferPointer, path: String? = nil) throws(SystemError) -> Int {
        try valueOrErrno("write", path: path) { Glibc.write(raw, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes` at the file position; a write that takes nothing ends it (an
    /// error, `EIO`).
    func write(_ bytes: UnsafeRawBufferPointer, path: String? = nil) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            let count = try writeOnce(UnsafeRawBufferPointer(rebasing: bytes[written...]), path: path)
            guard count > 0 else { throw SystemError(call: "write", errno: .ioError, path: path) }
            written += count
        }
    }

    /// One `pwrite(2)` of `bytes` at `offset` (the file position untouched): the bytes written.
    func writeOnce(_ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) -> Int {
        try valueOrErrno("write", path: path) { pwrite(raw, bytes.baseAddress, bytes.count, off_t(offset)) }
    }

    /// Writes all of `bytes` at `offset` (`pwrite`, the file position untouched).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String? = nil) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            written += try writeOnce(UnsafeRawBufferPointer(rebasing: bytes[written...]), at: offset + Int64(written), path: path)
        }
    }

    /// Cuts (or extends with zeros) the file to `length` bytes (`ftruncate`).
    func truncate(to length: Int64, path: String? = nil) throws(SystemError) {
        try valueOrErrno("ftruncate", path: path) { ftruncate(raw, off_t(length)) }
    }

    /// Reserves blocks for the file's first `length` bytes without writing them (`fallocate`
    /// mode 0): a copy that cannot fit fails here, before a byte of it is written.
    func reserve(length: Int64, path: String? = nil) throws(SystemError) {
        try valueOrErrno("fallocate", path: path) { ingest_fallocate(raw, 0, length) }
    }

    /// Gives the file the permission bits `mode` (`fchmod`).
    func changeMode(_ mode: mode_t, path: String? = nil) throws(SystemError) {
        try valueOrErrno("fchmod", path: path) { fchmod(raw, mode) }
    }

    // MARK: Durability and the page cache

    /// Makes the file's data and metadata durable (`fsync`); of a directory, its names.
    func sync(path: String? = nil) throws(SystemError) {
        try valueOrErrno("fsync", path: path) { fsync(raw) }
    }

    /// Makes the file's data durable, and the metadata needed to read it (`fdatasync`).
    func syncData(path: String? = nil) throws(SystemError) {
        try valueOrErrno("fdatasync", path: path) { fdatasync(raw) }
    }

    /// Flushes everything written to the file system that holds this file (`syncfs`).
    func syncFileSystem(path: String? = nil) throws(SystemError) {
        try valueOrErrno("syncfs", path: path) { ingest_syncfs(raw) }
    }

    /// Starts writing back a byte range without waiting (`sync_file_range` WRITE), so dirty
    /// pages never pile up behind a long copy. Advice: a failure only leaves it to the kernel.
    func startWriteback(offset: Int64, length: Int64) {
        _ = ingest_start_writeback(raw, offset, length)
    }

    /// Waits until a byte range being written back is on the device, so its pages are clean
    /// and can be dropped; false when it could not be waited for. Not a durability point.
    func waitForWriteback(offset: Int64, length: Int64) -> Bool {
        ingest_wait_writeback(raw, offset, length) == 0
    }

    /// Clean pages of this byte range leave the page cache (`POSIX_FADV_DONTNEED`); a
    /// length of 0 means to the end. Advice only: it cannot fail in a way that matters.
    func dropFromCache(offset: Int64 = 0, length: Int64 = 0) {
        _ = posix_fadvise(raw, off_t(offset), off_t(length), POSIX_FADV_DONTNEED)
    }

    /// This byte range will be read front to back (`POSIX_FADV_SEQUENTIAL`): the kernel reads
    /// further ahead. A length of 0 means to the end. Advice only.
    func adviseSequential(offset: Int64 = 0, length: Int64 = 0) {
        _ = posix_fadvise(raw, off_t(offset), off_t(length), POSIX_FADV_SEQUENTIAL)
    }

    /// Whether every page of the file's first `length` bytes is in the page cache, asked
    /// without reading a byte or waiting for I/O; false where it cannot be told. See
    /// DirectIO.swift for when this is asked.
    ///
    /// `mmap` + `mincore` + `munmap` of the range, a few microseconds a file. The
    /// alternatives: `cachestat` (Linux 6.5) is one call, but not one the services' sandbox
    /// (`@system-service` of Debian 12's systemd) allows; `preadv2(RWF_NOWAIT)` of the first
    /// chunk, on a file not cached, starts (and waits to submit) read-ahead into the page
    /// cache, the very pages a direct read then fetches again; measured on a card of small
    /// files, it was the dearest of the three, cold or warm (docs/benchmarks.md).
    func isInPageCache(firstBytes length: Int64) -> Bool {
        length > 0 && ingest_mincore_cached(raw, length) == 1
    }

    /// Turns direct I/O (`O_DIRECT`) on or off for this file, its other flags kept. Turning
    /// it on fails (`EINVAL`) where the file system has no direct I/O.
    func setDirectIO(_ on: Bool, path: String? = nil) throws(SystemError) {
        try valueOrErrno("fcntl", path: path) { ingest_set_direct_io(raw, on ? 1 : 0) }
    }

    // MARK: Locks

    /// Takes the file's exclusive `flock(2)` lock, waiting as long as it takes (`wait`), or
    /// only if no one holds it: false then.
    func lockExclusively(waiting wait: Bool, path: String? = nil) throws(SystemError) -> Bool {
        switch retryingOnInterrupt({ flock(raw, LOCK_EX | (wait ? 0 : LOCK_NB)) }) {
        case .success: return true
        case .failure(.wouldBlock) where !wait: return false
        case .failure(let errno): throw SystemError(call: "flock", errno: errno, path: path)
        }
    }

    /// Releases the file's `flock(2)` lock.
    func unlock() { _ = flock(raw, LOCK_UN) }

    /// Locks the byte at `offset` exclusively with an open-file-description lock
    /// (`F_OFD_SETLK`) if no other open file holds it; false if one does.
    func lockByte(at offset: Int64, path: String? = nil) throws(SystemError) -> Bool {
        var range = Self.byteRange(offset, type: F_WRLCK)
        switch retryingOnInterrupt({ fcntl(raw, Self.setOFDLock, &range) }) {
        case .success: return true
        case .failure(.wouldBlock), .failure(.permissionDenied): return false
        case .failure(let errno): throw SystemError(call: "fcntl(F_OFD_SETLK)", errno: errno, path: path)
        }
    }

    /// Releases this open file's lock of the byte at `offset`.
    func unlockByte(at offset: Int64) {
        var range = Self.byteRange(offset, type: F_UNLCK)
        _ = fcntl(raw, Self.setOFDLock, &range)
    }

    /// `F_OFD_SETLK` from `<bits/fcntl-linux.h>` (Linux 3.15 and later), which Glibc's
    /// Swift module leaves out: it is declared only under `_GNU_SOURCE`.
    private static let setOFDLock: Int32 = 37

    private static func byteRange(_ offset: Int64, type: Int32) -> flock {
        var range = flock()
        range.l_type = Int16(type)
        range.l_whence = Int16(SEEK_SET)
        range.l_start = off_t(offset)
        range.l_len = 1
        range.l_pid = 0  // required of OFD locks
        return range
    }
}


/// A file's first bytes mapped into memory, shared with every process that maps the same
/// file (`MAP_SHARED`): how the processes of a station share a small record
/// (``StationRateBucket``). Unmapped when dropped.
final class SharedMapping: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let length: Int

    /// Maps the first `length` bytes of `file`, which is at least that long, for reading and writing.
    init(_ file: FileDescriptor, length: Int, path: String) throws(SystemError) {
        guard let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, file.raw, 0), mapped != MAP_FAILED
        else { throw SystemError.last("mmap", path: path) }
        base = mapped
        self.length = length
    }

    deinit { munmap(base, length) }
}

extension FileDescriptor {
    /// Whether another open file holds an open-file-description lock on the byte at `offset`
    /// (`F_OFD_GETLK`); true when the kernel cannot say, so that a caller never takes a
    /// lock it cannot see for a free one.
    func byteIsLockedElsewhere(at offset: Int64) -> Bool {
        var range = flock()
        range.l_type = Int16(F_WRLCK)
        range.l_whence = Int16(SEEK_SET)
        range.l_start = off_t(offset)
        range.l_len = 1
        range.l_pid = 0  // required of OFD locks
        let getOFDLock: Int32 = 36  // F_OFD_GETLK, declared only under _GNU_SOURCE
        guard fcntl(raw, getOFDLock, &range) == 0 else { return true }
        return range.l_type != Int16(F_UNLCK)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock that every process of the machine reads alike.
func monotonicNanoseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}
