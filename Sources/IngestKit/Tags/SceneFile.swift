import TOMLKit

/// What was being recorded: a scene name (the label `scene`) and tags of its own.
///
/// A scene is given on the command line (`--scene`, `--tag k=v`), in a card's scene file, or
/// as the config's default; ``LabelPolicy`` decides which apply to a card.
public struct Scene: Sendable, Equatable {
    /// The value of the label `scene`; nil leaves it unset.
    public var name: String?
    /// Further labels, by key.
    public var tags: [String: String]

    public init(name: String? = nil, tags: [String: String] = [:]) {
        self.name = name
        self.tags = tags
    }
}

/// A scene written on the card itself, as `ingest-scene.toml` at its root.
///
/// The people who know what a card holds are in the field, not at the ingest station: they
/// write the scene on the card, and the station labels the card's files with it.
///
/// ```toml
/// scene = "flood-survey-north"
/// [tags]
/// site = "river-km-12"
/// operator = "li"
/// ```
///
/// Any other key is an error, not ignored: a misspelt `[tag]` would otherwise lose every tag
/// of the card without a word. Reading the file is the caller's part; this parses its text.
public struct SceneFile: Sendable, Equatable {
    /// The file's name at the card's root.
    public static let fileName = "ingest-scene.toml"

    /// Where the file was read, as errors and ``LabelSource/sceneFile(path:)`` name it.
    public let path: String
    /// What the file says.
    public let scene: Scene

    public init(path: String, scene: Scene) {
        self.path = path
        self.scene = scene
    }

    /// Parses the text of a scene file read from `path`. Keys and values are checked as
    /// labels later, when they are merged with the card's other labels.
    public static func parse(_ text: String, path: String) throws(LabelError) -> SceneFile {
        func fail(_ problem: String) -> LabelError { .sceneFile(path: path, problem: problem) }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw fail("line \(error.source.begin.line), column \(error.source.begin.column): \(error.description)")
        } catch {
            throw fail("\(error)")
        }
        for key in table.keys.sorted() where key != "scene" && key != "tags" {
            throw fail("unknown key '\(key)'; a scene file holds only 'scene = \"…\"' and a [tags] table")
        }
        var scene = Scene()
        if let value = table["scene"] {
            guard let name = value.string else { throw fail("'scene' must be a string, not \(value.type)") }
            scene.name = name
        }
        if let value = table["tags"] {
            guard let tags = value.table else { throw fail("'tags' must be a table ([tags]), not \(value.type)") }
            for key in tags.keys.sorted() {
                guard let tag = tags[key]?.string else {
                    let type = tags[key].map { "\($0.type)" } ?? "nothing"
                    throw fail("tag '\(key)' must be a string, not \(type); write it in quotes: \(key) = \"…\"")
                }
                scene.tags[key] = tag
            }
        }
        return SceneFile(path: path, scene: scene)
    }
}
