import Foundation
import Glibc
import IngestTestSupport
import Testing

/// A card's chain of custody and its verdict, end to end against a real SeaweedFS: the ASC
/// MHL history each run leaves in the card's folder, checked by the ASC's own tool
/// (`ascmhl diff`, `ascmhl create -h xxh128`) on what `aws s3 cp --recursive` downloads, and
/// by a parse of its XML (Python's ElementTree, ascmhl's C4) for what it lists; the history
/// after a kill -9 at each of its steps; and "safe to erase" in the run's summary, `status`
/// and the `on_card_done` hook, which says yes only once the last file is verified.
@Suite(.serialized)
final class CustodyTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }
    let dir = TemporaryDirectory()

    init() throws { server = try SeaweedFS() }

    /// The destination (`endpoint`: the server's, or a proxy's) in the configuration, so that
    /// `resume` and `status` need no arguments; parts of 5 MiB; a hook when given.
    func config(endpoint: String? = nil, hook: String? = nil) throws -> String {
        var text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            [s3]
            endpoint = "\(endpoint ?? server.endpoint)"
            bucket = "\(bucket)"
            stall_timeout = "5s"
            connect_timeout = "2s"
            [device]
            id = "station-7"

            """
        if let hook { text += "[hooks]\non_card_done = \"\(hook.replacingOccurrences(of: "\"", with: "\\\""))\"\n" }
        return try dir.write("ingest-\(UUID().uuidString).toml", Array(text.utf8))
    }

    /// `ingest ARGS --state-dir STATE --json` with the configuration and the server's credentials.
    func ingest(
        _ arguments: [String], state: TemporaryDirectory, config: String, json: Bool = true,
        environment extra: [String: String] = [:]
    ) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            arguments + ["--state-dir", state.path] + (json ? ["--json"] : []),
            environment: environment.merging(extra) { $1 }, timeout: 240)
    }

    /// The `card` objects of `ingest status --json`.
    func cards(state: TemporaryDirectory, config: String) throws -> [[String: Any]] {
        let status = try ingest(["status"], state: state, config: config)
        #expect(status.status == 0, "\(status.stderr)")
        return status.events("card")
    }

    /// Every object under `prefix`: key, ETag and modification time (what a rewrite changes).
    func listing(prefix: String = "") throws -> [String: String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix])["Contents"]
            as? [[String: Any]] ?? []
        var objects: [String: String] = [:]
        for object in listed {
            // The bucket's marker is no card's object.
            guard let key = object["Key"] as? String, !key.hasPrefix(".ingest/") else { continue }
            objects[key] = "\(object["ETag"] ?? "") \(object["LastModified"] ?? "")"
        }
        return objects
    }

    /// The card's folder in the bucket: the key of its file `relative` without that path.
    func folder(ofKey key: String, relative: String) throws -> String {
        try #require(key.hasSuffix("/" + relative), "\(key) is not the object of \(relative)")
        return String(key.dropLast(relative.count))
    }

    /// The names in `<folder>ascmhl/` in the bucket.
    func historyNames(_ folder: String) throws -> [String] {
        try listing(prefix: folder + "ascmhl/").keys.map { String($0.dropFirst(folder.count + "ascmhl/".count)) }.sorted()
    }

    /// `aws s3 cp --recursive` of the card's folder into a fresh directory.
    func download(_ folder: String) throws -> TemporaryDirectory {
        let into = TemporaryDirectory()
        let copied = try server.aws(["s3", "cp", "--recursive", "--quiet", "s3://\(bucket)/\(folder)", into.path])
        #expect(copied.status == 0, "\(copied.stderr)")
        return into
    }

    /// Runs the ASC's reference tool: its status and everything it printed.
    func ascmhl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try run(try TestVenv.tool("ascmhl"), arguments, timeout: 120)
        return (result.status, result.stdoutText + result.stderr)
    }

    /// What a downloaded `ascmhl/` holds, parsed by Python: the chain's generations (number,
    /// manifest name, recorded C4 and the C4 of the manifest as downloaded, by ascmhl's own
    /// hasher) and the paths each manifest lists.
    struct History {
        struct Link { var number: Int; var name: String; var c4: String; var actualC4: String? }
        var chain: [Link]
        var listed: [String: [String]]
    }

    func history(in downloaded: TemporaryDirectory) throws -> History {
        let script = """
            import json, os, sys, xml.etree.ElementTree as E
            from ascmhl.hasher import C4
            d = sys.argv[1]
            chain = []
            for h in E.parse(os.path.join(d, 'ascmhl_chain.xml')).getroot().iter('{urn:ASC:MHL:DIRECTORY:v2.0}hashlist'):
                name = h.find('{urn:ASC:MHL:DIRECTORY:v2.0}path').text
                c4 = h.find('{urn:ASC:MHL:DIRECTORY:v2.0}c4').text
                actual = None
                if os.path.exists(os.path.join(d, name)):
                    hasher = C4(); hasher.update(open(os.path.join(d, name), 'rb').read()); actual = hasher.string_digest()
                chain.append({'number': int(h.get('sequencenr')), 'name': name, 'c4': c4, 'actual': actual})
            listed = {}
            for name in os.listdir(d):
                if name.endswith('.mhl'):
                    root = E.parse(os.path.join(d, name)).getroot()
                    listed[name] = [h.find('{urn:ASC:MHL:v2.0}path').text for h in root.iter('{urn:ASC:MHL:v2.0}hash')]
            print(json.dumps({'chain': chain, 'listed': listed}))
            """
        let result = try run(try TestVenv.tool("python"), ["-c", script, downloaded.path + "/ascmhl"])
        guard result.status == 0 else { throw CommandFailed(command: "python (parse the ASC MHL history)", result: result) }
        let object = try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any])
        let chain = (object["chain"] as? [[String: Any]] ?? []).map {
            History.Link(
                number: ($0["number"] as? NSNumber)?.intValue ?? -1, name: $0["name"] as? String ?? "",
                c4: $0["c4"] as? String ?? "", actualC4: $0["actual"] as? String)
        }
        return History(chain: chain, listed: object["listed"] as? [String: [String]] ?? [:])
    }

    /// Downloads the card's folder and checks it as a client would: the files are the card's,
    /// byte for byte; `ascmhl diff` finds none missing or new; `ascmhl create -h xxh128`
    /// re-hashes every file against the history; the chain holds `generations` generations,
    /// numbered from 1, each the C4 of its manifest. Returns the parsed history.
    @discardableResult
    func checkDownload(
        _ folder: String, card: TemporaryDirectory, generations: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> History {
        let downloaded = try download(folder)
        let landed = try xxh128sums(under: downloaded.path).filter { !$0.key.starts(with: Array("ascmhl/".utf8)) }
        #expect(landed == (try xxh128sums(under: card.path)), "the folder holds the card's files", sourceLocation: sourceLocation)
        let history = try history(in: downloaded)
        #expect(history.chain.map(\.number) == Array(1...generations),
                "the chain's generations: \(history.chain.map(\.name))", sourceLocation: sourceLocation)
        for link in history.chain {
            #expect(link.actualC4 == link.c4, "generation \(link.number): \(link.name) is the manifest the chain names",
                    sourceLocation: sourceLocation)
        }
        #expect(Set(history.listed.keys) == Set(history.chain.map(\.name)), "every manifest downloaded is in the chain",
                sourceLocation: sourceLocation)
        let diff = try ascmhl(["diff", downloaded.path])
        #expect(diff.status == 0, "ascmhl diff: \(diff.output)", sourceLocation: sourceLocation)
        let create = try ascmhl(["create", "-h", "xxh128", downloaded.path])
        #expect(create.status == 0, "ascmhl create -h xxh128: \(create.output)", sourceLocation: sourceLocation)
        return history
    }

    // MARK: - Two runs, two chained generations, checked by the ASC's tool

    @Test(.timeLimit(.minutes(5)))
    func twoRunsOfACardGiveTwoChainedGenerationsThatTheASCToolVerifiesAndAReplacedObjectFailsIt() throws {
        let card = TemporaryDirectory()
        let photo = randomBytes(300_000)
        let oddName = "DCIM/100MEDIA/R&D <take 1> Café.JPG"
        _ = try card.write("DCIM/100MEDIA/DJI_0001.JPG", photo)
        _ = try card.write(oddName, randomBytes(200_001))
        _ = try card.write("DCIM/100MEDIA/copy of DJI_0001.JPG", photo)
        _ = try card.write("MISC/empty.log", [])
        _ = try card.write("notes.txt", Array("takeoff 12:03\n".utf8))
        let firstFiles: Set = ["DCIM/100MEDIA/DJI_0001.JPG", oddName, "DCIM/100MEDIA/copy of DJI_0001.JPG", "MISC/empty.log", "notes.txt"]
        let state = TemporaryDirectory()
        let config = try config()

        let first = try ingest([card.path], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.summary?.int("copied_in_bucket") == 1, "the duplicate is copied by the server")
        #expect(first.summary?.int("mhl_generations") == 1)
        #expect(first.summary?["safe_to_erase"] as? Bool == true, "\(first.summary?["not_safe_because"] ?? "")")
        let key = try #require(first.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("/DJI_0001.JPG") })
        let folder = try folder(ofKey: key, relative: "DCIM/100MEDIA/DJI_0001.JPG")
        #expect(folder.hasPrefix("station-7/"), "\(folder)")
        var names = try historyNames(folder)
        #expect(names.count == 2 && names.contains("ascmhl_chain.xml") && names.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".mhl") },
                "one generation and the chain: \(names)")
        let once = try checkDownload(folder, card: card, generations: 1)
        #expect(Set(once.listed.values.flatMap { $0 }) == firstFiles)
        #expect(once.listed.values.flatMap { $0 }.count == firstFiles.count, "each file listed once")

        // Files added between the runs: a clip, a name of its own kind, another duplicate.
        let secondFiles: Set = ["DCIM/101MEDIA/DJI_0002.MP4", "DCIM/101MEDIA/Ünïcode & <more> ü.txt", "DCIM/101MEDIA/again.JPG"]
        _ = try card.write("DCIM/101MEDIA/DJI_0002.MP4", randomBytes((6 << 20) + 3))
        _ = try card.write("DCIM/101MEDIA/Ünïcode & <more> ü.txt", Array("ä & < > \"\n".utf8))
        _ = try card.write("DCIM/101MEDIA/again.JPG", photo)

        let second = try ingest([card.path], state: state, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.summary?.int("mhl_generations") == 1)
        #expect(second.summary?.int("copied_in_bucket") == 1)
        #expect(second.summary?["safe_to_erase"] as? Bool == true, "\(second.summary?["not_safe_because"] ?? "")")
        let later = try #require(second.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("/DJI_0002.MP4") })
        #expect(try self.folder(ofKey: later, relative: "DCIM/101MEDIA/DJI_0002.MP4") == folder, "a later run lands beside the first")
        names = try historyNames(folder)
        #expect(names.filter { $0.hasSuffix(".mhl") }.count == 2 && names.contains("ascmhl_chain.xml") && names.count == 3, "\(names)")
        let card1 = try #require(try cards(state: state, config: config).first)
        #expect(card1.int("mhl_generations") == 2)
        #expect(card1["safe_to_erase"] as? Bool == true, "\(card1["reasons"] ?? "")")

        let twice = try checkDownload(folder, card: card, generations: 2)
        if twice.chain.count == 2 {
            #expect(twice.chain[0].name == once.chain.first?.name, "the first generation is kept as it was")
            #expect(twice.chain[0].c4 == once.chain.first?.c4)
            #expect(Set(twice.listed[twice.chain[0].name] ?? []) == firstFiles)
            #expect(Set(twice.listed[twice.chain[1].name] ?? []) == secondFiles, "the second lists only the files added")
        }

        // One object replaced by other bytes of the same size: the client's check names it.
        let oddKey = folder + oddName
        let stranger = try dir.write("stranger.jpg", randomBytes(200_001))
        let put = try server.aws(["s3api", "put-object", "--bucket", bucket, "--key", oddKey, "--body", stranger])
        #expect(put.status == 0, "\(put.stderr)")
        let tampered = try download(folder)
        let create = try ascmhl(["create", "-h", "xxh128", tampered.path])
        #expect(create.status != 0, "other bytes under a listed name must fail the check: \(create.output)")
        #expect(create.output.contains("R&D <take 1> Café.JPG"), "the failure names the file: \(create.output)")
        #expect(!create.output.contains("DJI_0001.JPG"), "and only that file: \(create.output)")
    }

    // MARK: - Two stations, one card, one history

    @Test(.timeLimit(.minutes(5)))
    func aSecondStationTakesInTheFirstStationsGenerationAndListsOnlyWhatItAdds() throws {
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/DJI_0001.JPG", randomBytes(120_000))
        _ = try card.write("DCIM/DJI_0002.JPG", randomBytes(90_000))
        let config = try config()
        let stationA = TemporaryDirectory(), stationB = TemporaryDirectory()

        let first = try ingest([card.path], state: stationA, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.summary?.int("mhl_generations") == 1)
        let key = try #require(first.events("uploaded").compactMap { $0.string("key") }.first { $0.hasSuffix("/DCIM/DJI_0001.JPG") })
        let folder = try folder(ofKey: key, relative: "DCIM/DJI_0001.JPG")

        // The card goes to the second station with a file more.
        _ = try card.write("DCIM/DJI_0003.JPG", randomBytes(70_000))
        let second = try ingest([card.path], state: stationB, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.summary?.int("mhl_generations") == 1, "one generation of its own: the file it added")
        #expect(second.summary?["safe_to_erase"] as? Bool == true, "\(second.summary?["not_safe_because"] ?? "")")
        let history = try checkDownload(folder, card: card, generations: 2)
        if history.chain.count == 2 {
            #expect(Set(history.listed[history.chain[0].name] ?? []) == ["DCIM/DJI_0001.JPG", "DCIM/DJI_0002.JPG"])
            #expect(history.listed[history.chain[1].name] == ["DCIM/DJI_0003.JPG"], "the second station lists only what it added")
        }
        #expect(try cards(state: stationB, config: config).first?.int("mhl_generations") == 2, "both generations are the card's")

        // Back at the first station, the card has nothing new for the history: it takes the
        // second generation in and writes none.
        let landed = try listing(prefix: folder + "ascmhl/")
        let again = try ingest([card.path], state: stationA, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.summary?.int("mhl_generations") == 0)
        #expect(again.summary?["safe_to_erase"] as? Bool == true, "\(again.summary?["not_safe_because"] ?? "")")
        #expect(try listing(prefix: folder + "ascmhl/") == landed, "the history in the bucket is left as it was")
        #expect(try cards(state: stationA, config: config).first?.int("mhl_generations") == 2)
        let custody = try FileManager.default.contentsOfDirectory(atPath: stationA.path + "/custody")
        let local = try xxh128sums(under: stationA.path + "/custody/" + (custody.first ?? "-") + "/ascmhl")
        let downloaded = try download(folder)  // held: the directory goes with it
        let inBucket = try xxh128sums(under: downloaded.path + "/ascmhl")
        #expect(local.count == 3 && local == inBucket, "the station's local history is the bucket's: \(local.count) files")
    }

    // MARK: - kill -9 between the last object and the history

    @Test(.timeLimit(.minutes(5)), arguments: ["mhl-journalled", "mhl-chain-uploaded"])
    func aKillWhileTheHistoryIsWrittenLeavesOneGenerationAfterResumeAndASecondResumeWritesNothing(point: String) throws {
        let card = TemporaryDirectory()
        let photo = randomBytes(100_000)
        _ = try card.write("DCIM/DJI_0001.JPG", photo)
        _ = try card.write("DCIM/DJI_0001 copy.JPG", photo)
        _ = try card.write("DCIM/R&D <1> é.JPG", randomBytes(70_000))
        _ = try card.write("MISC/empty.log", [])
        let state = TemporaryDirectory()
        let config = try config()

        let killed = try ingest([card.path], state: state, config: config, environment: ["INGEST_TEST_STOP_AT": point])
        #expect(killed.status == SIGKILL, "the run kills itself at \(point): \(killed.stderr)")
        let key = try #require(try listing().keys.first { $0.hasSuffix("/DCIM/DJI_0001.JPG") }, "the card's objects landed")
        let folder = try folder(ofKey: key, relative: "DCIM/DJI_0001.JPG")
        let before = try historyNames(folder)
        let chainBefore = try listing(prefix: folder + "ascmhl/ascmhl_chain.xml")
        if point == "mhl-journalled" {
            #expect(before.isEmpty, "nothing of the history is in the bucket yet: \(before)")
        } else {
            #expect(before == ["ascmhl_chain.xml"], "the chain, which claims the generation's number, not yet its manifest: \(before)")
        }
        let killedCard = try #require(try cards(state: state, config: config).first)
        #expect(killedCard["safe_to_erase"] as? Bool == false, "no history in the bucket yet: not safe")

        let resumed = try ingest(["resume"], state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.events("resume_summary").last?.int("mhl_generations") == 1, "\(resumed.result.stdoutText)")
        let names = try historyNames(folder)
        #expect(names.count == 2 && names.contains("ascmhl_chain.xml") && names.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".mhl") },
                "exactly one generation and the chain: \(names)")
        if point == "mhl-chain-uploaded" {
            #expect(try listing(prefix: folder + "ascmhl/ascmhl_chain.xml") == chainBefore, "the chain written before the kill stays as it was")
        }
        let history = try checkDownload(folder, card: card, generations: 1)
        #expect(Set(history.listed.values.flatMap { $0 }) == ["DCIM/DJI_0001.JPG", "DCIM/DJI_0001 copy.JPG", "DCIM/R&D <1> é.JPG", "MISC/empty.log"])
        let standing = try #require(try cards(state: state, config: config).first)
        #expect(standing["safe_to_erase"] as? Bool == true, "\(standing["reasons"] ?? "")")
        #expect(standing.int("mhl_generations") == 1)

        let landed = try listing()
        let again = try ingest(["resume"], state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.events("resume_summary").last?.int("mhl_generations") == 0)
        #expect(try listing() == landed, "a second resume writes nothing")
        #expect(try cards(state: state, config: config).first?.int("mhl_generations") == 1)

        // The station keeps the same history: its local copy is what the bucket holds.
        let custody = try FileManager.default.contentsOfDirectory(atPath: state.path + "/custody")
        #expect(custody.count == 1 && custody.allSatisfy { $0.hasSuffix("-" + bucket) }, "\(custody)")
        let local = try xxh128sums(under: state.path + "/custody/" + (custody.first ?? "-") + "/ascmhl")
        let downloaded = try download(folder)  // held: the directory goes with it
        let inBucket = try xxh128sums(under: downloaded.path + "/ascmhl")
        #expect(local.count == 2 && local == inBucket, "local \(local.count) files, bucket \(inBucket.count)")
    }

    @Test(.timeLimit(.minutes(5)))
    func aKillBetweenTheLastObjectsCompletionAndTheJournalLeavesOneGenerationAfterResume() throws {
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/clip.bin", randomBytes(1 << 20))
        let state = TemporaryDirectory()
        let config = try config()

        let killed = try ingest([card.path], state: state, config: config, environment: ["INGEST_TEST_STOP_AT": "after-complete"])
        #expect(killed.status == SIGKILL, "\(killed.stderr)")
        let key = try #require(try listing().keys.first { $0.hasSuffix("/DCIM/clip.bin") }, "the object completed")
        let folder = try folder(ofKey: key, relative: "DCIM/clip.bin")
        #expect(try historyNames(folder).isEmpty)

        let resumed = try ingest(["resume"], state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.events("resume_summary").last?.int("mhl_generations") == 1, "\(resumed.result.stdoutText)")
        let names = try historyNames(folder)
        #expect(names.count == 2 && names.contains("ascmhl_chain.xml") && names.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".mhl") },
                "exactly one generation and the chain: \(names)")
        let history = try checkDownload(folder, card: card, generations: 1)
        #expect(history.listed.values.flatMap { $0 } == ["DCIM/clip.bin"])
        let standing = try #require(try cards(state: state, config: config).first)
        #expect(standing.int("mhl_generations") == 1)
        #expect(standing["safe_to_erase"] as? Bool == true, "\(standing["reasons"] ?? "")")

        let landed = try listing()
        let again = try ingest(["resume"], state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try listing() == landed, "a second resume writes nothing")
    }

    // MARK: - Safe to erase

    @Test(.timeLimit(.minutes(5)))
    func safeToEraseTurnsYesOnlyOnceTheLastFileIsVerifiedAndNoOnceAFileChangesOnTheCard() throws {
        let card = TemporaryDirectory()
        for i in 1...4 { _ = try card.write("DCIM/IMG_\(1000 + i).JPG", randomBytes(10_000 * i)) }
        _ = try card.write("MISC/empty.log", [])
        let state = TemporaryDirectory()
        let out = dir.path + "/documents.ndjson"
        let config = try config(hook: "cat >> '\(out)'")
        func documents() throws -> [[String: Any]] {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        let staged = try ingest([card.path, "--no-upload"], state: state, config: config)
        #expect(staged.status == 0, "\(staged.stderr)")
        #expect(staged.summary?["safe_to_erase"] as? Bool == false, "staged is not in the bucket")
        let because = staged.summary?["not_safe_because"] as? [String] ?? []
        #expect(because.contains { $0.contains("not verified in the bucket") }, "\(because)")
        let volume = try #require(staged.events("volume").first?.string("key"))
        var standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == false)
        #expect(!(standing["reasons"] as? [String] ?? []).isEmpty)
        #expect(standing.int("files") == 5)
        var docs = try documents()
        #expect(docs.count == 1 && docs.first?["safe_to_erase"] as? Bool == false, "the hook's JSON: \(docs)")

        let uploaded = try ingest([card.path], state: state, config: config)
        #expect(uploaded.status == 0, "\(uploaded.stderr)")
        #expect(uploaded.summary?["safe_to_erase"] as? Bool == true, "\(uploaded.summary?["not_safe_because"] ?? "")")
        #expect((uploaded.summary?["not_safe_because"] as? [String])?.isEmpty == true)
        #expect(uploaded.summary?.int("mhl_generations") == 1)
        standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == true, "\(standing["reasons"] ?? "")")
        #expect((standing["reasons"] as? [String])?.isEmpty == true)
        #expect(standing.int("files_changed") == 0)
        docs = try documents()
        #expect(docs.count == 2, "\(docs)")
        #expect(docs.last?["safe_to_erase"] as? Bool == true, "the hook's JSON: \(docs)")
        #expect((docs.last?["not_safe_because"] as? [String])?.isEmpty == true)
        let text = try ingest(["status"], state: state, config: config, json: false)
        let line = text.result.stdoutText.split(separator: "\n").first { $0.contains(volume) }.map(String.init) ?? ""
        #expect(line.contains("safe to erase") && !line.contains("NOT safe"), "\(text.result.stdoutText)")
        // For people: the run's last words (the card again, nothing new on it).
        let human = try ingest([card.path], state: state, config: config, json: false)
        #expect(human.status == 0, "\(human.stderr)")
        let said = human.result.stdoutText + human.stderr
        #expect(said.contains("Card safe to erase") && !said.contains("NOT safe"), "\(said)")
        #expect(try documents().count == 3)

        // Another file in a file's place, with its size and time (`cp -p`, then a rename):
        // only the inode tells (the card is a directory on ext4, which keeps inode numbers).
        let replaced = shellQuoted(card.path + "/DCIM/IMG_1003.JPG")
        _ = try sh("cp -p \(replaced) \(replaced).new && mv \(replaced).new \(replaced)")
        standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == false, "a file replaced in place")
        #expect((standing["reasons"] as? [String] ?? []).contains { $0.contains("DCIM/IMG_1003.JPG") }, "\(standing["reasons"] ?? "")")
        let again = try ingest([card.path], state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.summary?["safe_to_erase"] as? Bool == true, "read again: \(again.summary?["not_safe_because"] ?? "")")
        #expect(try documents().count == 4)

        // The people at the station: a file changed on the card (its size), no ingest since.
        _ = try card.write("DCIM/IMG_1002.JPG", randomBytes(20_001))
        standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == false)
        #expect(standing.int("files_changed") == 1)
        #expect((standing["reasons"] as? [String] ?? []).contains { $0.contains("DCIM/IMG_1002.JPG") }, "\(standing["reasons"] ?? "")")
        let changed = try ingest(["status"], state: state, config: config, json: false)
        let changedLine = changed.result.stdoutText.split(separator: "\n").first { $0.contains(volume) }.map(String.init) ?? ""
        #expect(changedLine.contains("NOT safe to erase"), "\(changed.result.stdoutText)")
        #expect(try documents().count == 4, "status ran no ingest")

        // A file added to the card present, never ingested: the card is judged whole.
        _ = try ingest([card.path], state: state, config: config)
        _ = try card.write("DCIM/IMG_NEW.JPG", randomBytes(1_000))
        standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == false)
        #expect(standing.int("files_new") == 1)
        #expect((standing["reasons"] as? [String] ?? []).contains { $0.contains("never ingested: DCIM/IMG_NEW.JPG") })
    }

    @Test(.timeLimit(.minutes(5)))
    func aFolderTooDeepToEnterFailsTheRunAndTheCardIsNotSafeToErase() throws {
        let card = TemporaryDirectory()
        _ = try card.write("DCIM/IMG_0001.JPG", randomBytes(5_000))
        let deep = (0..<70).map { "d\($0)" }.joined(separator: "/")
        _ = try card.write(deep + "/buried.JPG", randomBytes(3_000))
        let state = TemporaryDirectory()
        let config = try config()

        let run = try ingest([card.path], state: state, config: config)
        #expect(run.status == 1, "a folder not ingested fails the run: \(run.stderr)")
        #expect(run.summary?["safe_to_erase"] as? Bool == false)
        #expect(run.summary?.int("not_ingested") == 1)
        let because = run.summary?["not_safe_because"] as? [String] ?? []
        #expect(because.first?.contains("not ingested") == true, "\(because)")
        let volume = try #require(run.events("volume").first?.string("key"))

        let standing = try #require(try cards(state: state, config: config).first { $0.string("volume") == volume })
        #expect(standing["safe_to_erase"] as? Bool == false)
        #expect(standing.int("not_ingested") == 1)
        let text = try ingest(["status"], state: state, config: config, json: false)
        #expect(text.status == 0, "\(text.stderr)")
        let line = text.result.stdoutText.split(separator: "\n").first { $0.contains(volume) }.map(String.init) ?? ""
        #expect(line.contains("NOT safe to erase") && line.contains("not ingested"), "\(text.result.stdoutText)")

        // For people: the run's last words say it too.
        let human = try ingest([card.path], state: state, config: config, json: false)
        #expect(human.status == 1, "\(human.stderr)")
        let said = human.result.stdoutText + human.stderr
        #expect(said.contains("Card NOT safe to erase: 1 folder of the card not ingested"), "\(said)")
    }

    // MARK: - Bytes sent once

    @Test(.timeLimit(.minutes(5)))
    func twoFilesOfTheSameBytesAndAnEmptyFileAreThreeObjectsWithTheBytesSentOnce() throws {
        let card = TemporaryDirectory()
        let bytes = randomBytes(2 << 20)
        _ = try card.write("DCIM/A.MP4", bytes)
        _ = try card.write("DCIM/B copy.MP4", bytes)
        _ = try card.write("MISC/empty.marker", [])
        let proxy = try FaultProxy(upstreamPort: server.s3Port)
        defer { proxy.stop() }
        let state = TemporaryDirectory()
        let config = try config(endpoint: proxy.endpoint)

        let run = try ingest([card.path], state: state, config: config)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.summary?.int("copied_in_bucket") == 1)
        #expect(run.summary?.int("uploaded_bytes") == 2 << 20, "the content's bytes sent once")
        let sent = try proxy.stats().bytesToUpstream
        #expect(sent >= 2 << 20 && sent < (2 << 20) + (256 << 10), "bytes through the proxy: \(sent)")

        let objects = try listing().keys.filter { !$0.contains("/ascmhl/") }
        #expect(objects.count == 3, "an object a file: \(objects.sorted())")
        let key = try #require(objects.first { $0.hasSuffix("/DCIM/A.MP4") })
        let folder = try folder(ofKey: key, relative: "DCIM/A.MP4")
        #expect(objects.allSatisfy { $0.hasPrefix(folder) }, "one card, one folder: \(objects.sorted())")
        let landed = try download(folder)
        let sums = try xxh128sums(under: landed.path).filter { !$0.key.starts(with: Array("ascmhl/".utf8)) }
        #expect(sums == (try xxh128sums(under: card.path)), "every object holds its file's bytes")
    }
}
