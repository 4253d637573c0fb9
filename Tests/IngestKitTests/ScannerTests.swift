import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

@Suite struct ScannerTests {
    /// Scans and returns files and skips keyed by display path.
    func scan(
        _ root: String, rules: ScanRules = ScanRules(), maxDepth: Int = Scanner.defaultMaxDepth
    ) throws -> (files: [String: ScannedFile], skips: [String: SkipReason]) {
        var files: [String: ScannedFile] = [:]
        var skips: [String: SkipReason] = [:]
        try Scanner(rules: rules, maxDepth: maxDepth).scan(root: root) { finding in
            switch finding {
            case .file(let file): files[file.path.display] = file
            case let .skipped(path, reason): skips[path.display] = reason
            }
        }
        return (files, skips)
    }

    @Test func findsRegularFilesAtEveryDepthWithSizeAndTime() throws {
        let card = TemporaryDirectory()
        try card.write("DCIM/100MEDIA/DJI_0001.JPG", randomBytes(1000))
        try card.write("DCIM/100MEDIA/sub/deeper/DJI_0002.JPG", randomBytes(10))
        try card.write("Flight log – été.txt", Array("log".utf8))
        try card.write("empty", [])
        let (files, skips) = try scan(card.path)
        #expect(Set(files.keys) == ["DCIM/100MEDIA/DJI_0001.JPG", "DCIM/100MEDIA/sub/deeper/DJI_0002.JPG", "Flight log – été.txt", "empty"])
        #expect(skips.isEmpty)
        #expect(files["DCIM/100MEDIA/DJI_0001.JPG"]?.size == 1000)
        #expect(files["empty"]?.size == 0)
        var st = stat()
        #expect(stat(card.path + "/DCIM/100MEDIA/DJI_0001.JPG", &st) == 0)
        #expect(files["DCIM/100MEDIA/DJI_0001.JPG"]?.mtime == st.mtimeNanoseconds)
    }

    /// A bind mount has its file system's device: a folder of the card's own file system
    /// (a host folder beside the card) bind-mounted inside the card, and a host file
    /// bind-mounted over a card file, are passed over as other mounts by their mount id.
    @Test(needsRoot) func bindMountsOfTheCardsOwnFileSystemInsideItArePassedOver() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory()
        try card.write("DCIM/IMG_0001.JPG", randomBytes(100))
        try card.write("DCIM/IMG_0002.JPG", randomBytes(100))
        let secret = try host.write("secret.txt", Array("the host's secret".utf8))
        #expect(mkdir(card.path + "/MOUNTED", 0o755) == 0)
        try sh("mount --bind \(shellQuoted(host.path)) \(shellQuoted(card.path))/MOUNTED")
        defer { _ = try? sh("umount \(shellQuoted(card.path))/MOUNTED") }
        try sh("mount --bind \(shellQuoted(secret)) \(shellQuoted(card.path))/DCIM/IMG_0002.JPG")
        defer { _ = try? sh("umount \(shellQuoted(card.path))/DCIM/IMG_0002.JPG") }

        let (files, skips) = try scan(card.path)

        #expect(Array(files.keys) == ["DCIM/IMG_0001.JPG"])
        #expect(skips == ["MOUNTED": .otherFileSystem, "DCIM/IMG_0002.JPG": .otherFileSystem])
    }

    @Test func skipsOperatingSystemLitterWithoutEnteringIt() throws {
        let card = TemporaryDirectory()
        try card.write("DCIM/IMG_0001.JPG", [1])
        try card.write("DCIM/._IMG_0001.JPG", [2])
        try card.write(".Trashes/501/old.jpg", [3])
        try card.write("System Volume Information/IndexerVolumeGuid", [4])
        try card.write("$RECYCLE.BIN/x", [5])
        try card.write(".Spotlight-V100/store", [6])
        try card.write(".fseventsd/log", [7])
        let (files, skips) = try scan(card.path)
        #expect(Array(files.keys) == ["DCIM/IMG_0001.JPG"])
        #expect(skips.values.allSatisfy { $0 == .litter })
        #expect(Set(skips.keys) == ["DCIM/._IMG_0001.JPG", ".Trashes", "System Volume Information", "$RECYCLE.BIN", ".Spotlight-V100", ".fseventsd"])
    }

    @Test func reportsSpecialFilesAndNeverFollowsSymlinks() throws {
        let card = TemporaryDirectory()
        try card.write("DCIM/a.jpg", [1, 2, 3])
        #expect(mkfifo(card.path + "/pipe", 0o644) == 0)
        #expect(symlink("DCIM/a.jpg", card.path + "/link-to-file") == 0)
        #expect(symlink(".", card.path + "/DCIM/loop") == 0)  // a directory link loop
        #expect(symlink("b", card.path + "/a") == 0)  // a link loop: a -> b -> a
        #expect(symlink("a", card.path + "/b") == 0)
        let socketPath = card.path + "/control.sock"
        let sock = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(sock) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in socketPath.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)

        let (files, skips) = try scan(card.path)
        #expect(Array(files.keys) == ["DCIM/a.jpg"])
        #expect(skips["pipe"] == .special(kind: "FIFO"))
        #expect(skips["control.sock"] == .special(kind: "socket"))
        #expect(skips["link-to-file"] == .symlink)
        #expect(skips["DCIM/loop"] == .symlink)
        #expect(skips["a"] == .symlink)
        #expect(skips["b"] == .symlink)
    }

    @Test func keepsNamesThatAreNotUTF8AsRawBytes() throws {
        let card = TemporaryDirectory()
        let latin1Name: [UInt8] = Array("caf".utf8) + [0xE9] + Array(".jpg".utf8)  // "café.jpg" in Latin-1
        try card.write(rawName: latin1Name, randomBytes(64))
        var found: [ScannedFile] = []
        try Scanner().scan(root: card.path) { if case .file(let file) = $0 { found.append(file) } }
        let file = try #require(found.first)
        #expect(file.path.bytes == latin1Name)
        #expect(!file.path.isValidUTF8)
        #expect(file.path.display == "caf\\xE9.jpg")
        #expect(file.size == 64)
    }

    @Test func excludePatternsPruneDirectoriesAndIncludePatternsSelectFiles() throws {
        let card = TemporaryDirectory()
        try card.write("DCIM/100/A.JPG", [1])
        try card.write("DCIM/100/A.THM", [2])
        try card.write("DCIM/100/B.jpg", [3])
        try card.write("MISC/log.txt", [4])
        try card.write("notes.txt", [5])
        let rules = ScanRules(include: [try Glob("DCIM/**")], exclude: [try Glob("*.thm"), try Glob("MISC")])
        let (files, skips) = try scan(card.path, rules: rules)
        #expect(Set(files.keys) == ["DCIM/100/A.JPG", "DCIM/100/B.jpg"])
        #expect(skips["DCIM/100/A.THM"] == .excluded(pattern: "*.thm"))
        #expect(skips["MISC"] == .excluded(pattern: "MISC"))
        #expect(skips["MISC/log.txt"] == nil, "an excluded directory is not entered")
        #expect(skips["notes.txt"] == .excluded(pattern: nil))
    }

    @Test func visitsEntriesInByteOrderSoRunsRepeat() throws {
        let card = TemporaryDirectory()
        for name in ["b", "a", "C", "a0", "_"] { try card.write(name, [1]) }
        var order: [String] = []
        try Scanner().scan(root: card.path) { if case .file(let file) = $0 { order.append(file.path.display) } }
        #expect(order == ["C", "_", "a", "a0", "b"])
    }

    @Test func aDirectoryAtTheDepthLimitIsReportedTooDeepAndNotEntered() throws {
        let card = TemporaryDirectory()
        try card.write("top.jpg", [1])
        try card.write("a/b/two.jpg", [2])
        try card.write("a/b/c/three.jpg", [3])
        try card.write("a/b/c/d/four.jpg", [4])
        let (files, skips) = try scan(card.path, maxDepth: 3)
        #expect(Set(files.keys) == ["a/b/two.jpg", "top.jpg"], "entries three levels down are visited, nothing below")
        #expect(skips == ["a/b/c": .tooDeep(limit: 3)])
        #expect(SkipReason.tooDeep(limit: 3).isNotable)
        #expect(SkipReason.tooDeep(limit: 3).code == "too-deep")
        #expect(SkipReason.tooDeep(limit: 3).description == "its contents are more than 3 levels deep (not entered)")
    }

    @Test func aChainOfFoldersDeeperThanTheDefaultLimitEndsInOneSkipAndKeepsTheFilesAbove() throws {
        let card = TemporaryDirectory()
        var relative = ""
        for level in 1...(Scanner.defaultMaxDepth + 20) {
            relative += "d/"
            try card.write(relative + "f\(level)", [UInt8(truncatingIfNeeded: level)])
        }
        let (files, skips) = try scan(card.path)
        #expect(files.count == Scanner.defaultMaxDepth - 1, "the file in each folder entered, the last one at the limit")
        #expect(files.keys.map { $0.split(separator: "/").count }.max() == Scanner.defaultMaxDepth)
        #expect(skips == [String(repeating: "d/", count: Scanner.defaultMaxDepth - 1) + "d": .tooDeep(limit: Scanner.defaultMaxDepth)])
    }

    @Test func aDirectoryOfMoreNamesThanOneChunkIsVisitedWholeAndInTheSameOrderEachRun() throws {
        let card = TemporaryDirectory()
        let count = DirectoryStream.chunkNames * 2 + 500
        for index in 0..<count { try card.write(rawName: Array("f\(index)".utf8), []) }
        func order() throws -> [String] {
            var order: [String] = []
            try Scanner().scan(root: card.path) { if case .file(let file) = $0 { order.append(file.path.display) } }
            return order
        }
        let first = try order()
        #expect(first.count == count)
        #expect(Set(first).count == count, "each name once")
        #expect(try order() == first)
        for chunk in stride(from: 0, to: count, by: DirectoryStream.chunkNames) {
            let names = first[chunk..<min(count, chunk + DirectoryStream.chunkNames)]
            #expect(names.elementsEqual(names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }))
        }
    }

    @Test func aChunkHoldsAtMostItsBytesOfNames() throws {
        let card = TemporaryDirectory()
        let long = String(repeating: "x", count: 250)
        let count = DirectoryStream.chunkBytes / 250 + 100
        for index in 0..<count { try card.write(rawName: Array("\(index)\(long)".prefix(255).utf8), []) }
        let stream = try DirectoryStream(adopting: FileDescriptor(path: card.path, flags: [.readOnly, .directory]))
        var sizes: [Int] = []
        while true {
            let chunk = try stream.nextChunk()
            if chunk.isEmpty { break }
            #expect(chunk.byteCount < DirectoryStream.chunkBytes + 256)
            sizes.append(chunk.count)
        }
        #expect(sizes.reduce(0, +) == count)
        #expect(sizes.count == 2)
    }

    @Test func aMissingRootIsAnErrorThatNamesThePath() throws {
        let card = TemporaryDirectory()
        let missing = card.path + "/nowhere"
        #expect(throws: IngestError.self) { try Scanner().scan(root: missing) { _ in } }
        do {
            try Scanner().scan(root: missing) { _ in }
        } catch {
            #expect(error.exitStatus == .noInput)
            #expect(error.description.contains(missing))
        }
    }
}

/// A hostile card of many special files or empty files is counted, not listed without end.
@Suite struct ScanPlanReportTests {
    @Test func skipsAndNoticesPastTheLimitAreCountedNotListed() {
        let volume = VolumeIdentity(
            key: "path:/c", rootPath: "/c", mountPoint: nil, pathInFileSystem: "/c", fsType: nil, device: nil)
        var plan = ScanPlan(volume: volume)
        let extra = 250
        for index in 0..<(ScanPlan.reportLimit + extra) {
            plan.add(.skipped(CardPath("fifo\(index)"), .special(kind: "FIFO")), toStage: false)
            plan.add(.file(ScannedFile(path: CardPath("empty\(index)"), size: 0, mtime: 0)), toStage: true)
        }
        #expect(plan.notableSkips.count == ScanPlan.reportLimit)
        #expect(plan.notices.count == ScanPlan.reportLimit)
        #expect(plan.totals.unlisted == 2 * extra)
        #expect(plan.totals.skipped == ScanPlan.reportLimit + extra)
        #expect(plan.totals.toStage == ScanPlan.reportLimit + extra, "every file is still staged")
    }
}

/// The files to stage as a second walk of the card hands them on, the way the stager takes
/// them: no list of them is held.
@Suite struct FilesToStageTests {
    static func volume(_ root: String) -> VolumeIdentity {
        VolumeIdentity(key: "path:" + root, rootPath: root, mountPoint: nil, pathInFileSystem: root, fsType: nil, device: nil)
    }

    static func known(_ file: ScannedFile, state: FileState) -> FileRecord {
        FileRecord(
            id: nil, volumeKey: "k", path: Data(file.path.bytes), size: file.size, mtime: file.mtime, fingerprint: nil,
            state: state, lastError: nil, updatedAt: Date(), uploadID: nil)
    }

    @Test(.timeLimit(.minutes(1)))
    func theWalkHandsOnTheFilesThePlanCountedAndNotThoseTheJournalHasUnchanged() async throws {
        let card = TemporaryDirectory()
        let count = 3 * FilesToStage.depth
        for i in 0..<count { try card.write("DCIM/\(100 + i / 200)MEDIA/F\(i).SRT", randomBytes(i % 7)) }
        var scanned: [CardPath: ScannedFile] = [:]
        try Scanner().scan(root: card.path) { if case .file(let file) = $0 { scanned[file.path] = file } }
        let uploaded = try #require(scanned[CardPath("DCIM/100MEDIA/F1.SRT")])
        let pending = try #require(scanned[CardPath("DCIM/100MEDIA/F2.SRT")])
        var changed = try #require(scanned[CardPath("DCIM/100MEDIA/F3.SRT")])
        changed.mtime -= 1
        let known = [
            uploaded.path: Self.known(uploaded, state: .uploaded), pending.path: Self.known(pending, state: .pending),
            changed.path: Self.known(changed, state: .uploaded),
        ]
        let plan = try await ScanPlan.make(volume: Self.volume(card.path), rules: ScanRules(), known: .records(known))
        #expect(plan.totals.toStage == count - 1 && plan.totals.known == 1)

        let handed = Mutex<[CardPath]>([])
        try await FilesToStage(volume: Self.volume(card.path), rules: ScanRules(), known: .records(known)).each { file in
            handed.withLock { $0.append(file.path) }
        }
        let paths = handed.withLock { $0 }
        #expect(paths.count == plan.totals.toStage, "the walk hands on what the scan counted")
        #expect(Set(paths) == Set(scanned.keys).subtracting([uploaded.path]))
    }

    /// A card of more files than a batch of the journal's lookups, half of it journalled:
    /// the walk hands on the other half, in the walk's order.
    @Test(.timeLimit(.minutes(1)))
    func aCardLargerThanABatchIsSortedAgainstTheJournalBatchByBatchInTheWalksOrder() async throws {
        let card = TemporaryDirectory()
        let state = TemporaryDirectory()
        let count = 2 * KnownFiles.batch + 100
        for i in 0..<count { try card.write(String(format: "DCIM/F%05d.SRT", i), randomBytes(i % 5)) }
        let volume = Self.volume(card.path)
        var scanned: [ScannedFile] = []
        try Scanner().scan(root: card.path) { if case .file(let file) = $0 { scanned.append(file) } }
        let journal = try Journal(path: state.path + "/journal.sqlite")
        try await journal.noteVolume(volume)
        let journalled = scanned.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        try await journal.record(
            journalled.map { .staged(StagedFile(file: $0, fingerprint: Fingerprint(high: 1, low: 1), deduplicated: false, verified: false)) },
            volumeKey: volume.key)

        let handed = Mutex<[CardPath]>([])
        try await FilesToStage(volume: volume, rules: ScanRules(), known: .journal(journal, volumeKey: volume.key)).each { file in
            handed.withLock { $0.append(file.path) }
        }
        #expect(handed.withLock { $0 } == scanned.enumerated().filter { $0.offset % 2 == 1 }.map(\.element.path))
    }

    @Test(.timeLimit(.minutes(1)))
    func aWalkClosedEarlyEndsAndHandsOnNothingMore() throws {
        let card = TemporaryDirectory()
        for i in 0..<(4 * FilesToStage.depth) { try card.write("F\(i)", []) }
        let files = FilesToStage(volume: Self.volume(card.path), rules: ScanRules(), known: .records())
        var taken = 0
        for _ in files {
            taken += 1
            if taken == 10 { break }
        }
        #expect(files.close() == nil)
        #expect(files.next() == nil, "nothing more once closed")
        #expect(taken == 10)
    }

    @Test func aCardGoneBeforeTheWalkEndsItWithTheError() throws {
        let files = FilesToStage(volume: Self.volume("/nonexistent-card-\(UInt32.random(in: 0...UInt32.max))"), rules: ScanRules(), known: .records())
        #expect(files.next() == nil)
        guard case .sourceUnavailable = files.close() else {
            Issue.record("expected the card to be unavailable")
            return
        }
    }
}
