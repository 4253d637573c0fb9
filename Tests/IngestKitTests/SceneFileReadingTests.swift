import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// `ingest-scene.toml` is card data: read like any card file (no links, no FIFOs, no devices,
/// bounded), and never quoted back in an error.
@Suite struct SceneFileReadingTests {
    /// The problem `SceneFile.read` reports for the card at `root`, after checking that the
    /// error names the file and holds none of `secrets`.
    private func problem(_ root: String, secrets: [String] = []) throws -> String {
        let error = try #require(throws: LabelError.self) { try SceneFile.read(cardRoot: root) }
        guard case .sceneFile(let file, let problem) = error else {
            Issue.record("not a scene file error: \(error)")
            return ""
        }
        #expect(file == root + "/ingest-scene.toml")
        #expect(error.description.contains(root + "/ingest-scene.toml"))
        for secret in secrets { #expect(!error.description.contains(secret), "the message quotes '\(secret)'") }
        return problem
    }

    @Test func aCardWithoutASceneFileHasNone() throws {
        let card = TemporaryDirectory()
        #expect(try SceneFile.read(cardRoot: card.path) == nil)
    }

    @Test func aRegularSceneFileIsReadAndParsed() throws {
        let card = TemporaryDirectory()
        try card.write("ingest-scene.toml", Array("scene = \"survey\"\n[tags]\nsite = \"km-12\"\n".utf8))
        let file = try #require(try SceneFile.read(cardRoot: card.path))
        #expect(file.scene == Scene(name: "survey", tags: ["site": "km-12"]))
        #expect(file.path == card.path + "/ingest-scene.toml")
    }

    @Test func aSymlinkIsRefusedEvenToAFileThatWouldParse() throws {
        let card = TemporaryDirectory(), host = TemporaryDirectory()
        let target = try host.write("host.toml", Array("scene = \"host-secret-value\"\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: card.path + "/ingest-scene.toml", withDestinationPath: target)
        let problem = try problem(card.path, secrets: ["host-secret-value", target])
        #expect(problem.contains("symbolic link"), "\(problem)")
    }

    @Test func aSymlinkToDevZeroIsRefusedWithoutReadingIt() throws {
        let card = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: card.path + "/ingest-scene.toml", withDestinationPath: "/dev/zero")
        #expect(try problem(card.path).contains("symbolic link"))
    }

    @Test func aFIFOIsRefusedAtOnceWithoutWaitingForAWriter() throws {
        let card = TemporaryDirectory()
        #expect(mkfifo(card.path + "/ingest-scene.toml", 0o644) == 0)
        let started = Date()
        #expect(try problem(card.path).contains("FIFO"))
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func aDeviceNodeIsRefusedWithoutOpeningIt() throws {
        let card = TemporaryDirectory()
        // /dev/null's numbers (1, 3): harmless even if it were opened, which it is not.
        guard mknod(card.path + "/ingest-scene.toml", S_IFCHR | 0o644, dev_t((1 << 8) | 3)) == 0 else {
            Issue.record("mknod needs root: \(String(cString: strerror(errno)))")
            return
        }
        #expect(try problem(card.path).contains("device node"))
    }

    @Test func aDirectoryIsRefused() throws {
        let card = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: card.path + "/ingest-scene.toml", withIntermediateDirectories: false)
        #expect(try problem(card.path).contains("directory"))
    }

    @Test func aFileOf64KiBIsReadAndOneByteMoreIsRefused() throws {
        let card = TemporaryDirectory()
        let line = "scene = \"long\"\n"
        let padding = String(repeating: "#", count: SceneFile.maximumBytes - line.utf8.count - 1) + "\n"
        try card.write("ingest-scene.toml", Array((line + padding).utf8))
        #expect(try SceneFile.read(cardRoot: card.path)?.scene.name == "long")

        try card.write("ingest-scene.toml", Array((line + "#" + padding).utf8))
        let problem = try problem(card.path, secrets: ["long"])
        #expect(problem.contains("larger than 64 KiB"), "\(problem)")
    }

    @Test func aFileThatIsNotUTF8IsRefused() throws {
        let card = TemporaryDirectory()
        try card.write("ingest-scene.toml", Array("scene = \"caf".utf8) + [0xE9] + Array("\"\n".utf8))
        #expect(try problem(card.path, secrets: ["caf"]).contains("not UTF-8"))
    }
}

/// What a scene file may say: its scene, never the station, and no control characters.
@Suite struct SceneFileContentTests {
    private let path = "/media/sd/ingest-scene.toml"

    private func cardLabelsError(_ text: String, policy: LabelPolicy? = nil) throws -> LabelError {
        let file = try SceneFile.parse(text, path: path)
        let policy = try policy ?? LabelPolicy()
        return try #require(throws: LabelError.self) { try policy.cardLabels(card: CardLabels(), sceneFile: file) }
    }

    private func parseError(_ text: String) throws -> LabelError {
        try #require(throws: LabelError.self) { try SceneFile.parse(text, path: path) }
    }

    @Test(arguments: [nil, "station-7"])
    func aSceneFileCannotSetTheDeviceWithOrWithoutAConfiguredID(deviceID: String?) throws {
        let error = try cardLabelsError("[tags]\ndevice = \"rogue-station\"\n", policy: try LabelPolicy(deviceID: deviceID))
        #expect(error == .notTheScene(key: "device", source: .sceneFile(path: path)))
        #expect(error.description.contains("'device'"))
        #expect(!error.description.contains("rogue-station"))
    }

    @Test(arguments: ["fs-uuid", "FS-Label", "card-serial", "card-vendor", "card-model", "card-bus"])
    func aSceneFileCannotSetTheCardsIdentity(key: String) throws {
        let error = try cardLabelsError("[tags]\n\(key) = \"forged\"\n")
        #expect(error == .notTheScene(key: key.lowercased(), source: .sceneFile(path: path)))
    }

    @Test(arguments: ["xxh128", "original-name", "original-path"])
    func aSceneFileCannotSetAReservedLabel(key: String) throws {
        let error = try cardLabelsError("[tags]\n\(key) = \"forged\"\n")
        #expect(error == .reserved(key: key, source: .sceneFile(path: path)))
    }

    @Test func theCommandLineAndConfigMayStillSetTheirOwnLabels() throws {
        let policy = try LabelPolicy(deviceID: "station-7", commandLine: Scene(tags: ["operator": "li"]))
        let labels = try policy.cardLabels(
            card: CardLabels(fsUUID: "1B6E-2F0A"), sceneFile: try SceneFile.parse("scene = \"survey\"", path: path))
        #expect(labels["device"] == "station-7" && labels["fs-uuid"] == "1B6E-2F0A" && labels["scene"] == "survey")
    }

    @Test func anEscapedNULInAValueIsAnErrorNamingTheKeyNotATruncatedValue() throws {
        let error = try parseError("[tags]\nsite = \"north\\u0000evil\"\n")
        #expect(error.description.contains("'tags.site'"), "\(error)")
        #expect(error.description.contains("U+0000"))
        #expect(!error.description.contains("north") && !error.description.contains("evil"))
        let scene = try parseError("scene = \"a\\u0000b\"")
        #expect(scene.description.contains("'scene'"), "\(scene)")
    }

    @Test func anEscapedNULInAKeyIsAnError() throws {
        let error = try parseError("[tags]\n\"si\\u0000te\" = \"x\"\n")
        #expect(error.description.contains("U+0000"), "\(error)")
    }

    @Test func aRawNULIsAnErrorNamingLineColumnAndKeyNotADocumentCutShort() throws {
        // The parser gets the text as a C string: it would see the file up to the NUL only.
        let error = try parseError("[tags]\nsite = \"north\u{0}\"\noperator = \"li\"\n")
        #expect(error.description.contains("U+0000"), "\(error)")
        #expect(error.description.contains("line 2, column 14"), "\(error)")
        #expect(error.description.contains("'site'"), "\(error)")
        #expect(!error.description.contains("north"))
    }

    @Test func otherControlCharactersInAValueAreAnErrorNamingTheKey() throws {
        let escaped = try cardLabelsError("[tags]\nsite = \"a\\u001B[31mb\"\n")
        #expect(escaped == .controlCharacter(key: "site", source: .sceneFile(path: path), character: "U+001B"))
        #expect(escaped.description.contains("'site'") && !escaped.description.contains("[31m"))
        let newline = try cardLabelsError("scene = \"two\\nlines\"")
        #expect(newline == .controlCharacter(key: "scene", source: .sceneFile(path: path), character: "U+000A"))
        let delete = try cardLabelsError("scene = \"x\\u007F\"")
        #expect(delete == .controlCharacter(key: "scene", source: .sceneFile(path: path), character: "U+007F"))
    }

    @Test func aSyntaxErrorGivesWhereButNeverTheText() throws {
        // toml++ quotes what it read ("cannot redefine existing table 'hunter2'", "saw 'h'"); none of it may
        // reach the message.
        for text in ["[hunter2]\n[hunter2]\n", "hunter2 = \"x\"\nhunter2 = \"y\"\n", "scene = hunter2\n", "[tags]\nh h = \"x\"\n"] {
            let error = try parseError(text)
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.description.contains("line "), "\(error)")
            #expect(!error.description.contains("saw"), "\(error)")
        }
    }

    @Test func anUnknownKeyIsNamedOnlyWhenItIsAPlainKey() throws {
        #expect(try parseError("operator = \"li\"").description.contains("unknown key 'operator'"))
        let odd = try parseError("\"root:$6$hash\" = \"x\"")
        #expect(odd.description.contains("unknown key"), "\(odd)")
        #expect(!odd.description.contains("$6$hash"), "\(odd)")
    }
}
