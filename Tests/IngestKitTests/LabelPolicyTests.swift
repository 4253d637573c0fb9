import Foundation
import Testing

@testable import IngestKit

@Suite struct LabelPolicyTests {
    private let fingerprint = Fingerprint(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF)
    private let card = CardLabels(fsUUID: "1B6E-2F0A", fsLabel: "DRONE 3", serial: "0x1234")

    private func metadata(_ labels: ObjectLabels) -> [String: String] {
        Dictionary(uniqueKeysWithValues: labels.metadata.map { ($0.name, $0.value) })
    }

    // MARK: merging the layers

    @Test func everyLabelGoesIntoMetadataAndTheDefaultSelectionIntoTags() throws {
        let policy = try LabelPolicy(
            deviceID: "station-3", deviceTags: ["site": "river-km-12"],
            commandLine: Scene(name: "flood-survey-north", tags: ["operator": "li"]))
        let base = try policy.cardLabels(card: card, sceneFile: nil)
        let labels = try policy.objectLabels(
            base: base, path: CardPath("DCIM/100MEDIA/DJI_0001.JPG"), fingerprint: fingerprint)
        #expect(
            metadata(labels) == [
                "x-amz-meta-card-serial": "0x1234",
                "x-amz-meta-device": "station-3",
                "x-amz-meta-fs-label": "DRONE 3",
                "x-amz-meta-fs-uuid": "1B6E-2F0A",
                "x-amz-meta-operator": "li",
                "x-amz-meta-original-name": "DJI_0001.JPG",
                "x-amz-meta-original-path": "DCIM/100MEDIA/DJI_0001.JPG",
                "x-amz-meta-scene": "flood-survey-north",
                "x-amz-meta-site": "river-km-12",
                "x-amz-meta-xxh128": "00112233445566778899aabbccddeeff",
            ])
        #expect(labels.metadata.map(\.name) == labels.metadata.map(\.name).sorted(), "sorted by key")
        #expect(
            labels.tags == [
                "device": "station-3", "scene": "flood-survey-north", "fs-uuid": "1B6E-2F0A", "fs-label": "DRONE 3",
            ])
        #expect(labels.tagging == "device=station-3&fs-label=DRONE%203&fs-uuid=1B6E-2F0A&scene=flood-survey-north")
        #expect(labels.headers.last?.name == "x-amz-tagging")
        #expect(labels.headers.count == 11)
    }

    @Test func theSceneFileIsMergedWithTheCommandLineAndConflictsNameBoth() throws {
        let policy = try LabelPolicy(commandLine: Scene(name: "flood-survey-north", tags: ["operator": "li"]))
        let agreeing = SceneFile(
            path: "/media/sd/ingest-scene.toml", scene: Scene(name: "flood-survey-north", tags: ["site": "km-12"]))
        let base = try policy.cardLabels(card: CardLabels(), sceneFile: agreeing)
        #expect(base["site"] == "km-12" && base["operator"] == "li" && base["scene"] == "flood-survey-north")

        let disagreeing = SceneFile(path: "/media/sd/ingest-scene.toml", scene: Scene(name: "flood-survey-south"))
        let error = try #require(throws: LabelError.self) {
            try policy.cardLabels(card: CardLabels(), sceneFile: disagreeing)
        }
        #expect(error.description.contains("the scene file /media/sd/ingest-scene.toml"))
        #expect(error.description.contains("the command line"))
        #expect(
            error.description.contains("'flood-survey-north'") && error.description.contains("'flood-survey-south'"))
    }

    @Test func theDefaultSceneAppliesOnlyToACardWithoutSceneFileWhenTheCommandLineNamesNone() throws {
        let defaultScene = Scene(name: "routine", tags: ["purpose": "inspection"])
        let policy = try LabelPolicy(defaultScene: defaultScene)
        let plain = try policy.cardLabels(card: CardLabels(), sceneFile: nil)
        #expect(plain["scene"] == "routine" && plain["purpose"] == "inspection")
        #expect(plain.label("scene")?.source == .sceneConfig)

        let file = SceneFile(path: "/media/sd/ingest-scene.toml", scene: Scene(name: "flood"))
        let withFile = try policy.cardLabels(card: CardLabels(), sceneFile: file)
        #expect(withFile["scene"] == "flood" && withFile["purpose"] == nil)

        let named = try LabelPolicy(defaultScene: defaultScene, commandLine: Scene(name: "survey"))
        let overridden = try named.cardLabels(card: CardLabels(), sceneFile: nil)
        #expect(overridden["scene"] == "survey" && overridden["purpose"] == nil)
    }

    @Test func cardIdentityKeepsOnlyWhatUdevKnows() throws {
        let policy = try LabelPolicy()
        let base = try policy.cardLabels(
            card: CardLabels(fsUUID: "1B6E-2F0A", fsLabel: "", serial: nil), sceneFile: nil)
        #expect(base.entries.map(\.key) == ["fs-uuid"])
        #expect(base.label("fs-uuid")?.source == .cardIdentity)
    }

    @Test func aBlockDeviceGivesItsUUIDLabelAndSerial() {
        let device = BlockDevice(
            node: "/dev/sdb1",
            udevProperties: ["ID_FS_UUID": "1B6E-2F0A", "ID_FS_LABEL": "DRONE", "ID_SERIAL_SHORT": "0x1234"])
        #expect(CardLabels(device: device) == CardLabels(fsUUID: "1B6E-2F0A", fsLabel: "DRONE", serial: "0x1234"))
        #expect(CardLabels(device: nil) == CardLabels())
    }

    @Test func aUSBReadersVendorModelAndBusBecomeCardLabelsButNotTagsByDefault() throws {
        let device = BlockDevice(
            node: "/dev/sdb1",
            udevProperties: ["ID_FS_UUID": "1B6E-2F0A", "ID_VENDOR": "Generic", "ID_MODEL": "STORAGE_DEVICE", "ID_BUS": "usb"])
        let policy = try LabelPolicy(deviceID: "station-7")
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(device: device), sceneFile: nil), path: CardPath("DCIM/a.jpg"),
            fingerprint: Fingerprint.of(Array("a".utf8)))
        let metadata = Dictionary(uniqueKeysWithValues: labels.metadata.map { ($0.name, $0.value) })
        #expect(metadata["x-amz-meta-card-vendor"] == "Generic")
        #expect(metadata["x-amz-meta-card-model"] == "STORAGE_DEVICE")
        #expect(metadata["x-amz-meta-card-bus"] == "usb")
        #expect(labels.tags == ["device": "station-7", "fs-uuid": "1B6E-2F0A"])
    }

    @Test func theRunsOwnConflictsFailWhenThePolicyIsMade() throws {
        let error = try #require(throws: LabelError.self) {
            try LabelPolicy(deviceTags: ["site": "north"], commandLine: Scene(tags: ["site": "south"]))
        }
        #expect(
            error.description.contains("the config's [device] section")
                && error.description.contains("the command line"))
        #expect(throws: LabelError.self) {
            try LabelPolicy(deviceTags: ["site": "a"], defaultScene: Scene(tags: ["site": "b"]))
        }
        #expect(throws: LabelError.self) { try LabelPolicy(commandLine: Scene(tags: ["original-name": "x"])) }
    }

    /// `--tag device=evil` once labelled every object of a station without `[device] id` as
    /// coming from "evil" while its keys named the host: the station is named by its id only.
    @Test(arguments: [nil, "station-3"])
    func theDeviceLabelComesOnlyFromTheConfiguredID(deviceID: String?) throws {
        let evil = "evil-\(UInt32.random(in: 0...UInt32.max))"
        let attempts: [(LabelSource, () throws(LabelError) -> LabelPolicy)] = [
            (.commandLine, { () throws(LabelError) in try LabelPolicy(deviceID: deviceID, commandLine: Scene(tags: ["device": evil])) }),
            (.commandLine, { () throws(LabelError) in try LabelPolicy(deviceID: deviceID, commandLine: Scene(tags: ["Device": evil])) }),
            (.deviceConfig, { () throws(LabelError) in try LabelPolicy(deviceID: deviceID, deviceTags: ["device": evil]) }),
            (.sceneConfig, { () throws(LabelError) in try LabelPolicy(deviceID: deviceID, defaultScene: Scene(tags: ["device": evil])) }),
        ]
        for (source, attempt) in attempts {
            let error = try #require(throws: LabelError.self) { try attempt() }
            #expect(error == .notTheDevice(source: source))
            #expect(error.description.contains("only the config's [device] id sets it"), "\(error)")
            #expect(!error.description.contains(evil))
        }
        let policy = try LabelPolicy(deviceID: deviceID, commandLine: Scene(tags: ["site": "km-12"]))
        let labels = try policy.cardLabels(card: CardLabels(), sceneFile: nil)
        #expect(labels.label("device")?.source == deviceID.map { _ in .deviceID })
        #expect(labels["device"] == deviceID)
    }

    @Test func aUserTagCannotContradictTheCardsIdentity() throws {
        let policy = try LabelPolicy(deviceTags: ["fs-label": "MINE"])
        let error = try #require(throws: LabelError.self) { try policy.cardLabels(card: card, sceneFile: nil) }
        #expect(error.description.contains("the card's identity"))
    }

    // MARK: the tag selection

    @Test func theTagSelectionIsLowercasedDeduplicatedAndSkipsAbsentKeys() throws {
        let policy = try LabelPolicy(deviceID: "station-3", objectTagKeys: ["Device", "device", "site"])
        #expect(policy.objectTagKeys == ["device", "site"])
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: CardPath("a.jpg"),
            fingerprint: fingerprint)
        #expect(labels.tags == ["device": "station-3"])
    }

    @Test func moreThanTenTagKeysIsAnError() throws {
        let keys = (1...11).map { "k\($0)" }
        let error = try #require(throws: LabelError.self) { try LabelPolicy(objectTagKeys: keys) }
        #expect(error == .tooManyTagKeys(keys))
        #expect(error.description.contains("11 keys") && error.description.contains("allows 10"))
        _ = try LabelPolicy(objectTagKeys: Array(keys.prefix(10)))
    }

    @Test func anInvalidTagKeyIsAnError() throws {
        let error = try #require(throws: LabelError.self) { try LabelPolicy(objectTagKeys: ["fs uuid"]) }
        guard case .invalidTagKey(key: "fs uuid", _) = error else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func noTagsMeansNoTaggingHeader() throws {
        let policy = try LabelPolicy(objectTagKeys: [])
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: card, sceneFile: nil), path: CardPath("a.jpg"), fingerprint: fingerprint)
        #expect(labels.tagging == nil && labels.tags.isEmpty)
        #expect(!labels.headers.contains { $0.name == "x-amz-tagging" })
    }

    @Test func reservedKeysCanBeTagsAndAreRepairedNotRefused() throws {
        let policy = try LabelPolicy(objectTagKeys: ["original-name", "xxh128"])
        let path = CardPath("DCIM/photo (1)!.jpg")
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: path, fingerprint: fingerprint)
        #expect(labels.tags == ["original-name": "photo _1__.jpg", "xxh128": fingerprint.hex])
        #expect(metadata(labels)["x-amz-meta-original-name"] == "photo (1)!.jpg")
    }

    // MARK: tag value rules

    @Test func aCardValueThatBreaksTagRulesIsRepairedInTheTagOnly() throws {
        let policy = try LabelPolicy()
        let odd = CardLabels(fsUUID: "1B6E-2F0A", fsLabel: "Ü#BER*CAM", serial: "S/N\u{1}")
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: odd, sceneFile: nil), path: CardPath("a.jpg"), fingerprint: fingerprint)
        #expect(labels.tags["fs-label"] == "Ü_BER_CAM")
        #expect(MetadataEncoding.decode(metadata(labels)["x-amz-meta-fs-label"] ?? "") == "Ü#BER*CAM")
        // A control character udev reports is percent-escaped (the card still ingests), then repaired in the tag.
        #expect(MetadataEncoding.decode(metadata(labels)["x-amz-meta-card-serial"] ?? "") == "S/N%01")
    }

    @Test func aLongCardValueIsCutInTheTagOnly() throws {
        let policy = try LabelPolicy()
        let long = String(repeating: "L", count: 300)
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(fsLabel: long), sceneFile: nil), path: CardPath("a"),
            fingerprint: fingerprint)
        #expect(labels.tags["fs-label"] == String(repeating: "L", count: 256))
        #expect(metadata(labels)["x-amz-meta-fs-label"] == long)
    }

    @Test func aUserValueWithCharactersTagsRefuseIsAnErrorNamingThem() throws {
        let error = try #require(throws: LabelError.self) {
            try LabelPolicy(commandLine: Scene(name: "flood, north!"))
        }
        guard case .tagCharacters(let label, let characters) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(label.key == "scene" && label.source == .commandLine)
        #expect(characters == ["','", "'!'"])
        #expect(error.description.contains("remove 'scene' from the object tag keys"))
    }

    @Test func aUserValueThatIsNotATagMayHoldAnyCharacterButControlCharacters() throws {
        let policy = try LabelPolicy(commandLine: Scene(tags: ["note": " wet lens, re-fly! \u{2028}demain 😀 "]))
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: CardPath("a"),
            fingerprint: fingerprint)
        #expect(MetadataEncoding.decode(metadata(labels)["x-amz-meta-note"] ?? "") == " wet lens, re-fly! \u{2028}demain 😀 ")
        #expect(throws: LabelError.controlCharacter(key: "note", source: .commandLine, character: "U+0009")) {
            try LabelPolicy(commandLine: Scene(tags: ["note": "wet lens\ttomorrow"]))
        }
    }

    @Test func aUserTagValueOver256CharactersIsAnError() throws {
        _ = try LabelPolicy(deviceID: String(repeating: "d", count: 256))
        let error = try #require(throws: LabelError.self) {
            try LabelPolicy(deviceID: String(repeating: "d", count: 257))
        }
        guard case .tagValueTooLong(_, length: 257) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(error.description.contains("256"))
    }

    @Test func aUserTagFromTheSceneFileIsCheckedWithTheCard() throws {
        let policy = try LabelPolicy(objectTagKeys: ["site"])
        let file = SceneFile(path: "/media/sd/ingest-scene.toml", scene: Scene(tags: ["site": "km#12"]))
        let error = try #require(throws: LabelError.self) { try policy.cardLabels(card: CardLabels(), sceneFile: file) }
        #expect(
            error.description.contains("the scene file /media/sd/ingest-scene.toml")
                && error.description.contains("'#'"))
    }

    @Test func unicodeLettersDigitsSpacesAndTheListedSymbolsAreAllowedInTags() throws {
        let value = "Zürich 東京 ١٢٣ a+b-c=d.e_f:g/h@i"
        let policy = try LabelPolicy(commandLine: Scene(name: value))
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: CardPath("a"),
            fingerprint: fingerprint)
        #expect(labels.tags["scene"] == value)
        #expect(labels.tagging == "scene=" + S3Encoding.percentEncoded(value))
    }

    @Test func aDecomposedAccentIsComposedForTheTagAndKeptExactInMetadata() throws {
        let decomposed = "Zu\u{308}rich"
        let policy = try LabelPolicy(commandLine: Scene(name: decomposed))
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: CardPath("a"),
            fingerprint: fingerprint)
        #expect(labels.tags["scene"]?.unicodeScalars.map(\.value) == "Z\u{FC}rich".unicodeScalars.map(\.value))
        #expect(MetadataEncoding.decodeBytes(metadata(labels)["x-amz-meta-scene"] ?? "") == Array(decomposed.utf8))
    }

    // MARK: names that are not UTF-8

    @Test func aNameThatIsNotUTF8TravelsLosslesslyInMetadata() throws {
        let policy = try LabelPolicy(objectTagKeys: ["original-name"])
        let path = CardPath(bytes: Array("DCIM/caf".utf8) + [0xE9] + Array(".jpg".utf8))
        let labels = try policy.objectLabels(
            base: try policy.cardLabels(card: CardLabels(), sceneFile: nil), path: path, fingerprint: fingerprint)
        let sent = metadata(labels)
        let pathValue = try #require(sent["x-amz-meta-original-path"])
        #expect(pathValue.hasPrefix("=?UNKNOWN-8BIT?B?"))
        #expect(MetadataEncoding.decodeBytes(pathValue) == path.bytes)
        #expect(MetadataEncoding.decode(pathValue) == path.display)
        #expect(MetadataEncoding.decodeBytes(sent["x-amz-meta-original-name"] ?? "") == Array(path.name))
        #expect(labels.tags["original-name"] == "caf_xE9.jpg")
    }

    // MARK: the metadata limit

    @Test func metadataOver2KBIsAnErrorNamingTheFileAndTheLargestLabel() throws {
        let policy = try LabelPolicy()
        let base = try policy.cardLabels(card: CardLabels(), sceneFile: nil)
        // xxh128 (6 + 32), original-name (13 + n), original-path (13 + n): 64 + 2n bytes.
        let fits = CardPath(String(repeating: "n", count: (2048 - 64) / 2))
        #expect(try policy.objectLabels(base: base, path: fits, fingerprint: fingerprint).metadataBytes == 2048)
        let tooLong = CardPath(String(repeating: "n", count: (2048 - 64) / 2 + 1))
        let error = try #require(throws: LabelError.self) {
            try policy.objectLabels(base: base, path: tooLong, fingerprint: fingerprint)
        }
        guard case .metadataTooLarge(let path, let bytes, let fileBytes, let largest, _) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(path == tooLong.display && bytes == 2050 && fileBytes == 2050 && largest == nil)
        #expect(error.description.contains("2048") && error.description.contains("shorter path"))
    }

    /// The budget the early check leaves is what a file's own labels get: shared labels of
    /// exactly 1,536 bytes pass it, and then a file whose name and path take their 448 bytes
    /// still uploads; one byte more of either fails, the first at the check, the second for
    /// that file only.
    @Test func whatPassesTheEarlyCheckNeverFailsLaterForSize() throws {
        // scene (5 + 1) + note (4 + n) = 1536
        let note = String(repeating: "n", count: LabelPolicy.sharedMetadataBytes - 10)
        let policy = try LabelPolicy(commandLine: Scene(name: "s", tags: ["note": note]), objectTagKeys: [])
        let base = try policy.cardLabels(card: CardLabels(), sceneFile: nil)
        // A file at the card's root: its name is its path, 224 bytes each, 448 in all.
        let longest = CardPath(String(repeating: "p", count: 224))
        let labels = try policy.objectLabels(base: base, path: longest, fingerprint: fingerprint)
        #expect(labels.metadataBytes == ObjectLabels.maximumMetadataBytes)

        #expect(throws: LabelError.self) {
            try LabelPolicy(commandLine: Scene(name: "s", tags: ["note": note + "n"]), objectTagKeys: [])
        }
        let longer = CardPath(String(repeating: "p", count: 225))
        let error = try #require(throws: LabelError.self) {
            try policy.objectLabels(base: base, path: longer, fingerprint: fingerprint)
        }
        guard case .metadataTooLarge(_, _, let fileBytes, let largest, _) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(fileBytes == LabelPolicy.fileMetadataBytes + 2)
        #expect(largest?.key == "note", "the user's label is named, not xxh128: \(error)")
        #expect(error.description.contains("'note' from the command line"))
    }

    @Test func labelsTooLargeForTheMetadataAreRefusedWhenThePolicyIsMadeNamingTheUsersLabel() throws {
        let note = String(repeating: "x", count: 10 * 1024)
        let error = try #require(throws: LabelError.self) {
            try LabelPolicy(deviceID: "station-7", commandLine: Scene(name: "survey", tags: ["note": note, "site": "km-12"]))
        }
        guard case .sharedLabelsTooLarge(let bytes, let count, _, let largest, let largestBytes) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(count == 4 && largest.key == "note" && largest.source == .commandLine)
        #expect(largestBytes == 4 + 10 * 1024 && bytes > largestBytes)
        #expect(error.description.contains("the largest is 'note' from the command line"), "\(error)")
        #expect(error.description.contains("1536") && error.description.contains("2048"))
        #expect(!error.description.contains("xxh128") && !error.description.contains(note), "\(error)")
    }

    @Test func aSceneFileWithThousandsOfKeysIsRefusedWithTheCardNamingTheFile() throws {
        let policy = try LabelPolicy(deviceID: "station-7")
        var tags: [String: String] = [:]
        for index in 0..<7000 { tags["k\(index)"] = "v" }
        let path = "/media/sd/ingest-scene.toml"
        let error = try #require(throws: LabelError.self) {
            try policy.cardLabels(card: CardLabels(fsUUID: "1B6E-2F0A"), sceneFile: SceneFile(path: path, scene: Scene(tags: tags)))
        }
        guard case .sharedLabelsTooLarge(_, let count, let heaviest, let largest, _) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(count == 7002 && heaviest.source == .sceneFile(path: path) && heaviest.count == 7000)
        // Every scene label is 5 or 6 bytes; the largest a person gave is the device id.
        #expect(largest.key == "device" && largest.source == .deviceID)
        #expect(error.description.contains("Most of the bytes come from the scene file \(path) (7000 labels"), "\(error)")
    }

    @Test func theMetadataLimitCountsEncodedValuesInTheEarlyCheckToo() throws {
        // Not ASCII, so sent as an encoded word, base64 taking a third more: 1,200 bytes of
        // UTF-8 fit in the 1,536 a card's labels may take, their 1,612 as sent do not.
        let value = String(repeating: "é", count: 600)
        #expect(value.utf8.count + 4 < LabelPolicy.sharedMetadataBytes)
        #expect(MetadataEncoding.encode(value).utf8.count == 1612)
        let error = try #require(throws: LabelError.self) { try LabelPolicy(commandLine: Scene(tags: ["note": value])) }
        #expect(error.description.contains("take 1616 bytes"), "\(error)")
    }

    @Test func theMetadataLimitCountsEncodedValues() throws {
        let policy = try LabelPolicy()
        let base = try policy.cardLabels(card: CardLabels(), sceneFile: nil)
        let labels = try policy.objectLabels(base: base, path: CardPath("é"), fingerprint: fingerprint)
        let encoded = MetadataEncoding.encode("é")
        #expect(labels.metadataBytes == 6 + 32 + 2 * 13 + 2 * encoded.utf8.count)
    }
}
