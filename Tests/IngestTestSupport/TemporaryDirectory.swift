import Foundation
import Glibc
import Testing

/// Loop devices, mounts and udev need root. CI runs as root, so there these tests always
/// run (and fail loudly if root is missing); elsewhere they are skipped without it.
public let needsRoot = Testing.ConditionTrait.enabled(
    if: geteuid() == 0 || ProcessInfo.processInfo.environment["CI"] != nil,
    "needs root: loop devices, mounts and udev (CI runs as root)")

/// A fresh directory under the system's temporary directory, removed when dropped.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ label: String = #function) {
        let template = NSTemporaryDirectory() + "ingest-test-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard mkdtemp(&bytes) != nil else { fatalError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        path = String(decoding: bytes.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `contents` at `relative` (creating folders) and returns the absolute path.
    @discardableResult
    public func write(_ relative: String, _ contents: [UInt8]) throws -> String {
        let full = path + "/" + relative
        try FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Self.create(Array(full.utf8), contents)
        return full
    }

    /// Creates (or truncates) the file at `path` (raw bytes) with `contents`. Close-on-exec
    /// from the start: a process another test spawns meanwhile must not inherit the open
    /// file, or a script written here fails to run with ETXTBSY ("Text file busy").
    private static func create(_ path: [UInt8], _ contents: [UInt8]) throws {
        let fd = (path + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        }
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var written = 0
        while written < contents.count {
            let n = contents.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            guard n > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            written += n
        }
    }

    /// Writes a file whose name is raw bytes (not necessarily UTF-8) into `directory`.
    public func write(rawName: [UInt8], in directory: String = "", _ contents: [UInt8]) throws {
        let dir = directory.isEmpty ? path : path + "/" + directory
        try Self.create(Array(dir.utf8) + [UInt8(ascii: "/")] + rawName, contents)
    }
}

/// Random bytes, different every call: read from `/dev/urandom` in bulk (one draw per
/// byte, as `UInt8.random` makes, cost about 0.7 s per MB here).
public func randomBytes(_ count: Int) -> [UInt8] {
    let urandom = FileHandle(forReadingAtPath: "/dev/urandom")!
    defer { try? urandom.close() }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count { bytes += urandom.readData(ofLength: count - bytes.count) }
    return bytes
}

/// Runs a program and returns its standard output (fails the caller on a non-zero exit).
public func runTool(_ path: String, _ arguments: [String]) throws -> String {
    let result = try run(path, arguments)  // its standard error (xxh128sum's progress) is set aside
    guard result.status == 0 else {
        throw POSIXError(.EIO, userInfo: [NSLocalizedDescriptionKey: "\(path) exited \(result.status)"])
    }
    return result.stdoutText
}

/// The digest `xxh128sum` (the external oracle) prints for a file.
public func xxh128sum(_ path: String) throws -> String {
    String(try runTool("/usr/bin/xxh128sum", [path]).prefix(32))
}

/// A ramfs mounted on a fresh temporary directory (needs root, see ``needsRoot``), unmounted
/// and removed when dropped: a file system that refuses direct I/O (O_DIRECT), so code that
/// prefers it must fall back to the page cache. (tmpfs takes O_DIRECT since Linux 6.6.)
public final class RamfsDirectory: @unchecked Sendable {
    /// The mount point; valid while this object lives.
    public let directory: TemporaryDirectory
    public var path: String { directory.path }

    public init() throws {
        directory = TemporaryDirectory()
        guard mount("ramfs", directory.path, "ramfs", 0, nil) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    deinit { umount2(directory.path, 2 /* MNT_DETACH */) }
}
