import Foundation
import Testing

@testable import IngestKit

@Suite struct KeyTemplateTests {
    private let fingerprint = Fingerprint(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF)
    /// 2024-03-05T23:59:59.5Z, in nanoseconds.
    private let mtime: Int64 = 1_709_683_199_500_000_000
    /// 2024-03-07T08:00:00Z.
    private let runDate = Date(timeIntervalSince1970: 1_709_798_400)

    private func context(
        device: String = "station-3", label: String = "DRONE", uuid: String? = "1B6E-2F0A",
        path: CardPath = CardPath("DCIM/100MEDIA/DJI_0001.JPG")
    ) -> KeyContext {
        KeyContext(
            device: device, label: label, fsUUID: uuid, cardID: "5e1f09a2", path: path, mtime: mtime, runDate: runDate,
            fingerprint: fingerprint)
    }

    // MARK: rendering

    @Test func theDefaultTemplateGroupsByDeviceDayAndCard() throws {
        let template = try KeyTemplate()
        #expect(template.prefix == "" && template.template == "{device}/{card_date}/{label}-{card_id}/{path}")
        var context = context()
        context.cardDate = Date(timeIntervalSince1970: 1_709_251_200)  // 2024-03-01, the card first seen
        #expect(try template.key(for: context) == "station-3/2024-03-01/DRONE-5e1f09a2/DCIM/100MEDIA/DJI_0001.JPG")
        context.cardDate = nil
        #expect(try template.key(for: context) == "station-3/2024-03-07/DRONE-5e1f09a2/DCIM/100MEDIA/DJI_0001.JPG", "the run's day")
    }

    /// One card, one folder: the default template puts every file of a card under the same
    /// prefix, where its ASC MHL history goes; a template that may spread a card has none.
    @Test func aTemplateOfCardFieldsBeforeAFinalPathGivesTheCardsFolder() throws {
        var context = context()
        context.cardDate = Date(timeIntervalSince1970: 1_709_251_200)
        #expect(try KeyTemplate().cardPrefix(for: context) == "station-3/2024-03-01/DRONE-5e1f09a2/")
        #expect(try KeyTemplate(prefix: "cards", template: "{uuid}/{card_id}/{path}").cardPrefix(for: context) == "cards/1B6E-2F0A/5e1f09a2/")
        for spreading in [
            "{device}/{date}/{card_id}/{path}", "{ingest_date}/{card_id}/{path}", "{card_id}/{name}", "{card_id}-{path}",
            "{card_id}/{path}/{xxh128}", "{path}", "{device}/{path}", "{uuid}/{path}",
        ] {
            #expect(try KeyTemplate(template: spreading).cardPrefix(for: context) == nil, "\(spreading)")
        }
    }

    @Test func everyFieldRenders() throws {
        let template = try KeyTemplate(
            prefix: "cards", template: "{device}/{ingest_date}/{date}/{uuid}/{card_id}/{label}/{xxh128}-{name}/{path}")
        #expect(template.prefix == "cards/")
        let expected =
            "cards/station-3/2024-03-07/2024-03-05/1B6E-2F0A/5e1f09a2/DRONE/" + fingerprint.hex
            + "-DJI_0001.JPG/DCIM/100MEDIA/DJI_0001.JPG"
        #expect(try template.key(for: context()) == expected)
        #expect(try template.key(for: context(uuid: nil)).contains("/no-uuid/"))
    }

    @Test func aPlainDirectoryIsLabelledByItsName() throws {
        let volume = VolumeIdentity(
            key: "path:/srv/incoming", rootPath: "/srv/incoming", mountPoint: nil, pathInFileSystem: "/srv/incoming",
            fsType: nil, device: nil)
        let file = ScannedFile(path: CardPath("a.jpg"), size: 1, mtime: mtime)
        let context = KeyContext(device: "host", volume: volume, file: file, fingerprint: fingerprint, runDate: runDate)
        #expect(context.label == "incoming" && context.fsUUID == nil)
        let cardID = KeyContext.cardID(volumeKey: "path:/srv/incoming")
        #expect(try KeyTemplate().key(for: context) == "host/2024-03-07/incoming-\(cardID)/a.jpg")
    }

    @Test func aWholeCardIsLabelledByItsLabelAndAFolderOfADiskByItsName() throws {
        let disk = BlockDevice(node: "/dev/vda1", udevProperties: ["ID_FS_LABEL": "rootfs", "ID_FS_UUID": "R00T"])
        let file = ScannedFile(path: CardPath("a.jpg"), size: 1, mtime: mtime)
        let folder = VolumeIdentity(
            key: "uuid:R00T/srv/incoming", rootPath: "/srv/incoming", mountPoint: "/", pathInFileSystem: "/srv/incoming",
            fsType: "ext4", device: disk)
        #expect(KeyContext(device: "h", volume: folder, file: file, fingerprint: fingerprint, runDate: runDate).label == "incoming")
        let card = VolumeIdentity(
            key: "uuid:R00T", rootPath: "/media/DRONE", mountPoint: "/media/DRONE", pathInFileSystem: "/", fsType: "vfat",
            device: BlockDevice(node: "/dev/sdb1", udevProperties: ["ID_FS_LABEL": "DRONE"]))
        #expect(KeyContext(device: "h", volume: card, file: file, fingerprint: fingerprint, runDate: runDate).label == "DRONE")
        var unlabelled = card
        unlabelled.device = BlockDevice(node: "/dev/sdb1", udevProperties: [:])
        #expect(KeyContext(device: "h", volume: unlabelled, file: file, fingerprint: fingerprint, runDate: runDate).label == "/dev/sdb1")
    }

    @Test func theCardIDIsEightHexDigitsOfTheVolumesKeyAndTellsCardsApart() throws {
        let first = KeyContext.cardID(volumeKey: "uuid:1b6e2f0a-0000-4000-8000-000000000001")
        let second = KeyContext.cardID(volumeKey: "uuid:1b6e2f0a-0000-4000-8000-000000000002")
        #expect(first.count == 8 && first.allSatisfy(\.isHexDigit))
        #expect(first != second)
        #expect(first == KeyContext.cardID(volumeKey: "uuid:1b6e2f0a-0000-4000-8000-000000000001"))
        // Its leading digits are the XXH3-128 of the key, as xxh128sum prints it.
        #expect(first == String(Fingerprint.of(Array("uuid:1b6e2f0a-0000-4000-8000-000000000001".utf8)).hex.prefix(8)))
    }

    @Test(
        arguments: [
            (0, "1970-01-01"),
            (-1, "1969-12-31"),
            (-1_000_000_000 * 86_400, "1969-12-31"),
            (-1_000_000_000 * 86_400 - 1, "1969-12-30"),
            (951_782_400_000_000_000, "2000-02-29"),
            (4_107_542_399_000_000_000, "2100-02-28"),
            (Int64.min, "1677-09-21"),
            (Int64.max, "2262-04-11"),
        ] as [(Int64, String)])
    func theDateIsTheUTCDayOfTheModificationTime(mtime: Int64, day: String) throws {
        var context = context()
        context.mtime = mtime
        #expect(try KeyTemplate(template: "{date}/{name}").key(for: context) == "\(day)/DJI_0001.JPG")
    }

    @Test func theDayFormatAgreesWithFoundation() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        for seconds in stride(from: Int64(-5_000_000_000), through: 10_000_000_000, by: 7_654_321) {
            let parts = calendar.dateComponents(
                [.year, .month, .day], from: Date(timeIntervalSince1970: Double(seconds)))
            let expected = String(format: "%04ld-%02ld-%02ld", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
            #expect(KeySegment.day(secondsSinceEpoch: seconds) == expected)
        }
    }

    @Test func aRunDateFarOutOfRangeDoesNotCrash() throws {
        var context = context()
        context.runDate = Date(timeIntervalSince1970: 1e300)
        #expect(try KeyTemplate(template: "{ingest_date}/{name}").key(for: context) == "9999-12-31/DJI_0001.JPG")
        context.runDate = Date(timeIntervalSince1970: -.infinity)
        #expect(try KeyTemplate(template: "{ingest_date}/{name}").key(for: context) == "0001-01-01/DJI_0001.JPG")
    }

    // MARK: sanitizing

    @Test(arguments: [
        (CardPath("../../etc/passwd"), "%2E%2E/%2E%2E/etc/passwd"),
        (CardPath("a//b"), "a/%/b"),
        (CardPath("./x"), "%2E/x"),
        (CardPath(".."), "%2E%2E"),
        (CardPath("/abs"), "%/abs"),
        (CardPath("dir/"), "dir/%"),
        (CardPath(""), "%"),
        (CardPath("line\nbreak\u{7F}.jpg"), "line%0Abreak%7F.jpg"),
        (CardPath("a_b.jpg"), "a_b.jpg"),
        (CardPath(bytes: Array("caf".utf8) + [0xE9] + Array(".jpg".utf8)), "caf%E9.jpg"),
        (CardPath(bytes: [0xFF, 0x2F, 0xC3]), "%FF/%C3"),
        (CardPath(bytes: [0xFF, 0xFE] + Array(".jpg".utf8)), "%FF%FE.jpg"),
        (CardPath("%FF%FE.jpg"), "%25FF%25FE.jpg"),
        (CardPath("x\\y.jpg"), "x%5Cy.jpg"),
        (CardPath("100% done/Été 📷.jpg"), "100%25 done/Été 📷.jpg"),
        (CardPath("..hidden/.config/..."), "..hidden/.config/..."),
    ])
    func pathSegmentsAreMadeSafe(path: CardPath, rendered: String) throws {
        #expect(try KeyTemplate(prefix: "p/", template: "{path}").key(for: context(path: path)) == "p/\(rendered)")
    }

    @Test(arguments: [
        ("DRONE/3", "DRONE%2F3"), ("..", "%2E%2E"), (".", "%2E"), ("", "%"), ("a\tb", "a%09b"), ("/", "%2F"),
    ])
    func singleSegmentFieldsNeverSplitOrStepUp(label: String, rendered: String) throws {
        #expect(
            try KeyTemplate(template: "{label}/{xxh128}").key(for: context(label: label))
                == "\(rendered)/\(fingerprint.hex)")
        #expect(
            try KeyTemplate(template: "{device}/{xxh128}").key(for: context(device: label))
                == "\(rendered)/\(fingerprint.hex)")
    }

    @Test func theNameFieldIsTheLastSegmentMadeSafe() throws {
        let path = CardPath(bytes: Array("DCIM/..".utf8))
        #expect(try KeyTemplate(template: "{name}").key(for: context(path: path)) == "%2E%2E")
    }

    @Test func hostileInputsNeverLeaveThePrefixOrMakeEmptyOrDotSegments() throws {
        let hostile: [[UInt8]] =
            [
                "../../etc/passwd", "a//b", "./x", "..", ".", "", "/", "//", "/..", "../", "a/../../b", "x/./y",
                ".../....",
                "name\nwith\rnewline", "tab\there", "%2E%2E", "\u{7F}", "a/\u{0}/b",
            ].map { Array($0.utf8) } + [
                [0xFF], [0x2E, 0xFF, 0x2E], [0x2E, 0x2E, 0x2F, 0xC0, 0xAF], [0xE2, 0x82], [0x2F, 0x2E, 0x2E, 0x2F],
            ]
        let labels = ["../x", "a/b", "..", ".", "", "/", "\n", "DRONE"]
        let templates = [
            KeyTemplate.defaultTemplate, "{path}", "{name}", "{label}-{name}", "x.{path}",
            "{uuid}/{device}/{xxh128}.{name}",
        ]
        for prefix in ["", "cards/", "a/b"] {
            for template in templates {
                let keys = try KeyTemplate(prefix: prefix, template: template)
                for path in hostile {
                    for label in labels {
                        let key = try keys.key(
                            for: context(device: label, label: label, uuid: label, path: CardPath(bytes: path)))
                        #expect(key.hasPrefix(keys.prefix))
                        #expect(!key.hasPrefix("/"))
                        let segments = key.split(separator: "/", omittingEmptySubsequences: false)
                        #expect(!segments.contains { $0.isEmpty || $0 == "." || $0 == ".." }, "\(key.debugDescription)")
                        #expect(
                            !key.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F },
                            "\(key.debugDescription)")
                    }
                }
            }
        }
    }

    /// Decodes a rendered segment back to bytes: `%XX` is byte XX, a lone `%` is nothing.
    private func decoded(_ segment: Substring) -> [UInt8] {
        if segment == "%" { return [] }
        var bytes: [UInt8] = []
        var rest = Array(segment.utf8)[...]
        while let first = rest.first {
            if first == UInt8(ascii: "%"), rest.count >= 3,
                let byte = UInt8(String(decoding: rest.dropFirst().prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(byte)
                rest = rest.dropFirst(3)
            } else {
                bytes.append(first)
                rest = rest.dropFirst()
            }
        }
        return bytes
    }

    @Test func theEscapingIsInjectiveSoTwoNamesNeverShareAKey() throws {
        let template = try KeyTemplate(template: "{path}")
        // The pairs the old escaping merged.
        let pairs: [([UInt8], [UInt8])] = [
            (Array("a\nb.jpg".utf8), Array("a_b.jpg".utf8)),
            ([0xFF, 0xFE] + Array(".jpg".utf8), Array("%FF%FE.jpg".utf8)),
            (Array("".utf8), Array("_".utf8)),
        ]
        for (first, second) in pairs {
            let one = try template.key(for: context(path: CardPath(bytes: first)))
            let other = try template.key(for: context(path: CardPath(bytes: second)))
            #expect(one != other, "\(one.debugDescription)")
        }
        // Every segment decodes back to its bytes: random names, hostile bytes included.
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = Array("aZ%_.~-2".utf8) + [0x00, 0x0A, 0x7F, 0xC3, 0xA9, 0xFF, 0xFE, 0xE2, 0x82, 0xAC, 0x80]
        // By bytes: Swift's String equality is canonical equivalence (U+2000 == U+2002), S3's is not.
        var seen: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...6, using: &generator)
            let name = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            let key = try template.key(for: context(path: CardPath(bytes: name)))
            #expect(decoded(Substring(key)) == name, "\(key.debugDescription)")
            if let earlier = seen[Array(key.utf8)] { #expect(earlier == name, "\(key.debugDescription)") }
            seen[Array(key.utf8)] = name
        }
    }

    @Test(arguments: [
        ("DCIM/100MEDIA/DJI_0001.JPG", "DCIM/100MEDIA/DJI_0001~FP.JPG"),
        ("a.b/c", "a.b/c~FP"),
        ("a/.hidden", "a/.hidden~FP"),
        ("clip.tar.gz", "clip.tar~FP.gz"),
        ("x", "x~FP"),
    ])
    func aTakenKeyGoesToItsAlternativeWithTheFingerprintBeforeTheExtension(key: String, alternative: String) throws {
        let expected = alternative.replacingOccurrences(of: "FP", with: fingerprint.hex)
        #expect(try KeyTemplate.alternativeKey(key, fingerprint: fingerprint) == expected)
    }

    @Test func anAlternativeKeyOverTheS3LimitIsAnError() throws {
        let key = String(repeating: "a", count: 1000)
        let error = try #require(throws: KeyTemplateError.self) {
            try KeyTemplate.alternativeKey(key, fingerprint: fingerprint)
        }
        #expect(error == .keyTooLong(path: key, bytes: 1033))
    }

    @Test(arguments: [("", ".ingest-write-probe"), ("cards", "cards/.ingest-write-probe")])
    func theWriteProbeLivesUnderThePrefix(prefix: String, key: String) {
        #expect(KeyTemplate.probeKey(prefix: prefix) == key)
    }

    @Test func aKeyOverTheS3LimitIsAnErrorForThatFile() throws {
        let template = try KeyTemplate(prefix: "cards/", template: "{path}")
        let fits = CardPath(String(repeating: "a", count: 1024 - 6))
        #expect(try template.key(for: context(path: fits)).utf8.count == 1024)
        let tooLong = CardPath(String(repeating: "a", count: 1024 - 5))
        let error = try #require(throws: KeyTemplateError.self) { try template.key(for: context(path: tooLong)) }
        #expect(error == .keyTooLong(path: tooLong.display, bytes: 1025))
        #expect(error.configKey == nil)
        #expect(error.description.contains("1024"))
    }

    // MARK: parsing

    @Test(arguments: [
        ("{device}/{dat}/{path}", "unknown field {dat}"),
        ("{}/{path}", "unknown field {}"),
        ("{device/{path}", "'{' without its '}'"),
        ("{device}}/{path}", "'}' without its '{'"),
        ("{path", "'{' without its '}'"),
        ("/{path}", "empty segment"),
        ("{device}//{path}", "empty segment"),
        ("{path}/", "empty segment"),
        ("a/../{path}", "'..' segment"),
        ("./{path}", "'.' segment"),
        ("a\nb/{path}", "control character U+000A"),
        ("{device}/{date}/{label}", "none of {path}, {name}, {xxh128}"),
    ])
    func aBadTemplateIsAnErrorNamingTheProblem(template: String, problem: String) throws {
        let error = try #require(throws: KeyTemplateError.self) { try KeyTemplate(template: template) }
        #expect(error.description.contains(problem), "\(error)")
        #expect(error.description.contains(template))
        #expect(error.configKey == "s3.key_template")
    }

    @Test(arguments: ["{name}", "{xxh128}", "{date}-{xxh128}.bin", "..{path}", "{path}.."])
    func aTemplateWithAFieldThatSeparatesFilesIsAccepted(template: String) throws {
        _ = try KeyTemplate(template: template)
    }

    @Test(arguments: [
        ("/cards", "starts with '/'"), ("cards//x", "empty segment"), ("cards/../x", "'..' segment"),
        ("./cards", "'.' segment"), ("cards//", "empty segment"), ("ca\trds", "control character"),
    ])
    func aBadPrefixIsAnErrorNamingTheProblem(prefix: String, problem: String) throws {
        let error = try #require(throws: KeyTemplateError.self) { try KeyTemplate(prefix: prefix) }
        #expect(error.description.contains(problem), "\(error)")
        #expect(error.configKey == "s3.prefix")
    }

    @Test(arguments: [("", ""), ("cards", "cards/"), ("cards/", "cards/"), ("a/b", "a/b/"), ("..x/", "..x/")])
    func thePrefixEndsWithASlashUnlessEmpty(prefix: String, normalized: String) throws {
        #expect(try KeyTemplate(prefix: prefix).prefix == normalized)
    }
}
