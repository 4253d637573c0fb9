import Foundation
import Glibc
import IngestTestSupport
import Synchronization
import Testing

/// The compatibility matrix (issue 51): the same cards against every S3 server a station may
/// use, each a real one the harness starts (SeaweedFS, moto's server for AWS's behaviour, Ceph
/// RGW). One test per behaviour, each run against each server. The aws CLI and xxh128sum are
/// the oracle: what the bucket holds is downloaded and compared, never taken from the journal.
///
/// Each server starts once for the suite (``SharedServers``), on its first use, and each
/// gets its two cards ingested once (``Landing``): the behaviours look at what that left.
@Suite(.serialized, SharedServers.scope)
struct CompatibilityMatrixTests {
    /// Every card file lands at its own key: downloaded, each object is its file's bytes
    /// (xxh128sum), and the first runs exit 0.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func everyFileOfTheCardsLandsByteForByte(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        for run in landing.firstRuns {
            #expect(run.status == 0, "\(kind): the card's run exits 0: \(run.stderr)")
        }
        for card in landing.cards {
            let landed = try landing.downloadedSums(of: card)
            let oracle = try landing.sums(of: card)
            #expect(landed == oracle, "\(kind): the objects downloaded are the card's files, one each")
        }
    }

    /// Both 40 MiB files (one streamed as it was read, one sent from its staged copy) carry
    /// their xxh128 fingerprint, in a tag or in the metadata.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func bothLargeObjectsCarryTheirFingerprint(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        for card in landing.cards {
            let key = try landing.key(of: Landing.largeFile, on: card)
            let fingerprint = try xxh128sum(card.path + "/" + Landing.largeFile)
            let head = try landing.server.json(["s3api", "head-object", "--bucket", landing.bucket, "--key", key])
            var labelled = (head["Metadata"] as? [String: String])?["xxh128"]
            if labelled == nil { labelled = try landing.tags(of: key)["xxh128"] }
            #expect(labelled == fingerprint, "\(kind): \(key) carries fingerprint \(labelled ?? "none"), the file has \(fingerprint)")
        }
    }

    /// `verify-card` on each card exits 0 and says it is safe to erase.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func verifyCardSaysEachCardIsSafe(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        for card in landing.cards {
            let checked = try landing.ingest(["verify-card", card.path])
            #expect(checked.status == 0, "\(kind): verify-card exits 0: \(checked.stderr)")
            let summary = checked.events("verify_summary").last
            #expect(summary?["safe_to_erase"] as? Bool == true, "\(kind): \(checked.events("problem"))")
        }
    }

    /// A second run of each card exits 0, sends no byte and puts nothing at an alternative key.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func aRerunSendsNothingAndMakesNoAlternativeKey(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        for (card, config) in zip(landing.cards, landing.configs) {
            let again = try landing.ingest([card.path], config: config)
            #expect(again.status == 0, "\(kind): the rerun exits 0: \(again.stderr)")
            #expect(again.summary?.int("uploaded_bytes") == 0, "\(kind): the rerun sent \(again.summary?.int("uploaded_bytes") ?? -1) bytes")
            #expect(again.events("part_uploaded").isEmpty && again.events("uploaded").isEmpty, "\(kind): nothing is sent again")
        }
        let alternative = try landing.allKeys().filter { $0.contains("~") }
        #expect(alternative.isEmpty, "\(kind): objects at an alternative key: \(alternative)")
    }

    /// A run killed (SIGKILL) while a 40 MiB file's parts go out, then `ingest resume`, then
    /// the card again, ends with every file of the card in the bucket byte for byte, and
    /// `verify-card` says safe.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func aKillMidUploadThenResumeAndARerunEndWithEveryFileVerified(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        let card = TemporaryDirectory()
        try Landing.populate(card)
        let state = TemporaryDirectory()
        let config = try landing.config(streamParts: true, card: card)

        let killed = try IngestRun.start(
            [card.path, "--endpoint", landing.server.endpoint, "--bucket", landing.bucket, "--state-dir", state.path,
             "--json", "--max-rate", "8MiB/s"],
            environment: landing.environment(config: config))
        defer { if killed.isRunning { kill(killed.pid, SIGKILL) } }
        let deadline = Date().addingTimeInterval(60)
        while killed.isRunning, !killed.standardOutputSoFar.contains("\"event\":\"part_uploaded\""), Date() < deadline {
            usleep(5_000)
        }
        #expect(killed.isRunning, "\(kind): the run ended before a part went out: \(killed.standardErrorSoFar)")
        kill(killed.pid, SIGKILL)
        _ = try killed.wait(timeout: 10)

        // `ingest resume` takes up what the killed run left staged, without the card; what
        // only the card can bring (a copy the kill cut short) waits for it (exit 1).
        let resumed = try landing.ingest(["resume"], config: config, state: state)
        #expect([0, 1].contains(resumed.status), "\(kind): resume exits 0, or 1 for files that need their card: \(resumed.stderr)")
        #expect(try landing.keys(of: card).values.allSatisfy { !$0.contains("~") }, "\(kind): no alternative key")
        let again = try landing.ingest([card.path], config: config, state: state)
        #expect(again.status == 0, "\(kind): the run after the kill exits 0: \(again.stderr)")
        #expect(try landing.downloadedSums(of: card) == (try landing.sums(of: card)), "\(kind): every file landed whole")
        let checked = try landing.ingest(["verify-card", card.path], state: state)
        #expect(checked.status == 0, "\(kind): verify-card exits 0: \(checked.stderr)")
        #expect(checked.events("verify_summary").last?["safe_to_erase"] as? Bool == true, "\(kind): \(checked.events("problem"))")
    }
}

extension CompatibilityMatrixTests {
    /// The other commands see the same objects on every server: `ingest ls` lists each
    /// card file's object with its fingerprint, `status --check-bucket` compares every
    /// recorded object with the listing and calls both cards safe, and `verify-card
    /// --read-back` reads every object back and finds the card's bytes.
    @Test(.timeLimit(.minutes(5)), arguments: S3ServerKind.selected)
    func lsStatusAndAReadBackAgreeOnEveryServer(kind: S3ServerKind) throws {
        let landing = try SharedServers.landing(kind)
        for card in landing.cards {
            let prefix = Landing.name(of: card) + "/"
            let listed = try landing.ingest(["ls", prefix])
            #expect(listed.status == 0, "\(kind): ls exits 0: \(listed.stderr)")
            let fingerprints = Dictionary(
                listed.events("object").compactMap { o in (o["key"] as? String).map { ($0, o["xxh128"] as? String) } },
                uniquingKeysWith: { a, _ in a })
            for (path, key) in try landing.keys(of: card) {
                #expect(fingerprints[key] == .some(try xxh128sum(card.path + "/" + path)), "\(kind): ls shows \(key)'s fingerprint")
            }
            let readBack = try landing.ingest(["verify-card", "--read-back", card.path])
            #expect(readBack.status == 0, "\(kind): verify-card --read-back exits 0: \(readBack.stderr)")
        }
        let status = try landing.ingest(["status", "--check-bucket"])
        #expect(status.status == 0, "\(kind): status --check-bucket exits 0: \(status.stderr)")
        let verdicts = status.events("card")
        #expect(verdicts.count == 2 && verdicts.allSatisfy { $0["safe_to_erase"] as? Bool == true }, "\(kind): \(verdicts)")
        // The fallback a server without checksums takes is said, and only there.
        let said = landing.firstRuns.flatMap { $0.events("checksums_not_kept") }
        #expect(said.isEmpty == (kind != .cephRGW), "\(kind): checksums_not_kept \(said)")
    }

    /// `ingest check` names what the server does of what ingest's proofs use: conditional
    /// writes honoured (412) everywhere; SeaweedFS reports the multipart probe object's
    /// composite CRC32C, moto the same value without its `-1`, Ceph RGW 16 none (a warning
    /// naming the fallback proof); tags kept on all. Its probe objects are gone afterwards.
    @Test(.timeLimit(.minutes(3)), arguments: S3ServerKind.selected)
    func checkNamesTheServersChecksumsAndTaggingAndLeavesNoProbe(kind: S3ServerKind) throws {
        let server = try SharedServers.server(kind)
        let bucket = "checked"
        try server.createBucket(bucket)
        let state = TemporaryDirectory()
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = "/dev/null"
        let run = try IngestRun.ingest(
            ["check", "--json", "--no-station", "--state-dir", state.path, "--endpoint", server.endpoint, "--bucket", bucket],
            environment: environment, timeout: 120)
        #expect(run.status == 0, "\(kind): \(run.result.stdoutText)\(run.stderr)")
        let checks = Dictionary(
            run.events("check").compactMap { event in event.string("check").map { ($0, event) } }, uniquingKeysWith: { a, _ in a })
        #expect(checks["conditional_write"]?.string("status") == "pass", "\(kind): \(checks["conditional_write"] ?? [:])")
        #expect(checks["tagging"]?.string("status") == "pass", "\(kind): \(checks["tagging"] ?? [:])")
        let checksums = try #require(checks["checksums"], "\(kind): no checksums line")
        let detail = checksums.string("detail") ?? ""
        switch kind {
        case .seaweedFS:
            #expect(checksums.string("status") == "pass" && detail.hasPrefix("composite CRC32C reported"), "\(detail)")
        case .moto:
            // moto 5.2.5 sends the composite value without "-N", and no x-amz-checksum-type.
            #expect(
                checksums.string("status") == "pass" && detail.hasPrefix("composite CRC32C reported without its -N part count"),
                "\(detail)")
        case .cephRGW:
            #expect(checksums.string("status") == "warn" && detail.hasPrefix("none reported"), "\(detail)")
            #expect(detail.contains("ETag of their part MD5s"), "the fallback is named: \(detail)")
        }
        let left = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        #expect(left.isEmpty, "\(kind): the probe objects are deleted: \(left)")
        #expect(try server.openMultipartUploads(bucket: bucket).isEmpty, "\(kind): no upload left open")
    }
}

/// The servers of the matrix, each started on its first use in the suite and stopped, by its
/// PIDs, when the suite ends (a suite trait's scope): one RGW start (~13 s) for all behaviours.
final class SharedServers: Sendable {
    private let servers = Mutex<[S3ServerKind: any S3TestServer]>([:])
    private let landings = Mutex<[S3ServerKind: Result<Landing, any Error>]>([:])

    @TaskLocal static var current: SharedServers?

    struct Scope: SuiteTrait, TestScoping {
        var isRecursive: Bool { false }
        func provideScope(
            for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
        ) async throws {
            let shared = SharedServers()
            defer { shared.stopAll() }
            try await SharedServers.$current.withValue(shared) { try await function() }
        }
    }

    static var scope: Scope { Scope() }

    /// The server of `kind`, started now if it is not running yet.
    static func server(_ kind: S3ServerKind) throws -> any S3TestServer {
        let shared = try #require(current, "SharedServers is used outside its suite's scope")
        return try shared.servers.withLock { servers in
            if let server = servers[kind] { return server }
            let server = try kind.start()
            servers[kind] = server
            return server
        }
    }

    /// The two cards landed on the server of `kind`: made and ingested on the first call; a
    /// failure to start or to run is the same failure for every later call.
    static func landing(_ kind: S3ServerKind) throws -> Landing {
        let shared = try #require(current, "SharedServers is used outside its suite's scope")
        let server = try server(kind)
        return try shared.landings.withLock { landings in
            if let landing = landings[kind] { return try landing.get() }
            let landing = Result { try Landing(server: server) }
            landings[kind] = landing
            return try landing.get()
        }
    }

    private func stopAll() {
        servers.withLock { servers in
            for server in servers.values { server.stop() }
            servers = [:]
        }
    }
}

/// Two cards ingested into one server's bucket with one state directory: each holds small
/// files, an empty one, one of a content another file has, and a 40 MiB file, a multipart
/// upload of five 8 MiB parts; the first card's is streamed as it is read (the default), the
/// second's is sent from its staged copy (`stream_parts = false`).
final class Landing: @unchecked Sendable {
    static let largeFile = "DCIM/100MEDIA/CLIP_0001.MP4"

    let server: any S3TestServer
    var bucket: String { server.bucket }
    let dir = TemporaryDirectory()
    let state = TemporaryDirectory()
    let cards = [TemporaryDirectory(), TemporaryDirectory()]
    private(set) var configs: [String] = []
    private(set) var firstRuns: [IngestRun] = []

    init(server: any S3TestServer) throws {
        self.server = server
        configs = [try config(streamParts: true, card: cards[0]), try config(streamParts: false, card: cards[1])]
        for (card, config) in zip(cards, configs) {
            try Self.populate(card)
            firstRuns.append(try ingest([card.path], config: config))
        }
    }

    static func populate(_ card: TemporaryDirectory) throws {
        let photo = randomBytes(200_000)
        _ = try card.write("DCIM/100MEDIA/IMG_0001.JPG", photo)
        _ = try card.write("DCIM/100MEDIA/IMG_0002.JPG", randomBytes(3_000))
        _ = try card.write("DCIM/101MEDIA/IMG_0001_copy.JPG", photo)
        _ = try card.write("MISC/empty.marker", [])
        _ = try card.write(largeFile, randomBytes(40 << 20))
    }

    /// A configuration of 8 MiB parts, with `card`'s objects under a prefix of their own
    /// (the card's folder name, unique), where ``keys(of:)`` finds them.
    func config(streamParts: Bool, card: TemporaryDirectory) throws -> String {
        let text = """
            [upload]
            part_size = "8MiB"
            single_put_threshold = "8MiB"
            stream_parts = \(streamParts)
            [s3]
            endpoint = "\(server.endpoint)"
            bucket = "\(bucket)"
            stall_timeout = "10s"
            key_template = "\(Self.name(of: card))/{path}"
            [device]
            id = "station-matrix"
            """
        return try dir.write("ingest-\(Self.name(of: card)).toml", Array(text.utf8))
    }

    func environment(config: String?) -> [String: String] {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config ?? configs[0]
        return environment
    }

    /// `ingest ARGS --state-dir STATE --json` with the server's credentials.
    func ingest(_ arguments: [String], config: String? = nil, state: TemporaryDirectory? = nil) throws -> IngestRun {
        try IngestRun.ingest(
            arguments + ["--state-dir", (state ?? self.state).path, "--json"], environment: environment(config: config))
    }

    /// Every key in the bucket.
    func allKeys() throws -> [String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        return listed.compactMap { $0["Key"] as? String }
    }

    static func name(of card: TemporaryDirectory) -> String { URL(fileURLWithPath: card.path).lastPathComponent }

    /// The keys of `card`'s files, by the file's path: those under the card's prefix, its
    /// ASC MHL history aside.
    func keys(of card: TemporaryDirectory) throws -> [String: String] {
        let prefix = Self.name(of: card) + "/"
        var keys: [String: String] = [:]
        for key in try allKeys() where key.hasPrefix(prefix) && !key.contains("ascmhl/") {
            keys[String(key.dropFirst(prefix.count))] = key
        }
        return keys
    }

    func key(of path: String, on card: TemporaryDirectory) throws -> String {
        let keys = try keys(of: card)
        return try #require(keys[path], "no object for \(path) among \(keys.values.sorted())")
    }

    /// xxh128sum of each file of `card`, by path.
    func sums(of card: TemporaryDirectory) throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try xxh128sums(under: card.path).map { (String(decoding: $0.key, as: UTF8.self), $0.value) })
    }

    /// xxh128sum of each object of `card`'s files, downloaded, by the file's path.
    func downloadedSums(of card: TemporaryDirectory) throws -> [String: String] {
        var sums: [String: String] = [:]
        for (path, key) in try keys(of: card) {
            let download = dir.path + "/download-\(UUID().uuidString)"
            defer { unlink(download) }
            let got = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, download])
            guard got.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: got) }
            sums[path] = try xxh128sum(download)
        }
        return sums
    }

    func tags(of key: String) throws -> [String: String] {
        (try server.json(["s3api", "get-object-tagging", "--bucket", bucket, "--key", key])["TagSet"] as? [[String: String]] ?? [])
            .reduce(into: [String: String]()) { $0[$1["Key"]!] = $1["Value"] }
    }
}
