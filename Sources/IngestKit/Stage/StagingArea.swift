import Foundation
import Synchronization

/// The managed directory that holds staged copies, each named by its fingerprint.
///
/// ```
/// staging/
///   3f/3f2a…e1       a complete, fsynced copy: its name is its XXH3-128 digest as
///                    xxh128sum prints it, under a fan-out directory of its first two digits
///   .partial/        copies being written, and spares a live process holds; never
///                    mistaken for complete ones
///   .spare/          copies let go, emptied but for small ones, for new copies to be written into
///   .freeing/        large copies let go, being deleted by a process of their own
/// ```
/// A copy enters its final place only by `link(2)` after it is on disk, so whatever has a
/// fingerprint name is complete, and two processes staging the same content cannot clash.
///
/// A copy let go after its upload (``retire(_:size:)``) leaves its name and is kept as a
/// spare (held by this process under a partial name, or in `.spare/`), and the next copy is
/// written into it (``createPartial()``), in this run or a later one: a card of small files
/// stages without allocating, or freeing, an inode a file.
/// On an ext4 without a journal, allocating one skips, one by one, every inode freed in the
/// last minutes: a card of small files after another spent a large share of its CPU time
/// there. A copy of ``smallCopyLimit`` (64 KiB) or less keeps its blocks too, and the next
/// copy is written over them and cut to its own length: freeing a small copy's blocks, and
/// allocating the next one's, was a visible share of such a card's CPU time (on a file
/// system mounted `discard`, every free also waits for the disk). A larger copy is emptied. At most
/// ``spareLimit`` spares are kept, so they hold at most 1.2 GiB, which the stager gives back
/// (``emptySpares()``) before it ever reports the staging disk full.
///
/// A large copy let go is not kept: freeing its blocks holds the caller in the kernel for as
/// long as the file system takes (long, for a large copy on one mounted `discard`), and a run
/// that waited for it would end that much after its last object verified. It is renamed into
/// `.freeing/` and deleted there by a process that nobody waits for.
public struct StagingArea: Sendable {
    public let root: String
    public var partialDirectory: String { root + "/.partial" }
    var freeingDirectory: String { root + "/.freeing" }
    /// Spare files kept at most, by default: a card of up to this many files, after the
    /// first card, stages without allocating an inode.
    public static let spareLimit = 20_000
    /// Spares a process holds under partial names at most, by default (``SpareFiles``): a run
    /// lets copies go about as fast as it makes new ones, and what it holds when its uploads
    /// end goes to `.spare/` then.
    public static let heldSpareLimit = 256
    /// The size from which a copy let go is deleted apart rather than kept as a spare, by default.
    public static let freedApartFrom: Int64 = 64 << 20
    /// Shared by the copies of this value: the stager and the uploads that let copies go.
    let spares: SpareFiles
    let freedApartFrom: Int64

    /// Opens (creating if needed) the staging area at `root`, keeping up to `spareLimit`
    /// spare files in `.spare/` and `heldSpareLimit` under partial names, and deleting copies
    /// of `freedApartFrom` bytes or more apart.
    public init(
        root: String, spareLimit: Int = StagingArea.spareLimit, heldSpareLimit: Int = StagingArea.heldSpareLimit,
        freedApartFrom: Int64 = StagingArea.freedApartFrom
    ) throws(IngestError) {
        self.root = root
        self.freedApartFrom = freedApartFrom
        spares = SpareFiles(directory: root + "/.spare", limit: spareLimit, heldLimit: heldSpareLimit)
        for directory in [root, root + "/.partial", spares.directory, freeingDirectory] {
            do { try makeDirectories(directory) } catch {
                throw .stateUnusable(path: directory, reason: "cannot create it: \(error.reason)")
            }
        }
        do { try System.access(root, .write) } catch {
            throw .stateUnusable(path: root, reason: error.reason)
        }
    }

    /// Where the staged copy with this fingerprint lives.
    public func path(for fingerprint: Fingerprint) -> String {
        let hex = fingerprint.hex
        return "\(root)/\(hex.prefix(2))/\(hex)"
    }

    /// Moves a staged copy proven wrong out of the way, into `.damaged/` beside the copies
    /// (`<fingerprint>-<unix time>`): never uploaded, never deleted by ingest, so whatever it
    /// still holds stays for a person to look at. Returns where it went, nil if it could not
    /// be moved (then it is removed, so it is never mistaken for a good copy).
    static func moveAside(_ path: String) -> String? {
        let root = String(path[..<(path.range(of: "/", options: .backwards)?.lowerBound ?? path.endIndex)])
        let staging = String(root[..<(root.range(of: "/", options: .backwards)?.lowerBound ?? root.endIndex)])
        let directory = staging + "/.damaged"
        let name = String(path[(path.range(of: "/", options: .backwards)?.upperBound ?? path.startIndex)...])
        let destination = "\(directory)/\(name)-\(Int(Date().timeIntervalSince1970))"
        if (try? makeDirectories(directory)) != nil, (try? System.rename(path, to: destination)) != nil { return destination }
        try? System.unlink(path)
        return nil
    }

    /// Deletes the staged copy with this fingerprint; true when it is gone (or never was).
    public func remove(_ fingerprint: Fingerprint) -> Bool {
        System.removeIfPresent(path(for: fingerprint))
    }

    public func contains(_ fingerprint: Fingerprint) -> Bool {
        System.exists(path(for: fingerprint))
    }

    /// Bytes that can still be written to the staging file system by this user.
    public func availableBytes() throws(SystemError) -> Int64 {
        try Self.availableBytes(onFileSystemOf: root)
    }

    /// Bytes this user can still write to the file system that holds `path`: a staging area
    /// not made yet is measured at the directory that will hold it.
    public static func availableBytes(onFileSystemOf path: String) throws(SystemError) -> Int64 {
        let info = try System.fileSystemStatus(path)
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The staging file system's whole size (`f_blocks × f_frsize`): a copy larger than this,
    /// less the reserve, can never be staged, however much is freed.
    public func capacityBytes() throws(SystemError) -> Int64 {
        let info = try System.fileSystemStatus(root)
        return Int64(info.f_blocks) * Int64(info.f_frsize)
    }

    /// Creates a partial file for one copy, named after this process so that leftovers of a
    /// crashed run can be told from the copies of a live one: a spare this process holds, or
    /// else one renamed from `.spare/`, when there is one. `stale`: the bytes the file holds
    /// already (a small spare keeps its old copy's), which the copy is written over; one that
    /// ends shorter is cut to its length (``cut(_:to:stale:path:)``) before it is synced.
    func createPartial() throws(SystemError) -> (file: FileDescriptor, path: String, stale: Int64) {
        if let held = spares.takeHeld() {
            if let (fd, stale) = Self.openSpare(held) { return (fd, held, stale) }
            try? System.unlink(held)
        }
        let name = "\(partialDirectory)/\(UniqueName.next()).partial"
        while let spare = spares.take() {
            // Taken by another process meanwhile, or removed by a person: the next one.
            guard (try? System.rename(spare, to: name)) != nil else { continue }
            if let (fd, stale) = Self.openSpare(name) { return (fd, name, stale) }
            try? System.unlink(name)
        }
        let fd = try FileDescriptor(path: name, flags: [.writeOnly, .create, .exclusive], mode: 0o640)
        return (fd, name, 0)
    }

    /// The spare at `path`, open for writing, and the bytes it holds; nil when it is
    /// anything but a file of its own (a link put there: written through, it would change
    /// another file).
    private static func openSpare(_ path: String) -> (FileDescriptor, Int64)? {
        guard let fd = try? FileDescriptor(path: path, flags: [.writeOnly, .noFollow, .nonBlocking]),
            let status = try? fd.stat(), status.isRegularFile, status.st_nlink == 1
        else { return nil }
        return (fd, Int64(status.st_size))
    }

    /// Cuts a copy of `length` bytes written into a file that held `stale` bytes to its length.
    static func cut(_ file: FileDescriptor, to length: Int64, stale: Int64, path: String) throws(SystemError) {
        guard stale > length else { return }
        try file.truncate(to: length, path: path)
    }

    /// Empties every spare file, giving their blocks back to the file system: before the
    /// stager reports the staging disk full. Returns how many spares held bytes.
    @discardableResult
    public func emptySpares() -> Int {
        var emptied = 0
        spares.forEachSpare { path in
            if let (fd, size) = Self.openSpare(path), size > 0, (try? fd.truncate(to: 0)) != nil { emptied += 1 }
        }
        return emptied
    }

    /// Lets the staged copy of `fingerprint`, of `size` bytes, go: off its name at once
    /// (renamed: no content address is ever seen empty), then kept as a spare file, whole if
    /// it is ``smallCopyLimit`` bytes or less, else emptied; or deleted when enough are kept.
    /// True when the copy is gone from its name (or never was there). Blocks while the file
    /// system frees the copy's blocks, except for a copy of ``freedApartFrom`` bytes or more:
    /// that one is deleted apart (``freeApart(_:)``).
    public func retire(_ fingerprint: Fingerprint, size: Int64) -> Bool {
        let path = path(for: fingerprint)
        if size >= freedApartFrom { return freeApart(path) }
        let held = spares.mayHold ? "\(partialDirectory)/\(UniqueName.next()).partial" : nil
        guard let spare = held ?? spares.newName() else { return System.removeIfPresent(path) }
        guard (try? System.rename(path, to: spare)) != nil else { return System.removeIfPresent(path) }
        if size <= smallCopyLimit || (try? System.truncate(spare, to: 0)) != nil {
            if held != nil { spares.hold(spare) } else { spares.keep(spare) }
        } else {
            try? System.unlink(spare)
        }
        return true
    }

    /// Gives the spares this process holds under partial names (``SpareFiles``) back to
    /// `.spare/`, for later runs and other processes: when a run's uploads have ended.
    /// Deleted when `.spare/` holds its limit already.
    public func shelveHeldSpares() {
        while let held = spares.takeHeld() {
            if let spare = spares.newName(), (try? System.rename(held, to: spare)) != nil { spares.keep(spare) } else { try? System.unlink(held) }
        }
    }

    /// Moves the file at `path` into `.freeing/` and has a process of its own delete it there
    /// (`ingest_unlink_detached`): this process goes on, and may exit, while the file system
    /// frees the blocks. Deleted here when that process cannot be started. A kill before
    /// the deletion leaves the file in `.freeing/`, for ``freeLeftovers()``. True when the
    /// file is gone from `path` (or never was there).
    private func freeApart(_ path: String) -> Bool {
        let doomed = "\(freeingDirectory)/\(UniqueName.next())"
        guard (try? System.rename(path, to: doomed)) != nil else { return System.removeIfPresent(path) }
        if (try? System.unlinkDetached(doomed)) == nil { try? System.unlink(doomed) }
        return true
    }

    /// Deletes, apart, the files left in `.freeing/` by a process killed before it could:
    /// returns how many were found.
    @discardableResult
    public func freeLeftovers() -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: freeingDirectory) else { return 0 }
        for name in names where (try? System.unlinkDetached("\(freeingDirectory)/\(name)")) == nil {
            try? System.unlink("\(freeingDirectory)/\(name)")
        }
        return names.count
    }

    /// Links a complete partial file to its content address (the partial stays; the caller
    /// removes it). Returns false when a copy with that fingerprint was already there.
    /// The partial must be on disk first, and the new name is durable only after ``sync()``.
    func link(partial: String, as fingerprint: Fingerprint) throws(SystemError) -> Bool {
        let final = path(for: fingerprint)
        // The fan-out directory is made when a link finds it missing: once per directory,
        // not a failed `mkdir` per copy.
        var attempt = 0
        while true {
            do {
                try System.link(partial, to: final)
                return true
            } catch {
                if error.errno == .fileExists { return false }
                guard error.errno == .noSuchFileOrDirectory, attempt == 0 else { throw error }
            }
            attempt += 1
            let fanOut = String(final.prefix(upTo: final.lastIndex(of: "/")!))
            do { try System.makeDirectory(fanOut, mode: 0o750) } catch where error.errno == .fileExists {}
        }
    }

    /// Makes one copy's data durable (`fdatasync`), where ``sync()`` would flush the whole
    /// file system: a lone large copy then waits for its own blocks only, not for what other
    /// programs (a second card's copies, an S3 server on the same disk) left to write.
    func sync(copy: FileDescriptor, path: String) throws(SystemError) {
        try copy.syncData(path: path)
    }

    /// Makes the name of `fingerprint`'s copy durable: its fan-out directory, and the root
    /// that holds that directory, each `fsync`ed.
    func syncName(of fingerprint: Fingerprint) throws(SystemError) {
        let final = path(for: fingerprint)
        for directory in [String(final.prefix(upTo: final.lastIndex(of: "/")!)), root] {
            try FileDescriptor(path: directory, flags: [.readOnly, .directory]).sync(path: directory)
        }
    }

    /// Flushes everything written to the staging file system (`syncfs`): one call makes a
    /// whole batch of copies, or of new names, durable.
    func sync() throws(SystemError) {
        try FileDescriptor(path: root, flags: [.readOnly, .directory]).syncFileSystem(path: root)
    }

    /// Removes partial files left by processes that no longer run (a crash, a kill -9).
    @discardableResult
    public func removeAbandonedPartials() -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: partialDirectory) else { return 0 }
        var removed = 0
        for name in names where name.hasSuffix(".partial") {
            guard let pid = Int32(name.prefix { $0 != "-" }), pid != System.processID else { continue }
            if !System.processExists(pid), (try? System.unlink("\(partialDirectory)/\(name)")) != nil { removed += 1 }
        }
        return removed
    }
}

/// The names of the files a process puts in the staging area's directories (partial copies,
/// spares, copies being freed): `<pid>-<n>`, `n` counting from a random start, so unique
/// among the processes sharing the area without a system call a name. A partial's pid tells
/// a live process's copies from a dead one's (``StagingArea/removeAbandonedPartials()``).
enum UniqueName {
    private static let prefix = "\(System.processID)-"
    private static let count = Atomic<UInt64>(UInt64.random(in: 0...(UInt64.max >> 1)))

    static func next() -> String { prefix + String(count.add(1, ordering: .relaxed).newValue) }
}
