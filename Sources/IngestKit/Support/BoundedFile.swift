/// A small file that tells ingest what to do, read whole, within a bound, and only if it is
/// a regular file: the configuration, AWS's shared credentials and config files, a card's
/// scene file.
///
/// Whatever names such a file (a flag, a variable, a card) may name something else. A FIFO
/// blocks `open(2)` until a writer comes, which may be never; `/dev/zero` or `/dev/urandom`
/// never end, and a loop that reads them to their end fills the memory; a directory or a
/// socket holds no text. Each is refused before a byte of it is read:
/// - the path is looked at first (`fstatat`, not following a symbolic link where links are
///   refused), so that a device node is never opened at all (opening one can do something:
///   a tape rewinds, a modem's line rises);
/// - it is then opened with `O_NONBLOCK` (a FIFO put in its place meanwhile cannot block the
///   open), `O_NOCTTY`, and `O_NOFOLLOW` where links are refused;
/// - the open descriptor must be a regular file (`fstat`);
/// - at most `limit` + 1 bytes are read, whatever its size says: one more than allowed tells
///   a file at the limit from a longer one, and `st_size` is not trusted (a file can grow
///   after `fstat`, or a broken file system can lie).
///
/// Where links are followed (files the operator names), `/dev/null` reads as an empty file:
/// it is how one tells a tool that there is no such file, and it has nothing to read.
struct BoundedFile {
    /// The most read of a file that configures ingest: 1 MiB, hundreds of times what one holds.
    static let defaultLimit = 1 << 20

    /// Whether a symbolic link at the path is followed.
    enum Links: Sendable {
        /// Follow it: a file the operator names (a configuration may well be a link).
        case follow
        /// Refuse it: a file of a card, which must be read from the card itself.
        case refuse
    }

    /// Why a file was not read. ``description`` says what the file is ("is a FIFO (named
    /// pipe), not a regular file"); each caller adds the file's name and its own fix.
    enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// A symbolic link, where links are refused.
        case symbolicLink
        /// Not a regular file, but of `type`.
        case notRegular(type: FileType)
        /// Longer than `limit` bytes.
        case tooLarge(limit: Int)
        /// Looking at it, opening it or reading it failed (permission denied, an I/O error).
        case failed(SystemError)

        var description: String {
            switch self {
            case .symbolicLink: "is a symbolic link"
            case .notRegular(let type): "is \(type.described), not a regular file"
            case .tooLarge(let limit): "is larger than \(Self.size(limit)), the most read of it"
            case .failed(let error):
                switch error.call {
                case "open": "cannot be opened (\(error.reason))"
                case "read": "cannot be read (\(error.reason))"
                default: "cannot be examined (\(error.reason))"
                }
            }
        }

        private static func size(_ bytes: Int) -> String {
            bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : bytes % 1024 == 0 ? "\(bytes >> 10) KiB" : "\(bytes) bytes"
        }
    }

    /// What the file holds.
    let bytes: [UInt8]
    /// What `fstat` said of the open file (its owner and mode, for the checks of trust); nil
    /// for `/dev/null`, which is no one's file.
    let status: FileStatus?

    /// Reads the file at `path` (relative to `directory`, if given); nil when there is
    /// nothing there (`ENOENT`, or `ENOTDIR`: a file where a directory of the path should be).
    ///
    /// This blocks on the file's disk: call it from a thread that may block.
    static func read(
        _ path: String, in directory: FileDescriptor? = nil, links: Links, limit: Int = defaultLimit
    ) throws(Problem) -> BoundedFile? {
        let seen: FileStatus
        do { seen = try System.status(path, in: directory, followingLinks: links == .follow) } catch {
            if error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory { return nil }
            throw .failed(error)
        }
        if links == .follow, seen.isDevNull { return BoundedFile(bytes: [], status: nil) }
        try refuseUnlessRegular(seen)

        var flags: FileDescriptor.Flags = [.readOnly, .nonBlocking, .noControllingTerminal]
        if links == .refuse { flags.insert(.noFollow) }
        let file: FileDescriptor
        do { file = try FileDescriptor(at: directory, path: path, flags: flags) } catch {
            switch error.errno {
            case .noSuchFileOrDirectory, .notDirectory: return nil  // gone since the look: there is none now
            case .tooManySymbolicLinkLevels where links == .refuse: throw .symbolicLink  // a link put in its place
            default: throw .failed(error)
            }
        }
        let opened: FileStatus
        do { opened = try file.stat() } catch { throw .failed(error) }
        try refuseUnlessRegular(opened)

        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: limit + 1, alignment: 1)
        defer { buffer.deallocate() }
        let count: Int
        do { count = try file.read(into: buffer, path: path) } catch { throw .failed(error) }
        guard count <= limit else { throw .tooLarge(limit: limit) }
        return BoundedFile(bytes: Array(buffer[..<count]), status: opened)
    }

    private static func refuseUnlessRegular(_ status: FileStatus) throws(Problem) {
        switch status.type {
        case .regular: return
        case .symbolicLink: throw .symbolicLink
        case let type: throw .notRegular(type: type)
        }
    }
}
