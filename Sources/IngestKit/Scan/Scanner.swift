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
    /// Another mount is here (another file system, or a bind mount of this one); only the
    /// card root's own mount is ingested.
    case otherFileSystem
    /// A directory that is its own ancestor (a bind mount loop).
    case directoryCycle
    /// A directory more levels below the card's root than the scanner enters
    /// (``Scanner/maxDepth``): a tree that deep is crafted, not written by a camera.
    case tooDeep(limit: Int)
    /// A directory that cannot be listed.
    case unreadable(SystemError)

    public var description: String {
        switch self {
        case .litter: "operating-system litter"
        case .excluded(let pattern): pattern.map { "excluded by pattern '\($0)'" } ?? "not matched by any include pattern"
        case .symlink: "symbolic link (not followed)"
        case .special(let kind): "\(kind) (no content to copy)"
        case .otherFileSystem: "another mount is here (another file system, or a bind mount): not entered"
        case .directoryCycle: "directory loop"
        case .tooDeep(let limit): "its contents are more than \(limit) levels deep (not entered)"
        case .unreadable(let error): "cannot be read: \(error.reason)"
        }
    }

    /// Content of the card that is not ingested, and not by the user's choice: a folder too
    /// deep to enter, or one that cannot be read, may hold files. The run fails (exit 1)
    /// and the card is not safe to erase. Links, special files and other mounts hold no
    /// content of the card; litter and exclusions are the rules'.
    public var losesContent: Bool {
        switch self {
        case .tooDeep, .unreadable: true
        default: false
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
        case .tooDeep: "too-deep"
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
///
/// A card chooses the shape of its tree, so the walk is bounded whatever it is: a directory
/// is read a chunk of names at a time (``DirectoryStream``: a directory larger than a chunk
/// is visited in byte order within each chunk, chunks in the order the file system lists
/// them), the walk keeps its own stack instead of recursing, and directories more than
/// ``maxDepth`` levels below the root are reported (``SkipReason/tooDeep(limit:)``), not
/// entered. Memory is then at most one chunk and one descriptor per level, and each path
/// at most ``maxDepth`` names long.
public struct Scanner: Sendable {
    public var rules: ScanRules
    /// The deepest level whose entries are visited: the root's entries are level 1. A
    /// directory at this level is not entered.
    public var maxDepth: Int

    /// Far deeper than cameras, drones and recorders write (`PRIVATE/AVCHD/BDMV/STREAM` is
    /// four levels), and deep enough for copied trees; at most 64 descriptors and 64 chunks
    /// of names (about 40 MB at worst) are held at once.
    public static let defaultMaxDepth = 64

    public init(rules: ScanRules = ScanRules(), maxDepth: Int = Scanner.defaultMaxDepth) {
        self.rules = rules
        self.maxDepth = maxDepth
    }

    /// Scans the tree under `root` and calls `visit` for each file and each skipped entry,
    /// until `stop` says to end early (asked before each entry).
    public func scan(root: String, until stop: () -> Bool = { false }, visit: (ScanFinding) -> Void) throws(IngestError) {
        let rootStream: DirectoryStream
        let rootStat: FileStatus
        let rootMount: MountIdentity
        do {
            rootStream = try DirectoryStream(adopting: FileDescriptor(path: root, flags: [.readOnly, .directory]))
            rootStat = try rootStream.descriptor.stat()
            rootMount = try MountIdentity.of([0], inDirectory: rootStream.descriptor, path: root)
        } catch {
            throw .sourceUnavailable(path: root, reason: error.reason)
        }
        withoutActuallyEscaping(visit) { visit in
            var walk = Walk(rules: rules, maxDepth: maxDepth, mount: rootMount, visit: visit)
            walk.run(from: rootStream, stat: rootStat, until: stop)
        }
    }
}

/// A device and inode: what tells a directory from its ancestors.
private struct FileIdentity: Hashable {
    let device: UInt64
    let inode: UInt64
    init(_ st: FileStatus) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}

/// One walk of a tree, depth first, with an explicit stack: however deep the card, the
/// thread's stack holds one frame of this.
private struct Walk {
    /// A directory being listed.
    struct Level {
        let directory: DirectoryStream
        let identity: FileIdentity
        /// How many bytes of ``Walk/path`` are this directory's own path.
        let pathLength: Int
        var chunk = NameChunk()
        var next = 0
    }

    let rules: ScanRules
    let maxDepth: Int
    /// The root's mount: nothing on another is entered or listed, a bind mount of the
    /// card's own file system included (same device, another mount id).
    let mount: MountIdentity
    let visit: (ScanFinding) -> Void
    /// The directories from the root down to the one being listed.
    var levels: [Level] = []
    /// The identities of ``levels``, to recognize a directory that is its own ancestor.
    var ancestors: Set<FileIdentity> = []
    /// The path of the entry at hand: one buffer shared by every level, so the paths of the
    /// directories above cost their length once, not once per level.
    var path: [UInt8] = []

    init(rules: ScanRules, maxDepth: Int, mount: MountIdentity, visit: @escaping (ScanFinding) -> Void) {
        self.rules = rules
        self.maxDepth = maxDepth
        self.mount = mount
        self.visit = visit
    }

    mutating func run(from root: DirectoryStream, stat rootStat: FileStatus, until stop: () -> Bool) {
        push(root, stat: rootStat)
        while !levels.isEmpty, !stop() {
            guard let name = nextName() else {
                ancestors.remove(levels.removeLast().identity)
                continue
            }
            let level = levels[levels.count - 1]
            path.removeSubrange(level.pathLength...)
            if !path.isEmpty { path.append(UInt8(ascii: "/")) }
            path.append(contentsOf: name)
            examine(name, in: level)
        }
    }

    /// The next name of the deepest directory, reading its next chunk when one is used up;
    /// nil at the end of its listing, or when it cannot be read (which is then reported).
    private mutating func nextName() -> ArraySlice<UInt8>? {
        let top = levels.count - 1
        if levels[top].next == levels[top].chunk.count {
            do { levels[top].chunk = try levels[top].directory.nextChunk() } catch {
                let directory = CardPath(bytes: Array(path.prefix(levels[top].pathLength)))
                visit(.skipped(directory, .unreadable(error)))
                return nil
            }
            levels[top].next = 0
            if levels[top].chunk.isEmpty { return nil }
        }
        defer { levels[top].next += 1 }
        return levels[top].chunk[levels[top].next]
    }

    /// Reports the entry at ``path`` or, for a directory to enter, pushes it.
    private mutating func examine(_ name: ArraySlice<UInt8>, in level: Level) {
        let path = CardPath(bytes: self.path)
        let st: FileStatus, entryMount: MountIdentity
        do {
            (st, entryMount) = try MountIdentity.lstat(CardPath(bytes: Array(name)).cString, inDirectory: level.directory.descriptor, path: nil)
        } catch {
            // Gone between listing and stat (the card is being written or was pulled).
            if error.errno != .noSuchFileOrDirectory {
                visit(.skipped(path, .unreadable(SystemError(call: "stat", errno: error.errno, path: path.display))))
            }
            return
        }
        switch st.type {
        case .directory:
            if let reason = rules.skipReason(for: path, isDirectory: true) {
                visit(.skipped(path, reason))
            } else if !entryMount.isSameMount(as: mount) {
                visit(.skipped(path, .otherFileSystem))
            } else if ancestors.contains(FileIdentity(st)) {
                visit(.skipped(path, .directoryCycle))
            } else if levels.count >= maxDepth {
                visit(.skipped(path, .tooDeep(limit: maxDepth)))
            } else {
                enter(name, of: level, at: path, stat: st)
            }
        case .regular:
            if let reason = rules.skipReason(for: path, isDirectory: false) {
                visit(.skipped(path, reason))
            } else if !entryMount.isSameMount(as: mount) {
                visit(.skipped(path, .otherFileSystem))  // a file bind-mounted over a card file
            } else {
                visit(.file(ScannedFile(path: path, size: Int64(st.st_size), mtime: st.mtimeNanoseconds, inode: UInt64(st.st_ino))))
            }
        case .symbolicLink:
            visit(.skipped(path, rules.skipReason(for: path, isDirectory: false) ?? .symlink))
        default:
            visit(.skipped(path, rules.skipReason(for: path, isDirectory: false) ?? .special(kind: Scanner.kindName(st.type))))
        }
    }

    /// Opens the directory `name` relative to its parent, never through a symlink.
    private mutating func enter(_ name: ArraySlice<UInt8>, of parent: Level, at path: CardPath, stat st: FileStatus) {
        let child: DirectoryStream
        do {
            let cName = CardPath(bytes: Array(name)).cString
            let descriptor = try FileDescriptor(
                at: parent.directory.descriptor, path: cName, flags: [.readOnly, .directory, .noFollow], described: path.display)
            child = try DirectoryStream(adopting: descriptor)
        } catch {
            visit(.skipped(path, .unreadable(SystemError(call: error.call, errno: error.errno, path: path.display))))
            return
        }
        push(child, stat: st)
    }

    private mutating func push(_ directory: DirectoryStream, stat st: FileStatus) {
        let identity = FileIdentity(st)
        ancestors.insert(identity)
        levels.append(Level(directory: directory, identity: identity, pathLength: path.count))
    }
}

extension Scanner {
    fileprivate static func kindName(_ type: FileType) -> String {
        switch type {
        case .fifo: "FIFO"
        case .socket: "socket"
        case .characterDevice: "character device"
        case .blockDevice: "block device"
        default: "special file"
        }
    }
}
