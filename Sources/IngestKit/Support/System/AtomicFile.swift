/// Files replaced whole: a reader sees the old content or the new, never half of one, and
/// after a power cut the file holds one of them.
enum AtomicFile {
    /// Writes `bytes` to `path` through a temporary file in the same directory, named
    /// `.NAME.XXXXXX` (hidden, and a name that readers matching `NAME`'s own suffix, such as
    /// node_exporter's `*.prom`, pass over): written, given `mode`, fsynced, renamed over
    /// `path`, then the directory fsynced so that the new name lasts. On failure the
    /// temporary file is removed and `path` is as it was.
    static func write(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o644) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let (file, temporary) = try FileDescriptor.temporary(in: directory, hiding: name)
        do throws(SystemError) {
            try file.changeMode(mode, path: temporary)
            try bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in try file.write(buffer, at: 0, path: temporary) }
            }.get()
            try file.sync(path: temporary)
            try file.close()
            try System.rename(temporary, to: path)
        } catch {
            try? System.unlink(temporary)
            throw error
        }
        // The new name is durable once the directory is; a failure here loses only the name.
        if let directoryFD = try? FileDescriptor(path: directory, flags: [.readOnly, .directory]) { try? directoryFD.sync() }
    }
}
