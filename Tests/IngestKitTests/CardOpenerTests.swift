import Foundation
import Glibc
import Testing

@testable import IngestKit

/// Writes `contents` at `components` beneath `root`, making each directory with `mkdirat`
/// from its parent's descriptor, so the whole path may be longer than PATH_MAX.
func writeDeep(_ root: String, _ components: [String], _ contents: [UInt8]) throws {
    var directory = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard directory >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(directory) }
    for name in components.dropLast() {
        if mkdirat(directory, name, 0o755) != 0, errno != EEXIST { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let child = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard child >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        close(directory)
        directory = child
    }
    let fd = openat(directory, components.last!, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == contents.count else { throw POSIXError(.EIO) }
}

/// Opening card files beneath the root: deep trees, links swapped in after the scan, dates
/// beyond 64 bits of nanoseconds. The stager opens every card file this way.
@Suite struct CardOpenerTests {
    /// 24 folders of 200 bytes: 4,824 bytes of path, beyond PATH_MAX (4,096).
    static let deepFolders = (1...24).map { "\($0)-" + String(repeating: "d", count: 197 - String($0).count) }

    func scanFiles(_ root: String) throws -> [ScannedFile] {
        var files: [ScannedFile] = []
        try Scanner().scan(root: root) { if case .file(let file) = $0 { files.append(file) } }
        return files
    }

    func stage(_ root: String, files: [ScannedFile], into state: TemporaryDirectory, verify: VerifyMode = .off) throws -> OutcomeLog {
        let area = try StagingArea(root: state.path + "/staging")
        let stager = Stager(area: area, settings: StageSettings(reserve: 0, verify: verify, chunkSize: 4096, chunks: 3))
        let log = OutcomeLog()
        try stager.run(root: root, files: files, volumeName: "test card") { log.add($0) }
        return log
    }

    /// The xxh128sum of `bytes` (the oracle cannot open a path beyond PATH_MAX: it reads a
    /// shallow copy).
    func oracle(_ bytes: [UInt8], in scratch: TemporaryDirectory) throws -> String {
        try xxh128sum(try scratch.write("oracle-\(UUID().uuidString)", bytes))
    }

    @Test(arguments: [VerifyMode.off, .both])
    func filesWhosePathsAreLongerThanPathMaxAreScannedAndStaged(verify: VerifyMode) throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory(), scratch = TemporaryDirectory()
        defer { _ = try? sh("rm -rf \(shellQuoted(card.path))/DEEP") }
        var expected: [String: String] = [:]
        for name in ["a.jpg", "b.jpg", "c.jpg"] {
            let bytes = randomBytes(10_000)
            let components = ["DEEP"] + Self.deepFolders + [name]
            try writeDeep(card.path, components, bytes)
            expected[components.joined(separator: "/")] = try oracle(bytes, in: scratch)
        }
        // One more, two levels up, so the opener leaves and re-enters folders.
        let shallower = ["DEEP"] + Self.deepFolders.dropLast(2) + ["d.jpg"]
        let bytes = randomBytes(5000)
        try writeDeep(card.path, shallower, bytes)
        expected[shallower.joined(separator: "/")] = try oracle(bytes, in: scratch)
        for name in ["z1.jpg", "z2.jpg"] {
            expected[name] = try oracle(try Array(Data(contentsOf: URL(fileURLWithPath: card.write(name, randomBytes(3000))))), in: scratch)
        }

        let files = try scanFiles(card.path)
        #expect(files.count == expected.count)
        #expect(files.filter { $0.path.bytes.count > Int(PATH_MAX) }.count == 4)
        let log = try stage(card.path, files: files, into: state, verify: verify)

        #expect(log.failed.isEmpty, "\(log.failed.map { "\($0.0.path): \($0.1)" })")
        #expect(Dictionary(uniqueKeysWithValues: log.staged.map { ($0.file.path.display, $0.fingerprint.hex) }) == expected)
        #expect(log.staged.allSatisfy { $0.verified == (verify != .off) })
    }

    /// Between scan and open, `DCIM/100MEDIA` becomes a link to a host folder holding a file
    /// of the same name: a run as root must not copy the host's file.
    @Test func aFolderSwappedForALinkToTheHostAfterTheScanIsRefusedAndNoHostFileIsCopied() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/IMG_0001.JPG", randomBytes(4000))
        try card.write("DCIM/101MEDIA/IMG_0002.JPG", randomBytes(4000))
        let after = try card.write("Z/after.jpg", randomBytes(4000))
        let hostFile = try host.write("IMG_0001.JPG", Array("the host's secret\n".utf8))
        let files = try scanFiles(card.path)
        #expect(rename(card.path + "/DCIM/100MEDIA", card.path + "/moved-away") == 0)
        #expect(symlink(host.path, card.path + "/DCIM/100MEDIA") == 0)

        let log = try stage(card.path, files: files, into: state)

        let failure = try #require(log.failed.first { $0.0.path == CardPath("DCIM/100MEDIA/IMG_0001.JPG") })
        #expect(failure.1.kind == .symlinkInPath(at: CardPath("DCIM/100MEDIA")))
        #expect(failure.1.code == "symlink-in-path")
        let hostDigest = try xxh128sum(hostFile)
        #expect(!log.staged.contains { $0.fingerprint.hex == hostDigest })
        #expect(!FileManager.default.fileExists(atPath: "\(state.path)/staging/\(hostDigest.prefix(2))/\(hostDigest)"))
        #expect(Set(log.staged.map(\.file.path.display)) == ["DCIM/101MEDIA/IMG_0002.JPG", "Z/after.jpg"])
        #expect(log.staged.first { $0.file.path.display == "Z/after.jpg" }?.fingerprint.hex == (try xxh128sum(after)))
    }

    /// A tmpfs mounted over a card folder after the scan (which passes over mount points)
    /// is not entered: the files beneath fail, the rest is staged.
    @Test(needsRoot) func aFileSystemMountedOverAFolderAfterTheScanIsNotEntered() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/IMG_0001.JPG", randomBytes(4000))
        try card.write("DCIM/101MEDIA/IMG_0002.JPG", randomBytes(4000))
        let files = try scanFiles(card.path)
        let covered = card.path + "/DCIM/100MEDIA"
        try sh("mount -t tmpfs -o size=1M ingest-test \(shellQuoted(covered))")
        defer { _ = try? sh("umount \(shellQuoted(covered))") }
        try sh("head -c 4000 /dev/urandom > \(shellQuoted(covered))/IMG_0001.JPG")

        let log = try stage(card.path, files: files, into: state)

        let failure = try #require(log.failed.first { $0.0.path == CardPath("DCIM/100MEDIA/IMG_0001.JPG") })
        #expect(failure.1.kind == .otherFileSystemInPath(at: CardPath("DCIM/100MEDIA")))
        #expect(failure.1.code == "mount-in-path")
        #expect(log.staged.map(\.file.path.display) == ["DCIM/101MEDIA/IMG_0002.JPG"])
    }

    /// A bind mount keeps its file system's device: a folder of the card's own file system
    /// (here a host folder beside the card) bind-mounted over a card folder after the scan
    /// has the root's `st_dev`, and only the mount id tells it apart. The files beneath fail
    /// as mount-in-path, nothing of the host folder is copied, the rest is staged.
    @Test(needsRoot) func aBindMountOfTheCardsOwnFileSystemOverAFolderAfterTheScanIsNotEntered() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory(), state = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/IMG_0001.JPG", randomBytes(4000))
        let kept = try card.write("DCIM/101MEDIA/IMG_0002.JPG", randomBytes(4000))
        let hostFile = try host.write("IMG_0001.JPG", Array("the host's secret\n".utf8))
        let files = try scanFiles(card.path)
        let covered = card.path + "/DCIM/100MEDIA"
        try sh("mount --bind \(shellQuoted(host.path)) \(shellQuoted(covered))")
        defer { _ = try? sh("umount \(shellQuoted(covered))") }
        var coveredStat = stat(), rootStat = stat()
        try #require(stat(covered, &coveredStat) == 0 && stat(card.path, &rootStat) == 0)
        try #require(coveredStat.st_dev == rootStat.st_dev, "the bind mount shows the card's own file system")

        let log = try stage(card.path, files: files, into: state)

        let failure = try #require(log.failed.first { $0.0.path == CardPath("DCIM/100MEDIA/IMG_0001.JPG") })
        #expect(failure.1.kind == .otherFileSystemInPath(at: CardPath("DCIM/100MEDIA")))
        #expect(failure.1.code == "mount-in-path")
        #expect(!log.staged.contains { $0.fingerprint.hex == (try? xxh128sum(hostFile)) })
        #expect(log.staged.map(\.file.path.display) == ["DCIM/101MEDIA/IMG_0002.JPG"])
        #expect(log.staged.first?.fingerprint.hex == (try xxh128sum(kept)))
    }

    /// The mount of a folder, of a bind mount over it and of a file inside: same device,
    /// another mount id for the bind mount (this kernel reports mount ids: Linux 5.8+).
    @Test(needsRoot) func aBindMountIsAnotherMountOnTheSameDevice() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory()
        try card.write("A/x", [1])
        try card.write("B/y", [2])
        try sh("mount --bind \(shellQuoted(host.path)) \(shellQuoted(card.path))/B")
        defer { _ = try? sh("umount \(shellQuoted(card.path))/B") }
        let root = try FileDescriptor(path: card.path, flags: [.readOnly, .directory])
        let rootMount = try root.mount()
        try #require(rootMount.mountID != nil, "the kernel reports mount ids")

        let a = try FileDescriptor(path: card.path + "/A", flags: [.readOnly, .directory]).mount()
        let b = try FileDescriptor(path: card.path + "/B", flags: [.readOnly, .directory]).mount()
        #expect(a == rootMount && a.isSameMount(as: rootMount))
        #expect(b.device == rootMount.device && b.mountID != rootMount.mountID && !b.isSameMount(as: rootMount))
        #expect(try root.mount(of: Array("B".utf8CString), path: "B") == b, "the entry of a mount point is the mount over it")
        #expect(try root.mount(of: Array("A".utf8CString), path: "A") == rootMount)
        // Where the kernel gives no mount id, the device is all there is to compare.
        #expect(MountIdentity(device: b.device, mountID: nil).isSameMount(as: rootMount))
        #expect(!MountIdentity(device: b.device + 1, mountID: rootMount.mountID).isSameMount(as: rootMount))
    }

    /// Between scan and open, another file of the card is renamed over a scanned one: the
    /// copy under the scanned name would hold bytes the scan never saw there. It fails as
    /// replaced (the next run's scan sees the new file), and the others are staged.
    @Test func aFileMovedIntoAScannedFilesPlaceAfterTheScanIsNotCopiedUnderItsName() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        let photo = try card.write("DCIM/IMG_0001.JPG", randomBytes(4000))
        let other = try card.write("DCIM/IMG_0002.JPG", randomBytes(4000))
        let files = try scanFiles(card.path)
        let intruder = try card.write("elsewhere.bin", randomBytes(4000))
        #expect(rename(intruder, photo) == 0)

        let log = try stage(card.path, files: files, into: state)

        let failure = try #require(log.failed.first { $0.0.path == CardPath("DCIM/IMG_0001.JPG") })
        #expect(failure.1.kind == .replacedSinceScan)
        #expect(failure.1.code == "replaced")
        #expect(log.staged.map(\.file.path.display) == ["DCIM/IMG_0002.JPG"])
        #expect(log.staged.first?.fingerprint.hex == (try xxh128sum(other)))
    }

    @Test func aFileSwappedForALinkAfterTheScanIsRefused() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory(), state = TemporaryDirectory()
        let photo = try card.write("DCIM/IMG_0001.JPG", randomBytes(4000))
        let hostFile = try host.write("shadow", Array("root:x:0:0\n".utf8))
        let files = try scanFiles(card.path)
        #expect(unlink(photo) == 0)
        #expect(symlink(hostFile, photo) == 0)

        let log = try stage(card.path, files: files, into: state)

        #expect(log.staged.isEmpty)
        #expect(log.failed.map(\.1.kind) == [.symlinkInPath(at: CardPath("DCIM/IMG_0001.JPG"))])
    }

    /// The opener keeps the last file's folders open. A folder swapped for a link after it
    /// was opened is never looked up again: its descriptor is the card's folder still.
    @Test func aHeldFolderSwappedForALinkStillLeadsToTheCardsOwnFolder() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory()
        try card.write("A/B/one", Array("card one".utf8))
        try card.write("A/B/two", Array("card two".utf8))
        try host.write("two", Array("host two".utf8))
        let root = try FileDescriptor(path: card.path, flags: [.readOnly, .directory])
        let opener = CardOpener(root: root)
        _ = try opener.open(CardPath("A/B/one"), flags: .readOnly)
        #expect(rename(card.path + "/A/B", card.path + "/A/moved") == 0)
        #expect(symlink(host.path, card.path + "/A/B") == 0)

        let two = try opener.open(CardPath("A/B/two"), flags: .readOnly).file
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(two.raw, $0.baseAddress, $0.count) }
        #expect(Array(buffer.prefix(max(0, count))) == Array("card two".utf8))

        // Once the opener leaves the folder, coming back looks the link up: refused.
        _ = try? opener.open(CardPath("other"), flags: .readOnly)
        #expect(throws: CardOpenError.symlink(at: CardPath("A/B"))) { _ = try opener.open(CardPath("A/B/two"), flags: .readOnly) }
    }

    /// The status an open returns is the file's as `fstat` gives it (the stager reads size,
    /// date and inode from it, with no call of its own).
    @Test func anOpenReturnsTheFilesStatusAlong() throws {
        let card = TemporaryDirectory()
        try card.write("A/B/x", randomBytes(12_345))
        let opener = CardOpener(root: try FileDescriptor(path: card.path, flags: [.readOnly, .directory]))
        let (file, status) = try opener.open(CardPath("A/B/x"), flags: .readOnly)
        let fromFstat = try file.stat()
        #expect(status.st_size == 12_345)
        #expect(status.st_ino == fromFstat.st_ino && status.st_dev == fromFstat.st_dev)
        #expect(status.st_mode == fromFstat.st_mode && status.st_nlink == fromFstat.st_nlink)
        #expect(status.mtimeNanoseconds == fromFstat.mtimeNanoseconds)
    }

    @Test func pathsThatLeaveTheRootAreRefused() throws {
        let card = TemporaryDirectory()
        try card.write("A/x", [1])
        let opener = CardOpener(root: try FileDescriptor(path: card.path, flags: [.readOnly, .directory]))
        for path in ["../etc/passwd", "A/../../etc/passwd", "A/./x"] {
            #expect(throws: CardOpenError.self) { _ = try opener.open(CardPath(path), flags: .readOnly) }
        }
        #expect(throws: Never.self) { _ = try opener.open(CardPath("A/x"), flags: .readOnly) }
    }

    /// `Int64(seconds) * 1_000_000_000` trapped for a file dated after 2262-04-11, which ext4
    /// with 256-byte inodes holds (up to 2446).
    @Test func aFileDatedInTheYear2300IsScannedAndStagedWithItsTimeHeldAtTheLimit() throws {
        let card = TemporaryDirectory(), state = TemporaryDirectory()
        let path = try card.write("DCIM/FUTURE.JPG", randomBytes(9000))
        try card.write("DCIM/NOW.JPG", randomBytes(100))
        try sh("touch -d 2300-01-01 \(shellQuoted(path))")
        var st = stat()
        #expect(stat(path, &st) == 0)
        try #require(st.st_mtim.tv_sec == 10_413_792_000, "the file system holds the date")

        let files = try scanFiles(card.path)
        let future = try #require(files.first { $0.path.display == "DCIM/FUTURE.JPG" })
        #expect(future.mtime == .max)
        let log = try stage(card.path, files: files, into: state)

        #expect(log.failed.isEmpty)
        let staged = try #require(log.staged.first { $0.file.path.display == "DCIM/FUTURE.JPG" })
        #expect(staged.file.mtime == .max)
        #expect(staged.fingerprint.hex == (try xxh128sum(path)))
    }

    @Test(arguments: [
        (Int64(0), Int64(5), Int64(5)),
        (1_700_000_000, 123, 1_700_000_000_000_000_123),
        (9_223_372_036, 854_775_807, .max),  // the last representable nanosecond
        (9_223_372_036, 854_775_808, .max),
        (10_413_792_000, 0, .max),  // 2300-01-01
        (.max, 999_999_999, .max),
        (-1, 0, -1_000_000_000),
        (-9_223_372_037, 0, .min),
        (.min, 0, .min),
    ])
    func nanosecondsSinceTheEpochSaturateInsteadOfTrapping(seconds: Int64, nanoseconds: Int64, expected: Int64) {
        #expect(nanosecondsSinceEpoch(seconds: seconds, nanoseconds: nanoseconds) == expected)
    }

    @Test func sumsOfCardSizesSaturateInsteadOfTrapping() {
        #expect(Int64.max.addingSaturating(1) == .max)
        #expect(Int64(5).addingSaturating(.max) == .max)
        #expect(Int64.min.addingSaturating(-1) == .min)
        #expect(Int64(2).addingSaturating(3) == 5)
        var plan = ScanPlan(volume: VolumeIdentity(
            key: "path:/card", rootPath: "/card", mountPoint: nil, pathInFileSystem: "/", fsType: nil, device: nil))
        for name in ["a", "b"] { plan.add(.file(ScannedFile(path: CardPath(name), size: .max, mtime: 0)), toStage: true) }
        #expect(plan.totals.toStageBytes == .max)
    }
}

/// Whether the card itself is gone, asked after a failed read: a real ext4 card on a loop
/// device, whole and then pulled.
@Suite(.serialized)
struct CardPresenceTests {
    @Test(needsRoot) func aWholeCardIsThereAndOneWhoseDeviceShrankOrWasUnmountedIsGone() throws {
        let directory = TemporaryDirectory()
        let image = directory.path + "/card.img", mountPoint = directory.path + "/mnt"
        let device = try sh("""
            truncate -s 64M \(image) && mkfs.ext4 -q -F \(image) && mkdir -p \(mountPoint)
            losetup -f --show \(image)
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        // `sh` stops at the first failing command: the test has unmounted already.
        defer { _ = try? sh("umount -l \(mountPoint) 2>/dev/null || true; losetup -d \(device)") }
        try sh("mount -o ro \(device) \(mountPoint)")
        let root = try FileDescriptor(path: mountPoint, flags: [.readOnly, .directory])
        // Closed before the detach above runs: an open directory keeps the lazily unmounted
        // file system, and so the loop device, busy.
        defer { try? root.close() }
        let presence = try CardPresence(root: root, rootPath: mountPoint)
        #expect(presence.check() == nil, "a whole card is there")

        try sh("truncate -s 4M \(image) && losetup -c \(device)")
        let shrunk = try #require(presence.check())
        #expect(shrunk.contains("shrank from 64.0 MiB to 4.0 MiB"), "\(shrunk)")

        try sh("truncate -s 0 \(image) && losetup -c \(device)")
        #expect(presence.check()?.contains("no medium") == true)

        try sh("umount -l \(mountPoint)")
        #expect(presence.check()?.contains("no longer leads to the card") == true)
    }

    @Test func aPlainDirectoryIsThereUntilItIsRemoved() throws {
        let card = TemporaryDirectory()
        let path = card.path + "/card"
        #expect(mkdir(path, 0o755) == 0)
        let presence = try CardPresence(root: try FileDescriptor(path: path, flags: [.readOnly, .directory]), rootPath: path)
        #expect(presence.check() == nil)
        #expect(rmdir(path) == 0)
        #expect(presence.check()?.contains("is gone") == true)
    }
}
