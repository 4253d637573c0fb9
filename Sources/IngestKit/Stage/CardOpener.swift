/// Why a card file could not be opened beneath the card's root.
enum CardOpenError: Error, Sendable, Equatable {
    /// A folder on the file's path, or the file itself, is a symbolic link now (`at` is the
    /// link's path on the card). The scan saw none there: it was swapped in since, and is
    /// not followed, so nothing off the card can be read through it.
    case symlink(at: CardPath)
    /// A folder on the file's path, or the file itself, is on another mount than the card's
    /// root (another file system, or a bind mount of the card's own): something was mounted
    /// there since the scan (which passes over mount points), and is not entered.
    case otherFileSystem(at: CardPath)
    /// The system call on a component (or the file) failed.
    case system(SystemError)
}

/// Opens the files of a card one path component at a time, each from the descriptor of
/// the directory above it, never following a symbolic link in any component.
///
/// `openat(root, "a/b/c", O_NOFOLLOW)` guards only the last component: were `a/b` swapped
/// for a link to `/etc` between the scan and the open, a run as root would copy a host
/// file. And a path given whole is bound by PATH_MAX (4096 bytes), which a card's deep
/// tree can exceed. Here every directory is opened with `O_NOFOLLOW | O_DIRECTORY` from its
/// parent's descriptor, so neither applies.
///
/// The directories from the root down to the last file's are kept open: files come in
/// scan order, so the next file is most often in the same directory, and moving on costs
/// an open per directory entered. Work per file is bounded by its path's depth, never by
/// the number of files; one descriptor is held per level of the current directory.
///
/// Every folder and file opened must be on the root's mount (``MountIdentity``: the same
/// mount id, or where the kernel gives none the same `st_dev`): a mount made over a card
/// folder after the scan, like a link swapped in, leads off the card. That includes a bind
/// mount of the card's own file system, which keeps its device: a device check alone would
/// enter it and read whatever part of the disk it shows.
///
/// One instance per thread.
final class CardOpener {
    private let root: FileDescriptor
    /// The root's mount; nil when it cannot be read (then opens fail on their own).
    private let mount: MountIdentity?
    /// The names of the directories open now, from the root down…
    private var names: [ArraySlice<UInt8>] = []
    /// …and their descriptors: `directories[i]` is the directory `names[0...i]`.
    private var directories: [FileDescriptor] = []

    init(root: FileDescriptor) {
        self.root = root
        mount = try? root.mount()
    }

    /// Opens the file at `path` (relative to the root) with `flags`, plus `O_NOFOLLOW` and
    /// `O_CLOEXEC`, and returns it with its status as of the open: read in the same call as
    /// its mount, so a reader needs no `fstat` of its own before it starts.
    func open(_ path: CardPath, flags: FileDescriptor.Flags) throws(CardOpenError) -> (file: FileDescriptor, status: FileStatus) {
        let components = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        // A card path names what the scan found: never `.` or `..`, which lead elsewhere.
        let dot = UInt8(ascii: ".")
        guard let name = components.last, !components.contains(where: { $0.elementsEqual([dot]) || $0.elementsEqual([dot, dot]) })
        else {
            throw .system(SystemError(call: "open", errno: .invalidArgument, path: path.display))
        }
        let folders = components.dropLast()
        // Keep the directories this file shares with the last one; close the others.
        var shared = 0
        while shared < names.count, shared < folders.count, names[shared] == folders[folders.startIndex + shared] {
            shared += 1
        }
        names.removeSubrange(shared...)
        directories.removeSubrange(shared...)
        for folder in folders.dropFirst(shared) {
            let parent = directories.last ?? root
            let (directory, _) = try openComponent(
                folder, in: parent, flags: [.readOnly, .directory, .noFollow], path: path, components: components,
                depth: names.count + 1)
            names.append(folder)
            directories.append(directory)
        }
        return try openComponent(
            name, in: directories.last ?? root, flags: flags.union(.noFollow), path: path, components: components,
            depth: components.count)
    }

    /// Closes every directory held open.
    func reset() {
        names.removeAll()
        directories.removeAll()
    }

    /// Opens `name`, component number `depth` (1-based) of `path`, in `parent`; returns it
    /// with its status.
    private func openComponent(
        _ name: ArraySlice<UInt8>, in parent: FileDescriptor, flags: FileDescriptor.Flags, path: CardPath,
        components: [ArraySlice<UInt8>], depth: Int
    ) throws(CardOpenError) -> (FileDescriptor, FileStatus) {
        let cName = name.map { CChar(bitPattern: $0) } + [0]
        let opened: FileDescriptor
        do { opened = try FileDescriptor(at: parent, path: cName, flags: flags, described: path.display) } catch {
            // O_NOFOLLOW refuses a link with ELOOP, or with ENOTDIR along with O_DIRECTORY
            // (which a plain file in a folder's place gives too): look at what is there.
            if error.errno == .tooManySymbolicLinkLevels || error.errno == .notDirectory,
                (try? System.status(cName, in: parent, followingLinks: false))?.isSymlink == true
            {
                let link = components.prefix(depth).joined(separator: [UInt8(ascii: "/")])
                throw .symlink(at: CardPath(bytes: Array(link)))
            }
            throw .system(error)
        }
        let (status, openedMount): (FileStatus, MountIdentity)
        do { (status, openedMount) = try opened.statusAndMount(path: path.display) } catch { throw .system(error) }
        if let mount, !openedMount.isSameMount(as: mount) {
            let place = components.prefix(depth).joined(separator: [UInt8(ascii: "/")])
            throw .otherFileSystem(at: CardPath(bytes: Array(place)))
        }
        return (opened, status)
    }
}
