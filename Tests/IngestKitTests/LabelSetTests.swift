import Testing

@testable import IngestKit

@Suite struct LabelSetTests {
    // MARK: merging

    @Test func aKeyGivenTwoValuesIsAConflictNamingBothSources() throws {
        var labels = LabelSet()
        try labels.add("site", "north", from: .deviceConfig)
        let error = try #require(throws: LabelError.self) {
            try labels.add("site", "south", from: .sceneFile(path: "/media/sd/ingest-scene.toml"))
        }
        guard case .conflict(let existing, let new) = error else {
            Issue.record("not a conflict: \(error)")
            return
        }
        #expect(existing == Label(key: "site", bytes: Array("north".utf8), source: .deviceConfig))
        #expect(new.value == "south")
        #expect(new.source == .sceneFile(path: "/media/sd/ingest-scene.toml"))
        let message = error.description
        for part in [
            "'site'", "'north'", "'south'", "the config's [device] section",
            "the scene file /media/sd/ingest-scene.toml",
        ] {
            #expect(message.contains(part), "\(message) lacks \(part)")
        }
        #expect(labels["site"] == "north", "the first value stays")
    }

    @Test func theSameValueFromTwoSourcesIsFineAndKeepsTheFirstSource() throws {
        var labels = LabelSet()
        try labels.add("operator", "li", from: .commandLine)
        try labels.add("operator", "li", from: .sceneConfig)
        #expect(labels.entries.count == 1)
        #expect(labels.label("operator")?.source == .commandLine)
    }

    @Test func keysDifferingOnlyInCaseAreOneKey() throws {
        var labels = LabelSet()
        try labels.add("Site", "north", from: .deviceConfig)
        #expect(labels.label("SITE")?.key == "site")
        #expect(throws: LabelError.self) { try labels.add("sITe", "south", from: .commandLine) }
        try labels.add("SITE", "north", from: .commandLine)
        #expect(labels.entries.map(\.key) == ["site"])
    }

    @Test func aConflictWithinOneSourceSaysSo() throws {
        var labels = LabelSet()
        try labels.add("site", "a", from: .deviceConfig)
        let error = try #require(throws: LabelError.self) { try labels.add("Site", "b", from: .deviceConfig) }
        #expect(error.description.contains("given two values by the config's [device] section: 'a' and 'b'"))
    }

    @Test func valuesThatLookAlikeButDifferInBytesConflictAndTheMessageSaysWhy() throws {
        var labels = LabelSet()
        try labels.add("place", "Z\u{FC}rich", from: .deviceConfig)  // ü composed
        let error = try #require(throws: LabelError.self) {
            try labels.add("place", "Zu\u{308}rich", from: .commandLine)  // u + combining diaeresis
        }
        #expect(error.description.contains("differ only in how their accents are encoded"))
    }

    @Test func entriesAreSortedByKey() throws {
        var labels = LabelSet()
        try labels.add("scene", "x", from: .commandLine)
        try labels.add("device", "d", from: .deviceID)
        try labels.add("fs-uuid", "u", from: .cardIdentity)
        #expect(labels.entries.map(\.key) == ["device", "fs-uuid", "scene"])
    }

    // MARK: reserved keys

    @Test(arguments: ["xxh128", "original-name", "ORIGINAL-PATH"])
    func usersCannotSetAReservedKey(key: String) throws {
        var labels = LabelSet()
        let error = try #require(throws: LabelError.self) { try labels.add(key, "x", from: .commandLine) }
        #expect(error == .reserved(key: key.lowercased(), source: .commandLine))
        #expect(error.description.contains("reserved"))
        #expect(error.description.contains("the command line"))
    }

    @Test func ingestSetsReservedKeys() throws {
        var labels = LabelSet()
        try labels.add("xxh128", "00112233445566778899aabbccddeeff", from: .reserved)
        #expect(labels["xxh128"] == "00112233445566778899aabbccddeeff")
    }

    // MARK: key and value rules

    @Test(arguments: [
        ("", "is empty"),
        ("site name", "'U+0020'"),
        ("site:north", "':'"),
        ("café", "'é'"),
        (String(repeating: "k", count: 129), "more than 128"),
    ])
    func anInvalidKeyIsRefusedWithTheReason(key: String, reason: String) throws {
        var labels = LabelSet()
        let error = try #require(throws: LabelError.self) { try labels.add(key, "v", from: .deviceConfig) }
        guard case .invalidKey(let refused, let source, let problem) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(refused == key)
        #expect(source == .deviceConfig)
        #expect(problem.contains(reason), "\(problem)")
        #expect(error.description.contains("a-z, 0-9, '-', '_' and '.'"))
    }

    @Test func aKeyOf128CharactersWithDotsDashesAndUnderscoresIsAccepted() throws {
        var labels = LabelSet()
        let key = "a.b-c_d" + String(repeating: "9", count: 121)
        try labels.add(key, "v", from: .deviceConfig)
        #expect(labels[key] == "v")
    }

    @Test func theKelvinSignIsNotTakenForTheLetterK() throws {
        var labels = LabelSet()
        #expect(throws: LabelError.self) { try labels.add("\u{212A}ey", "v", from: .commandLine) }
    }

    @Test func anEmptyValueIsRefused() throws {
        var labels = LabelSet()
        let error = try #require(throws: LabelError.self) { try labels.add("site", "", from: .commandLine) }
        #expect(error == .emptyValue(key: "site", source: .commandLine))
        #expect(error.description.contains("empty value"))
    }

    @Test func sourcesDescribeWhereToLook() {
        #expect(LabelSource.commandLine.description.contains("--tag"))
        #expect(LabelSource.deviceConfig.description.contains("[device]"))
        #expect(
            LabelSource.sceneFile(path: "/media/sd/ingest-scene.toml").description
                == "the scene file /media/sd/ingest-scene.toml")
        #expect(LabelSource.cardIdentity.description == "the card's identity")
        #expect(LabelSource.reserved.description.contains("reserved"))
        #expect(!LabelSource.cardIdentity.isUserGiven && !LabelSource.reserved.isUserGiven)
        #expect(LabelSource.sceneConfig.isUserGiven && LabelSource.commandLine.isUserGiven)
    }
}

/// Control characters: a person's or a scene file's are refused; the card's identity's, which
/// no one can edit, are percent-escaped.
@Suite struct LabelControlCharacterTests {
    @Test(arguments: [LabelSource.deviceConfig, .sceneConfig, .commandLine, .sceneFile(path: "/c/ingest-scene.toml")])
    func aControlCharacterInAGivenValueIsAnErrorNamingTheKey(source: LabelSource) throws {
        for (value, shown) in [("a\u{0}b", "U+0000"), ("a\nb", "U+000A"), ("\u{1F}", "U+001F"), ("x\u{7F}", "U+007F")] {
            var labels = LabelSet()
            let error = try #require(throws: LabelError.self) { try labels.add("site", value, from: source) }
            #expect(error == .controlCharacter(key: "site", source: source, character: shown))
            #expect(error.description.contains("'site'") && error.description.contains(shown))
            #expect(labels.isEmpty)
        }
    }

    @Test func tabsAndOtherTextAreNotControlCharactersHere() throws {
        var labels = LabelSet()
        try labels.add("site", "rive gauche – été 100%", from: .commandLine)
        #expect(labels["site"] == "rive gauche – été 100%")
    }

    @Test func theCardsIdentityIsPercentEscapedNotRefused() throws {
        var labels = LabelSet()
        try labels.add("fs-label", "DRONE\u{0}\n\u{1B}[2J\u{7F}%41", from: .cardIdentity)
        #expect(labels["fs-label"] == "DRONE%00%0A%1B[2J%7F%41")
        let policy = try LabelPolicy()
        let card = try policy.cardLabels(card: CardLabels(fsLabel: "SD\tCARD", serial: "12\r34"), sceneFile: nil)
        #expect(card["fs-label"] == "SD%09CARD" && card["card-serial"] == "12%0D34")
        let object = try policy.objectLabels(base: card, path: CardPath("a.jpg"), fingerprint: Fingerprint(high: 1, low: 2))
        #expect(object.tags["fs-label"] == "SD_09CARD", "the tag repairs '%' as S3 tags require")
        #expect(object.metadata.contains { $0.name == "x-amz-meta-fs-label" && $0.value == "SD%09CARD" })
    }

    @Test func anInvalidKeyIsShownWithoutItsControlCharacters() throws {
        var labels = LabelSet()
        let error = try #require(throws: LabelError.self) { try labels.add("a\u{1B}[31m", "x", from: .commandLine) }
        #expect(!error.description.contains("\u{1B}"))
        #expect(error.description.contains("aU+001B[31m"))
    }
}
