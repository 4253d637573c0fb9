// What ingest builds from the calls of this folder for whole files and paths: `mkdir -p`,
// reading a kernel's text file, and whether a file that configures ingest can be trusted.

/// `mkdir -p` with mode 0750 for what it creates; the error names the call and the path.
func makeDirectories(_ path: String) throws(SystemError) {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
        do { try System.makeDirectory(prefix, mode: 0o750) } catch where error.errno == .fileExists {}
    }
    guard (try? System.status(path))?.isDirectory == true else {
        throw SystemError(call: "mkdir", errno: .notDirectory, path: path)
    }
}

/// Reads a whole file of the kernel's (`/proc`, `/sys`: they report no size) as UTF-8 text,
/// without bound. What configures ingest, which anyone may point at a FIFO or `/dev/zero`, is
/// read with ``BoundedFile`` instead.
func readTextFile(_ path: String) throws(SystemError) -> String {
    try readTextFile(FileDescriptor(path: path, flags: .readOnly), path: path)
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
func untrustedReason(_ info: FileStatus, euid: UInt32 = System.effectiveUserID) -> String? {
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
