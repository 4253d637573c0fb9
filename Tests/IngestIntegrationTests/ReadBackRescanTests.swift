import Foundation
import IngestTestSupport
import Testing

/// The nightly read-back (`[rescan] read_back_bytes`) against a real SeaweedFS: every rescan
/// reads its budget of the recent cards' objects back, the ones read back longest ago first;
/// an object replaced by other bytes of the same size under a copy of its label (which a
/// `HEAD`, a listing's size and the label cannot tell) makes the rescan exit 76 naming the
/// card and the key, and its file goes to its alternative key, never over the other bytes
/// and never taken for its own by the copied label.
@Suite(.serialized)
final class ReadBackRescanTests {
    let server: SeaweedFS
    var bucket: String { server.bucket }

    init() throws { server = try SeaweedFS() }

    /// The bucket check off (its ETag comparison would find the replaced object first): the
    /// read-back alone looks at the bucket.
    func config(roots: [String], budget: String, in dir: TemporaryDirectory) throws -> String {
        try server.stationConfig(
            device: "station-7", smallParts: true,
            rescan: ["roots = \(tomlStrings(roots))", "bucket_check_days = 0", #"read_back_bytes = "\#(budget)""#], in: dir)
    }

    func ingest(_ arguments: [String], state: TemporaryDirectory, config: String) throws -> IngestRun {
        try server.ingest(arguments, state: state.path, config: config)
    }

    func objects(in dir: TemporaryDirectory) throws -> [String: String] { try server.landedObjects(downloadingInto: dir) }

    func readBack(_ run: IngestRun) throws -> [String: Any] { try #require(run.events("read_back").first) }

    @Test(.timeLimit(.minutes(5)))
    func theBudgetRotatesThroughTheObjectsAndOtherBytesUnderACopiedLabelFailTheRescanAndAreRepairedAside() throws {
        let dir = TemporaryDirectory()
        let cardDir = TemporaryDirectory()
        // A clip of two parts and two photos: 8 MiB + 3 and 2 x 1 MiB.
        let clip = try cardDir.write("DCIM/CLIP.MP4", randomBytes((8 << 20) + 3))
        let photos = try (1...2).map { try cardDir.write("DCIM/F\($0).JPG", randomBytes(1 << 20)) }
        let root = try realPath(cardDir.path)
        let state = TemporaryDirectory()
        // 9 MiB a night: the clip alone fits, or the two photos.
        let config = try config(roots: [root], budget: "9MiB", in: dir)

        let first = try ingest([root], state: state, config: config)
        #expect(first.status == 0, "\(first.stderr)")

        // Night 1: the oldest uploads first, until the next one does not fit the budget.
        let night1 = try ingest(["rescan"], state: state, config: config)
        #expect(night1.status == 0, "\(night1.stderr)")
        let read1 = try readBack(night1)
        #expect(read1.int("budget_bytes") == 9 << 20)
        #expect((read1["problems"] as? [Any])?.isEmpty == true)
        // Night 2: what night 1 did not read comes first; over two nights every byte is read.
        let night2 = try ingest(["rescan"], state: state, config: config)
        #expect(night2.status == 0, "\(night2.stderr)")
        let read2 = try readBack(night2)
        let total = (8 << 20) + 3 + 2 * (1 << 20)
        #expect(
            (read1.int("bytes") ?? 0) + (read2.int("bytes") ?? 0) == total,
            "two nights of 9 MiB cover the card's 10 MiB once: \(read1), \(read2)")
        #expect(read1.int("objects")! + read2.int("objects")! == 3)

        // Other bytes at a photo's key, with its label copied.
        let landed = try objects(in: dir)
        let photoKey = try #require(landed.keys.first { $0.hasSuffix("/DCIM/F2.JPG") })
        let photoSum = try xxh128sum(photos[1])
        let impostor = try dir.write("impostor.jpg", randomBytes(1 << 20))
        let put = try server.aws([
            "s3api", "put-object", "--bucket", bucket, "--key", photoKey, "--body", impostor, "--metadata", "xxh128=\(photoSum)",
        ])
        #expect(put.status == 0, "\(put.stderr)")

        // Night 3, with a budget for the whole card, reads the photo again, finds the other
        // bytes, exits 76 naming the card and the key, and the card's ingest sends the file
        // aside.
        let wholeCard = try self.config(roots: [root], budget: "1GiB", in: dir)
        let night3 = try ingest(["rescan"], state: state, config: wholeCard)
        #expect(night3.status == 76, "\(night3.stderr)")
        let found = try readBack(night3)["problems"] as? [String] ?? []
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.hasPrefix(photoKey + ": changed") == true, "\(found)")
        #expect(found.first?.contains("card ") == true && found.first?.contains("DCIM/F2.JPG") == true, "\(found)")
        let after = try objects(in: dir)
        #expect(after[photoKey] == (try xxh128sum(impostor)), "the other bytes are never replaced")
        let aside = after.filter { $0.key.contains("/DCIM/F2~\(photoSum)") }
        #expect(aside.count == 1 && aside.values.first == photoSum, "the file's own bytes at its alternative key: \(after.keys.sorted())")
        #expect(after.values.filter { $0 == (try? xxh128sum(clip)) }.count == 1)

        // The nights after read the new object back (never read back: first) and find nothing.
        let night4 = try ingest(["rescan"], state: state, config: wholeCard)
        #expect(try readBack(night4).int("objects") == 3)
        #expect(night4.status == 0, "\(night4.stderr)")
        #expect((try readBack(night4)["problems"] as? [Any])?.isEmpty == true)
        let status = try ingest(["status"], state: state, config: wholeCard)
        #expect(status.events("card").first?["safe_to_erase"] as? Bool == true, "\(status.events("card"))")
    }

    @Test(.timeLimit(.minutes(5)))
    func aBudgetOfOffReadsNothingBack() throws {
        let dir = TemporaryDirectory()
        let cardDir = TemporaryDirectory()
        _ = try cardDir.write("DCIM/F1.JPG", randomBytes(100_000))
        let root = try realPath(cardDir.path)
        let state = TemporaryDirectory()
        let config = try config(roots: [root], budget: "off", in: dir)
        #expect(try ingest([root], state: state, config: config).status == 0)
        let night = try ingest(["rescan"], state: state, config: config)
        #expect(night.status == 0, "\(night.stderr)")
        #expect(night.events("read_back").isEmpty, "no read-back event when it is off")
    }
}
