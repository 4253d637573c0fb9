import Foundation
import IngestTestSupport
import Testing

/// One key, one content: against a real SeaweedFS, no run ever replaces an object with other
/// bytes, whatever cards, names or journals meet at a key. What landed is counted by
/// downloading every object (`aws s3api`) and comparing `xxh128sum`s with the cards.
@Suite(.serialized)
final class NoReplaceTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    /// Small parts, so a few MiB make a multipart upload; `template` decides the keys.
    func config(template: String, in dir: TemporaryDirectory) throws -> String {
        let text = """
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            [s3]
            key_template = "\(template)"
            [device]
            id = "station-7"
            """
        return try dir.write("ingest.toml", Array(text.utf8))
    }

    func ingest(_ card: String, state: TemporaryDirectory, config: String) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(
            [card, "--endpoint", server.endpoint, "--bucket", bucket, "--state-dir", state.path, "--json"],
            environment: environment)
    }

    func resume(state: TemporaryDirectory, config: String) throws -> IngestRun {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        return try IngestRun.ingest(["resume", "--state-dir", state.path, "--json"], environment: environment)
    }

    /// Every object in the bucket, by key, with the `xxh128sum` of its downloaded bytes.
    func objects(in dir: TemporaryDirectory) throws -> [String: String] {
        let listed = try server.json(["s3api", "list-objects-v2", "--bucket", bucket])["Contents"] as? [[String: Any]] ?? []
        var sums: [String: String] = [:]
        for key in listed.compactMap({ $0["Key"] as? String }) where !key.hasPrefix(".ingest/") {
            let path = dir.path + "/download-\(UUID().uuidString)"
            let result = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, path])
            guard result.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: result) }
            sums[key] = try xxh128sum(path)
        }
        return sums
    }

    /// Two cards whose files meet at one key (the template leaves the card out, as a
    /// template without `{card_id}` or two cloned cards do): the second card's file goes to
    /// its alternative key, the first card's object is untouched, and both runs say so.
    @Test(.timeLimit(.minutes(5)), arguments: [1 << 20, (12 << 20) + 5])
    func aSecondCardAtTheSameKeyGoesToItsOwnKeyAndReplacesNothing(size: Int) throws {
        let dir = TemporaryDirectory()
        let (cardA, cardB) = (TemporaryDirectory(), TemporaryDirectory())
        let photoA = try cardA.write("DCIM/100MEDIA/DJI_0001.JPG", randomBytes(size))
        let photoB = try cardB.write("DCIM/100MEDIA/DJI_0001.JPG", randomBytes(size))
        let config = try config(template: "{device}/{path}", in: dir)

        let first = try ingest(cardA.path, state: TemporaryDirectory(), config: config)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try ingest(cardB.path, state: TemporaryDirectory(), config: config)
        #expect(second.status == 0, "\(second.stderr)")
        let taken = try #require(second.events("key_taken").first, "the second run says the key was taken")
        let sumA = try xxh128sum(photoA)
        let sumB = try xxh128sum(photoB)
        #expect(taken.string("key") == "station-7/DCIM/100MEDIA/DJI_0001.JPG")
        #expect(taken.string("found_xxh128") == sumA)
        #expect(taken.string("new_key") == "station-7/DCIM/100MEDIA/DJI_0001~\(sumB).JPG")

        #expect(try objects(in: dir) == [
            "station-7/DCIM/100MEDIA/DJI_0001.JPG": sumA,
            "station-7/DCIM/100MEDIA/DJI_0001~\(sumB).JPG": sumB,
        ])
        #expect(try server.openMultipartUploads(bucket: bucket).isEmpty)
    }

    /// By default two cards labelled alike, with the same folders, get keys of their own.
    @Test(.timeLimit(.minutes(5)))
    func theDefaultKeysOfTwoCardsLabelledAlikeDiffer() throws {
        let dir = TemporaryDirectory()
        let (cardA, cardB) = (TemporaryDirectory(), TemporaryDirectory())
        let photoA = try cardA.write("DCIM/DJI_0001.JPG", randomBytes(4096))
        let photoB = try cardB.write("DCIM/DJI_0001.JPG", randomBytes(4096))
        let config = try config(template: "{device}/{date}/{label}-{card_id}/{path}", in: dir)
        let state = TemporaryDirectory()
        for card in [cardA, cardB] {
            let run = try ingest(card.path, state: state, config: config)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.events("key_taken").isEmpty)
        }
        let sums = try objects(in: dir)
        #expect(sums.count == 2)
        #expect(Set(sums.values) == [try xxh128sum(photoA), try xxh128sum(photoB)])
    }

    /// Names the old escaping merged: a newline and `_`, the bytes ff fe and the text `%FF%FE`.
    @Test(.timeLimit(.minutes(5)))
    func namesThatLookAlikeOnOneCardGetAnObjectEach() throws {
        let dir = TemporaryDirectory()
        let card = TemporaryDirectory()
        let contents = (0..<4).map { _ in randomBytes(2048) }
        try card.write(rawName: Array("a\nb.jpg".utf8), contents[0])
        try card.write(rawName: Array("a_b.jpg".utf8), contents[1])
        try card.write(rawName: [0xFF, 0xFE] + Array(".jpg".utf8), contents[2])
        try card.write(rawName: Array("%FF%FE.jpg".utf8), contents[3])
        let config = try config(template: "{path}", in: dir)

        let run = try ingest(card.path, state: TemporaryDirectory(), config: config)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.events("uploaded").count == 4)
        var expected: [String: String] = [:]
        for (key, bytes) in zip(["a%0Ab.jpg", "a_b.jpg", "%FF%FE.jpg", "%25FF%25FE.jpg"], contents) {
            expected[key] = try xxh128sum(try dir.write("sums/\(UUID().uuidString)", bytes))
        }
        #expect(try objects(in: dir) == expected)
    }

    /// A content the bucket holds is not sent again: each later file of it is a copy the
    /// server makes at the file's own key, from the object looked at first. Gone from the
    /// bucket, or replaced behind ingest's back, the content is sent again (to its
    /// alternative key when another object holds its own), and the copy follows it.
    @Test(.timeLimit(.minutes(5)))
    func aKnownContentIsCopiedByTheServerFromTheObjectLookedAtFirst() throws {
        let dir = TemporaryDirectory()
        let photo = randomBytes(300_000)
        let cards = (0..<4).map { _ in TemporaryDirectory() }
        let sources = try cards.map { try $0.write("DCIM/P\(UUID().uuidString.prefix(4)).JPG", photo) }
        let sum = try xxh128sum(sources[0])
        let config = try config(template: "{device}/{path}", in: dir)
        let state = TemporaryDirectory()
        func keyOf(_ run: IngestRun) -> String? { run.events("uploaded").first?.string("key") }

        let first = try ingest(cards[0].path, state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")
        let key = try #require(keyOf(first))

        // Still there: the second card's file is copied to its own key, nothing is sent.
        let second = try ingest(cards[1].path, state: state, config: config)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.summary?.int("copied_in_bucket") == 1 && second.summary?.int("uploaded_bytes") == 0)
        let secondKey = try #require(keyOf(second))
        #expect(try objects(in: dir) == [key: sum, secondKey: sum])

        // Deleted behind ingest's back: the copy fails, the content's upload starts again, and
        // the next run sends it (from the staged copy the third card's run made) and copies.
        _ = try server.aws(["s3api", "delete-object", "--bucket", bucket, "--key", key])
        let third = try ingest(cards[2].path, state: state, config: config)
        #expect(third.status == 1, "\(third.stderr)")
        #expect(third.stderr.contains("gone from the bucket"), "\(third.stderr)")
        let resumed = try resume(state: state, config: config)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        var landed = try objects(in: dir)
        #expect(landed[key] == sum && landed.count == 3 && Set(landed.values) == [sum], "\(landed)")

        // Replaced by other bytes of the same size: never copied from, never replaced; the
        // content goes to its alternative key and the fourth card's file is copied from there.
        let other = try dir.write("other.bin", randomBytes(300_000))
        _ = try server.aws(["s3api", "put-object", "--bucket", bucket, "--key", key, "--body", other])
        let fourth = try ingest(cards[3].path, state: state, config: config)
        #expect(fourth.status == 1, "\(fourth.stderr)")
        let again = try resume(state: state, config: config)
        #expect(again.status == 0, "\(again.stderr)")
        landed = try objects(in: dir)
        #expect(landed[key] == (try xxh128sum(other)), "the other bytes stay")
        #expect(landed.count == 5 && landed.values.filter { $0 == sum }.count == 4, "\(landed)")
    }
}
