import Glibc

/// A regular file found on the card, as `lstat` saw it.
public struct ScannedFile: Sendable, Equatable {
    public var path: CardPath
    public var size: Int64
    /// Modification time, nanoseconds since the epoch.
    public var mtime: Int64
    /// The inode the scan saw at `path`, on the card's file system; nil when the file comes
    /// from the journal rather than a scan. The copy is made only of this inode: another
    /// file moved into its place since the scan is left for the next run's scan to see.
    public var inode: UInt64?

    public init(path: CardPath, size: Int64, mtime: Int64, inode: UInt64? = nil) {
        self.path = path
        self.size = size
        self.mtime = mtime
        self.inode = inode
    }
}

/// Why the scanner passed over something. None of these stops a scan.
public enum SkipReason: Sendable, Equatable, CustomStringConvertible {
    /// Operating-system litter such as `.Trashes` or `._IMG_0001.JPG`: never content.
    case litter
    /// Left out by an include or exclude pattern of the configuration.
    case excluded(pattern: String?)
    /// A symbolic link: never followed, so links and link loops cannot lead off the card.
    case symlink
    /// A FIFO, socket or device node: it has no content to copy.
    case special(kind: String)
    /// Another file system is mounted here; only the card's own is ingested.
    case otherFileSystem
    /// A directory that is its own ancestor (a bind mount loop).
    case directoryCycle
    /// A directory that cannot be listed.
    case unreadable(SystemError)

    public var description: String {
        switch self {
        case .litter: "operating-system litter"
        case .excluded(let pattern): pattern.map { "excluded by pattern '\($0)'" } ?? "not matched by any include pattern"
        case .symlink: "symbolic link (not followed)"
        case .special(let kind): "\(kind) (no content to copy)"
        case .otherFileSystem: "another file system is mounted here"
        case .directoryCycle: "directory loop"
        case .unreadable(let error): "cannot be read: \(error.reason)"
        }
    }

    /// Worth telling a person about (litter and exclusions are expected and only counted).
    public var isNotable: Bool {
        switch self {
        case .litter, .excluded: false
        default: true
        }
    }

    /// A short stable word for `--json`.
    public var code: String {
        switch self {
        case .litter: "litter"
        case .excluded: "excluded"
        case .symlink: "symlink"
        case .special: "special-file"
        case .otherFileSystem: "other-file-system"
        case .directoryCycle: "directory-loop"
        case .unreadable: "unreadable"
        }
    }
}

/// Include and exclude patterns plus the litter every card carries.
public struct ScanRules: Sendable, Equatable {
    public var include: [Glob]
    public var exclude: [Glob]

    public init(include: [Glob] = [], exclude: [Glob] = []) {
        self.include = include
        self.exclude = exclude
    }

    /// Names that operating systems leave on removable media (plus ext4's `lost+found`).
    static let litterNames: Set<[UInt8]> = Set(
        ["System Volume Information", ".Trashes", ".Spotlight-V100", ".fseventsd", "$RECYCLE.BIN",
         ".TemporaryItems", ".DS_Store", "lost+found"].map { Array($0.utf8) })

    static func isLitter(_ name: ArraySlice<UInt8>) -> Bool {
        litterNames.contains(Array(name)) || name.starts(with: Array("._".utf8))
    }

    /// Why a file or directory at `path` is left out, or nil to keep it.
    func skipReason(for path: CardPath, isDirectory: Bool) -> SkipReason? {
        if Self.isLitter(path.name) { return .litter }
        if let rule = exclude.first(where: { $0.matches(path) }) { return .excluded(pattern: rule.pattern) }
        if !isDirectory, !include.isEmpty, !include.contains(where: { $0.matches(path) }) {
            return .excluded(pattern: nil)
        }
        return nil
    }
}

/// One thing the scanner found.
public enum ScanFinding: Sendable, Equatable {
    case file(ScannedFile)
    case skipped(CardPath, SkipReason)
}

/// Walks a card's tree with `lstat` only: it opens directories, never files, so a rescan of a
/// card the journal already knows reads nothing but metadata.
///
/// Symlinks are reported, never followed; other file systems mounted inside the card are not
/// entered; directories are visited in byte order of their names, so runs are repeatable.
public struct Scanner: Sendable {
    public var rules: ScanRules

    public init(rules: ScanRules = ScanRules()) { self.rules = rules }

    /// Scans the tree under `root` and calls `visit` for each file and each skipped entry.
    public func scan(root: String, visit: (ScanFinding) -> Void) throws(IngestError) {
        let rootDirectory: FileDescriptor
        do {
            rootDirectory = try FileDescriptor(path: root, flags: O_RDONLY | O_DIRECTORY)
        } catch {
            throw .sourceUnavailable(path: root, reason: error.reason)
        }
        let rootStat: stat
        do { rootStat = try rootDirectory.stat() } catch { throw .sourceUnavailable(path: root, reason: error.reason) }
        var ancestors: Set<FileIdentity> = [FileIdentity(rootStat)]
        walk(rootDirectory, at: CardPath(bytes: []), device: rootStat.st_dev, ancestors: &ancestors, visit: visit)
    }

    private struct FileIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
        init(_ st: stat) {
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
        }
    }

    private func walk(
        _ directory: FileDescriptor, at prefix: CardPath, device: dev_t,
        ancestors: inout Set<FileIdentity>, visit: (ScanFinding) -> Void
    ) {
        let names: [[UInt8]]
        do { names = try Self.listNames(directory) } catch {
            visit(.skipped(prefix, .unreadable(error)))
            return
        }
        for name in names {
            let path = prefix.appending(name)
            var st = stat()
            if fstatat(directory.raw, CardPath(bytes: name).cString, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                // Gone between listing and stat (the card is being written or was pulled).
                if errno != ENOENT { visit(.skipped(path, .unreadable(.last("stat", path: path.display)))) }
                continue
            }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                if let reason = rules.skipReason(for: path, isDirectory: true) {
                    visit(.skipped(path, reason))
                } else if st.st_dev != device {
                    visit(.skipped(path, .otherFileSystem))
                } else if ancestors.contains(FileIdentity(st)) {
                    visit(.skipped(path, .directoryCycle))
                } else {
                    descend(into: CardPath(bytes: name), of: directory, at: path, stat: st, ancestors: &ancestors, visit: visit)
                }
            case S_IFREG:
                if let reason = rules.skipReason(for: path, isDirectory: false) {
                    visit(.skipped(path, reason))
                } else {
                    visit(.file(ScannedFile(path: path, size: Int64(st.st_size), mtime: st.mtimeNanoseconds, inode: UInt64(st.st_ino))))
                }
            case S_IFLNK:
                visit(.skipped(path, rules.skipReason(for: path, isDirectory: false) ?? .symlink))
            default:
                visit(.skipped(path, rules.skipReason(for: path, isDirectory: false) ?? .special(kind: Self.kindName(st.st_mode))))
            }
        }
    }

    private func descend(
        into name: CardPath, of parent: FileDescriptor, at path: CardPath, stat st: stat,
        ancestors: inout Set<FileIdentity>, visit: (ScanFinding) -> Void
    ) {
        let child: FileDescriptor
        do {
            child = try FileDescriptor(at: parent, path: name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            visit(.skipped(path, .unreadable(SystemError(call: error.call, errno: error.errno, path: path.display))))
            return
        }
        let identity = FileIdentity(st)
        ancestors.insert(identity)
        walk(child, at: path, device: st.st_dev, ancestors: &ancestors, visit: visit)
        ancestors.remove(identity)
    }

    /// The names in a directory, without `.` and `..`, sorted by their bytes.
    private static func listNames(_ directory: FileDescriptor) throws(SystemError) -> [[UInt8]] {
        // fdopendir takes ownership of the descriptor it is given, so give it a duplicate.
        let fd = dup(directory.raw)
        guard fd >= 0 else { throw .last("dup") }
        guard let stream = fdopendir(fd) else {
            let error = SystemError.last("opendir")
            close(fd)
            throw error
        }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw .last("readdir") }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            names.append(name)
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    private static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "FIFO"
        case S_IFSOCK: "socket"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        default: "special file"
        }
    }
}
