import Glibc

/// An open directory's listing, read an entry at a time (`fdopendir`/`opendir`, `readdir`):
/// the one place a `DIR *` is held.
///
/// A class because it owns the `DIR *` (and the descriptor inside it), closed once, when the
/// last reference goes. One thread at a time.
final class DirectoryReader {
    private let stream: OpaquePointer
    /// The directory's descriptor, for calls relative to it (``FileDescriptor/init(at:path:flags:mode:described:)``,
    /// ``MountIdentity/lstat(_:inDirectory:path:)``). It stays the reader's: it closes with it.
    let descriptor: FileDescriptor

    /// Takes ownership of `descriptor`, an open directory: it is closed with the reader, or
    /// at once if the reader cannot be made.
    init(adopting descriptor: FileDescriptor) throws(SystemError) {
        guard let stream = fdopendir(descriptor.raw) else { throw .last("opendir") }
        descriptor.handOver()
        self.stream = stream
        self.descriptor = descriptor
    }

    /// Opens the directory at `path`.
    init(path: String) throws(SystemError) {
        guard let stream = opendir(path) else { throw .last("opendir", path: path) }
        self.stream = stream
        descriptor = FileDescriptor(borrowing: dirfd(stream))
    }

    deinit { closedir(stream) }

    /// Calls `body` with the next entry's name (its bytes, without the NUL) and its type as
    /// the directory tells it (nil where the file system does not), and returns what it
    /// returns; nil at the end of the listing. `.` and `..` are entries like any other.
    func nextEntry<Value>(_ body: (_ name: UnsafeRawBufferPointer, _ type: FileType?) -> Value) throws(SystemError) -> Value? {
        Errno.current = .success
        guard let entry = readdir(stream) else {
            if Errno.current != .success { throw .last("readdir") }
            return nil
        }
        let type: FileType? =
            switch Int(entry.pointee.d_type) {
            case Int(DT_REG): .regular
            case Int(DT_DIR): .directory
            case Int(DT_LNK): .symbolicLink
            case Int(DT_FIFO): .fifo
            case Int(DT_CHR): .characterDevice
            case Int(DT_BLK): .blockDevice
            case Int(DT_SOCK): .socket
            default: nil
            }
        return withUnsafeBytes(of: entry.pointee.d_name) { raw in
            body(UnsafeRawBufferPointer(rebasing: raw.prefix { $0 != 0 }), type)
        }
    }

    /// Starts the listing over from its first entry (`rewinddir`).
    func rewind() { rewinddir(stream) }
}
