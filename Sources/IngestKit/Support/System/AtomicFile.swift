import Glibc

/// Files replaced whole: a reader sees the old content or the new, never half of one, and
/// after a power cut the file holds one of them.
enum AtomicFile {
    /// Writes `bytes` to `path` through a temporary file in the same directory, named
    /// `.NAME.XXXXXX` (hidden, and a name that readers matching `NAME`'s own suffix, such as
    /// node_exporter's `*.prom`, pass over): written, given `mode`, fsynced, renamed over
    /// `path`, then the directory fsynced so that the new name lasts. On failure the
    /// temporary file is removed and `path` is as it was.
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var template = Array("\(directory)/.\(name).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw .last("mkstemp", path: directory) }
        let temporary = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let file = FileDescriptor(adopting: fd)
        do throws(SystemError) {
            try retryingEINTR("fchmod", path: temporary) { fchmod(fd, mode) }
            try bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in try file.write(buffer, at: 0, path: temporary) }
            }.get()
            try retryingEINTR("fsync", path: temporary) { fsync(fd) }
            try file.close()
            try retryingEINTR("rename", path: path) { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        // The new name is durable once the directory is; a failure here loses only the name.
        if let directoryFD = try? FileDescriptor(path: directory, flags: O_RDONLY | O_DIRECTORY) { fsync(directoryFD.raw) }
    }
}
