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
        try labels.add("device", "d", from: .deviceConfig)
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
