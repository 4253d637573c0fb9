import Foundation
import Synchronization
import Testing

@testable import IngestKit

/// Reading objects back: the ranged reads and their fingerprint (``ObjectReadBack``), which
/// objects a night's budget takes (``ReadBackSelection``, ``Journal/readBackCandidates(seenSince:budget:)``),
/// and the `[rescan] read_back_bytes` key.
@Suite struct ReadBackTests {
    let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)

    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    static func fingerprint(of bytes: [UInt8]) -> Fingerprint {
        let hasher = FingerprintHasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    // MARK: ObjectReadBack

    @Test func anObjectReadInRangesHashesToTheFingerprintOfItsBytesInOrder() async throws {
        let store = ScriptedStore()
        // Five ranges and a short last one, more than a window of two in flight.
        let bytes = Self.bytes(4 * 65_536 + 1_000, seed: 1)
        store.place("k", bytes: bytes)
        let reader = ObjectReadBack(rangeSize: 65_536, rangesPerObject: 2)
        let counted = Counter()
        let outcome = try await reader.read(
            key: "k", size: Int64(bytes.count), etag: store.objects["k"]?.etag, in: store, stop: StopFlag()
        ) { counted.add($0) }
        #expect(outcome == .read(Self.fingerprint(of: bytes)))
        #expect(store.calls(.getRange) == 5)
        #expect(counted.value == Int64(bytes.count))
    }

    @Test func otherBytesOfTheSameSizeHashToAnotherFingerprint() async throws {
        let store = ScriptedStore()
        let ingested = Self.bytes(200_000, seed: 2)
        var other = ingested
        other[150_000] ^= 0xFF
        store.place("k", bytes: other, metadata: ["xxh128": Self.fingerprint(of: ingested).hex])
        let outcome = try await ObjectReadBack(rangeSize: 65_536).read(
            key: "k", size: 200_000, etag: nil, in: store, stop: StopFlag())
        #expect(outcome == .read(Self.fingerprint(of: other)))
        #expect(outcome != .read(Self.fingerprint(of: ingested)))
    }

    @Test func anObjectReplacedSinceItsHeadIsSeenAsReplaced() async throws {
        let store = ScriptedStore()
        let bytes = Self.bytes(100_000, seed: 3)
        store.place("k", bytes: bytes)
        let shown = try #require(store.objects["k"]?.etag)
        store.place("k", bytes: Self.bytes(100_000, seed: 4))
        let outcome = try await ObjectReadBack(rangeSize: 65_536).read(
            key: "k", size: 100_000, etag: shown, in: store, stop: StopFlag())
        #expect(outcome == .replaced)
    }

    @Test func aGoneObjectIsMissingAndAStopReadsNothing() async throws {
        let store = ScriptedStore()
        let reader = ObjectReadBack(rangeSize: 65_536)
        #expect(try await reader.read(key: "gone", size: 10, etag: nil, in: store, stop: StopFlag()) == .missing)
        store.place("k", bytes: Self.bytes(100_000, seed: 5))
        let stop = StopFlag()
        stop.raise()
        #expect(try await reader.read(key: "k", size: 100_000, etag: nil, in: store, stop: stop) == .stopped)
        #expect(store.calls(.getRange) == 1, "only the gone object's range was asked for")
    }

    @Test func anEmptyObjectIsTheEmptyFingerprintWithoutARequest() async throws {
        let store = ScriptedStore()
        let outcome = try await ObjectReadBack().read(key: "empty", size: 0, etag: nil, in: store, stop: StopFlag())
        #expect(outcome == .read(Self.fingerprint(of: [])))
        #expect(store.calls(.getRange) == 0)
    }

    // MARK: the budget's rotation

    func candidate(_ name: String, size: Int64, readBackAt: Date? = nil) -> ReadBackCandidate {
        ReadBackCandidate(
            uploadID: name, key: "k/\(name)", size: size, fingerprint: "", target: target, volumeKey: "uuid:A",
            cardName: "A", path: CardPath(name), readBackAt: readBackAt)
    }

    @Test func aBudgetTakesObjectsInOrderUntilTheFirstThatDoesNotFit() {
        var selection = ReadBackSelection(budget: 100)
        let taken = ["a": 40, "b": 50, "c": 20, "d": 5].sorted { $0.key < $1.key }.map { name, size in
            selection.offer(candidate(name, size: Int64(size)))
        }
        #expect(taken == [true, true, false, false], "c would overrun the budget; d, smaller, does not jump the rotation")
        #expect(selection.picked.map(\.uploadID) == ["a", "b"])
        #expect(selection.bytes == 90)
        #expect(selection.isFull)
    }

    @Test func anObjectLargerThanTheWholeBudgetIsReadAloneWhenItsTurnComes() {
        var selection = ReadBackSelection(budget: 100)
        let huge = selection.offer(candidate("huge", size: 1_000))
        let small = selection.offer(candidate("small", size: 1))
        #expect(huge && !small)
        #expect(selection.picked.map(\.uploadID) == ["huge"])
        var off = ReadBackSelection(budget: 0)
        let any = off.offer(candidate("a", size: 1))
        #expect(!any, "a budget of 0 is off")
    }

    func openJournal() async throws -> (TemporaryDirectory, Journal) {
        let dir = TemporaryDirectory()
        let journal = try Journal(path: dir.path + "/journal.sqlite")
        try await journal.noteVolume(
            VolumeIdentity(key: "uuid:A", rootPath: "/media/A", mountPoint: nil, pathInFileSystem: "/", fsType: nil, device: nil))
        return (dir, journal)
    }

    /// A file of card A staged, and its upload completed at `completedAt`.
    @discardableResult
    func uploaded(_ journal: Journal, _ path: String, digest: UInt64, size: Int64, completedAt: Date) async throws -> String {
        let staged = StagedFile(
            file: ScannedFile(path: CardPath(path), size: size, mtime: 1), fingerprint: Fingerprint(high: digest, low: digest),
            deduplicated: false, verified: false)
        try await journal.record([.staged(staged)], volumeKey: "uuid:A")
        let claim = UploadClaim(
            path: staged.file.path, fingerprint: staged.fingerprint, size: size, target: target, key: "k/\(path)",
            headers: [], partSize: nil)
        let record: UploadRecord
        switch try await journal.claim([claim], volumeKey: "uuid:A")[0] {
        case .planned(let planned), .upload(let planned), .alreadyInBucket(let planned), .copy(let planned, _): record = planned
        }
        _ = try await journal.completeUpload(id: record.id, object: StoredObject(etag: "\"e\"", size: 1), at: completedAt)
        return record.id
    }

    @Test func successiveNightsReadTheObjectsReadBackLongestAgoFirstAndCoverThemAll() async throws {
        let (_, journal) = try await openJournal()
        let day = Date(timeIntervalSince1970: 1_800_000_000)
        // Completed in the order c, a, b, d.
        let a = try await uploaded(journal, "a.jpg", digest: 1, size: 40, completedAt: day.addingTimeInterval(2))
        let b = try await uploaded(journal, "b.jpg", digest: 2, size: 40, completedAt: day.addingTimeInterval(3))
        let c = try await uploaded(journal, "c.jpg", digest: 3, size: 40, completedAt: day.addingTimeInterval(1))
        let d = try await uploaded(journal, "d.jpg", digest: 4, size: 40, completedAt: day.addingTimeInterval(4))
        // The card was seen now (noteVolume): any time before takes it.
        let since = Date(timeIntervalSince1970: 0)

        let night1 = try await journal.readBackCandidates(seenSince: since, budget: 100)
        #expect(night1.map(\.uploadID) == [c, a], "never read back, the oldest uploads first, 80 of 100 bytes")
        #expect(night1.first?.key == "k/c.jpg")
        #expect(night1.first?.fingerprint == Fingerprint(high: 3, low: 3).hex)
        for picked in night1 { try await journal.noteReadBack(ofUpload: picked.uploadID, at: day.addingTimeInterval(86_400)) }

        let night2 = try await journal.readBackCandidates(seenSince: since, budget: 100)
        #expect(night2.map(\.uploadID) == [b, d], "the objects never read back come before those read back")
        try await journal.noteReadBack(ofUpload: d, at: day.addingTimeInterval(2 * 86_400))
        try await journal.noteReadBack(ofUpload: b, at: day.addingTimeInterval(2 * 86_400 + 1))

        let night3 = try await journal.readBackCandidates(seenSince: since, budget: 100)
        #expect(night3.map(\.uploadID) == [c, a], "then those read back longest ago")
        #expect(night3.allSatisfy { $0.readBackAt == day.addingTimeInterval(86_400) })

        #expect(try await journal.readBackCandidates(seenSince: since, budget: 0).isEmpty)
        #expect(
            try await journal.readBackCandidates(seenSince: Date().addingTimeInterval(86_400), budget: 100).isEmpty,
            "a card not seen lately is not read back")
    }

    @Test func anUploadStartedAgainIsReadBackFirstOnceItCompletes() async throws {
        let (_, journal) = try await openJournal()
        let day = Date(timeIntervalSince1970: 1_800_000_000)
        let a = try await uploaded(journal, "a.jpg", digest: 1, size: 40, completedAt: day)
        let b = try await uploaded(journal, "b.jpg", digest: 2, size: 40, completedAt: day.addingTimeInterval(1))
        try await journal.noteReadBack(ofUpload: a, at: day.addingTimeInterval(10))
        try await journal.noteReadBack(ofUpload: b, at: day.addingTimeInterval(20))
        _ = try await journal.restartUpload(id: b, key: "k/b~alt.jpg")
        _ = try await journal.completeUpload(id: b, object: StoredObject(etag: "\"f\"", size: 1), at: day.addingTimeInterval(30))
        let night = try await journal.readBackCandidates(seenSince: Date(timeIntervalSince1970: 0), budget: 40)
        #expect(night.map(\.uploadID) == [b], "its new object was never read back")
        #expect(night.first?.key == "k/b~alt.jpg")
    }

    // MARK: the configuration

    @Test func readBackBytesIsASizeOrOffAndOffByDefault() throws {
        #expect(try Config.parse("").rescan.readBackBytes == 0)
        #expect(try Config.parse("[rescan]\nread_back_bytes = \"1GiB\"\n").rescan.readBackBytes == 1 << 30)
        #expect(try Config.parse("[rescan]\nread_back_bytes = \"off\"\n").rescan.readBackBytes == 0)
        #expect(try Config.parse("[rescan]\nread_back_bytes = \"0\"\n").rescan.readBackBytes == 0)
        do {
            _ = try Config.parse("[rescan]\nread_back_bytes = \"a lot\"\n")
            Issue.record("a budget that is no size was taken")
        } catch {
            guard case let .config(_, key, problem) = error else { throw error }
            #expect(key == "rescan.read_back_bytes")
            #expect(problem.contains("\"512MiB\""), "the error shows how to write one")
        }
    }
}

/// A count several tasks add to.
private final class Counter: Sendable {
    private let total = Synchronization.Mutex<Int64>(0)
    func add(_ bytes: Int64) { total.withLock { $0 += bytes } }
    var value: Int64 { total.withLock { $0 } }
}
