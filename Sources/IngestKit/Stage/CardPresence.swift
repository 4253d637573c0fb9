/// Tells a card that is gone from a card with a bad file.
///
/// A file that cannot be read is that file's error: a bad sector, a damaged inode, a host
/// short of descriptors. The card is gone only when it is gone: its root no longer leads
/// where it led when the run began (the card was unmounted), its root directory cannot be
/// opened or read, or its block device disappeared or shrank (a pulled SD card leaves a
/// reader reporting no medium, size 0; a removed USB reader takes its device with it; ext4
/// on a vanished device fails reads with EIO or ENOMEM, so the error alone cannot say).
///
/// ``check()`` is called after a failed read or open only: a few system calls and one read
/// of a sysfs file, whatever the size of the card.
final class CardPresence: Sendable {
    private let rootPath: String
    private let root: FileDescriptor
    private let identity: (device: UInt64, inode: UInt64)
    /// `/sys/dev/block/MAJ:MIN/size` of the card's block device, and its size in 512-byte
    /// sectors when the run began; nil for a card with no block device (a plain directory,
    /// tmpfs, a network file system), which only the first checks apply to.
    private let blockDevice: (sizeFile: String, sectors: UInt64)?

    /// Notes what the card looks like now, at the start of a run: `root` is the open root
    /// directory at `rootPath`.
    init(root: FileDescriptor, rootPath: String) throws(SystemError) {
        self.root = root
        self.rootPath = rootPath
        let st = try root.stat()
        identity = (UInt64(st.st_dev), UInt64(st.st_ino))
        let (major, minor) = Udev.split(st.st_dev)
        let sizeFile = "/sys/dev/block/\(major):\(minor)/size"
        blockDevice = Self.sectors(sizeFile).map { (sizeFile, $0) }
    }

    /// Why the card is gone, or nil while it is there.
    func check() -> String? {
        let st: FileStatus
        do { st = try System.status(rootPath) } catch {
            return "\(rootPath) is gone (\(error.reason)): the card was unmounted"
        }
        if UInt64(st.st_dev) != identity.device || UInt64(st.st_ino) != identity.inode {
            return "\(rootPath) no longer leads to the card: it was unmounted"
        }
        if let reason = rootUnreadable() { return reason }
        if let (sizeFile, sectors) = blockDevice {
            guard let now = Self.sectors(sizeFile) else {
                return "its block device is gone (\(sizeFile) no longer exists)"
            }
            if now < sectors {
                return now == 0
                    ? "its block device holds no medium any more (size 0)"
                    : "its block device shrank from \(ByteCount(Int64(sectors) * 512)) to \(ByteCount(Int64(now) * 512))"
            }
        }
        return nil
    }

    /// Why the root directory cannot be opened afresh and read, or nil when it can.
    private func rootUnreadable() -> String? {
        let listing: DirectoryReader
        do { listing = try DirectoryReader(adopting: FileDescriptor(at: root, path: ".", flags: [.readOnly, .directory])) } catch {
            return "its root directory cannot be opened (\(error.reason))"
        }
        if let st = try? listing.descriptor.stat(), st.st_nlink == 0 { return "its root directory was removed" }
        do { _ = try listing.nextEntry { _, _ in } } catch {
            return "its root directory cannot be read (\(error.reason))"
        }
        return nil
    }

    /// The number in a sysfs size file, or nil when it cannot be read.
    private static func sectors(_ sizeFile: String) -> UInt64? {
        guard let text = try? readTextFile(sizeFile) else { return nil }
        return text.split(whereSeparator: \.isWhitespace).first.flatMap { UInt64($0) }
    }
}
