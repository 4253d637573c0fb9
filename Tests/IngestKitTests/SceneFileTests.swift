import Testing

@testable import IngestKit

@Suite struct SceneFileTests {
    private let path = "/media/sd/ingest-scene.toml"

    private func problem(_ text: String) throws -> String {
        let error = try #require(throws: LabelError.self) { try SceneFile.parse(text, path: path) }
        guard case .sceneFile(let file, let problem) = error else {
            Issue.record("not a scene file error: \(error)")
            return ""
        }
        #expect(file == path)
        #expect(error.description.hasPrefix("scene file \(path): "))
        return problem
    }

    @Test func aSceneFileGivesItsSceneAndTags() throws {
        let file = try SceneFile.parse(
            """
            scene = "flood-survey-north"
            [tags]
            site = "river-km-12"
            operator = "li"
            """, path: path)
        #expect(file.path == path)
        #expect(file.scene == Scene(name: "flood-survey-north", tags: ["site": "river-km-12", "operator": "li"]))
        #expect(SceneFile.fileName == "ingest-scene.toml")
    }

    @Test func sceneAndTagsAreEachOptional() throws {
        #expect(try SceneFile.parse("", path: path).scene == Scene())
        #expect(try SceneFile.parse("[tags]\nsite = \"x\"", path: path).scene == Scene(tags: ["site": "x"]))
        #expect(try SceneFile.parse("scene = \"x\"\r\n", path: path).scene == Scene(name: "x"))
    }

    @Test func anUnknownKeyIsAnErrorNamingFileAndKey() throws {
        #expect(try problem("scene = \"x\"\n[tag]\nsite = \"y\"").contains("unknown key 'tag'"))
        #expect(try problem("operator = \"li\"").contains("unknown key 'operator'"))
    }

    @Test func aCardCannotSetTheStationsHooks() throws {
        // Hooks are station configuration: a scene file naming one is refused, never run.
        #expect(try problem("scene = \"x\"\n[hooks]\non_card_done = \"rm -rf /\"").contains("unknown key 'hooks'"))
        #expect(try problem("hooks = { on_card_done = \"x\" }").contains("unknown key 'hooks'"))
    }

    @Test func valuesMustBeStrings() throws {
        #expect(try problem("scene = 12").contains("'scene' must be a string, not integer"))
        #expect(try problem("tags = \"x\"").contains("'tags' must be a table"))
        #expect(try problem("[tags]\nkm = 12").contains("tag 'km' must be a string, not integer; write it in quotes"))
        #expect(try problem("[tags.more]\nx = \"y\"").contains("tag 'more' must be a string, not table"))
    }

    @Test func aSyntaxErrorSaysWhere() throws {
        let problem = try problem("scene = \"x\"\nsite = \n")
        #expect(problem.contains("line 2"), "\(problem)")
    }

    @Test func theFilesLabelsAreCheckedWhenMergedAndErrorsNameTheFile() throws {
        let file = try SceneFile.parse("[tags]\n\"my site\" = \"x\"", path: path)
        let policy = try LabelPolicy()
        let error = try #require(throws: LabelError.self) { try policy.cardLabels(card: CardLabels(), sceneFile: file) }
        #expect(error == .invalidKey(key: "my site", source: .sceneFile(path: path), problem: "holds 'U+0020'"))
        #expect(error.description.contains(path))
    }
}
