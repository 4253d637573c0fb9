import Foundation
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
/// of the card without a word. The card describes its scene, never the station: `device`,
/// the card's identity labels and the reserved labels cannot be set here
/// (``LabelSet/stationKeys``, ``LabelSet/reservedKeys``).
///
/// The file is card data, so it is read the way every card file is (``read(cardRoot:)``):
/// beneath the card's root, not through a symbolic link, never a FIFO or a device, at most
/// ``maximumBytes``. Error messages never quote the file's text: they give the line and the
/// column, and name keys only once they are known to be plain label keys.
public struct SceneFile: Sendable, Equatable {
    /// The file's name at the card's root.
    public static let fileName = "ingest-scene.toml"
    /// The largest scene file read: 64 KiB, far more than a scene and its tags need.
    public static let maximumBytes = 64 * 1024

    /// Where the file was read, as errors and ``LabelSource/sceneFile(path:)`` name it.
    public let path: String
    /// What the file says.
    public let scene: Scene

    public init(path: String, scene: Scene) {
        self.path = path
        self.scene = scene
    }

    /// Reads the scene file at the root of the card mounted at `root`; nil when the card has none.
    ///
    /// It is read as ``BoundedFile`` reads what configures ingest, relative to the root's
    /// directory descriptor and with links refused: looked at first (`fstatat` without following
    /// links) so that a device node is never opened, opened with `O_NOFOLLOW`, `O_NONBLOCK` and
    /// `O_NOCTTY`, a regular file by `fstat`, at most ``maximumBytes`` + 1 bytes read whatever
    /// its size says. A
    /// symbolic link, a FIFO, a device, a directory, a larger file or one that is not UTF-8 is
    /// an error: the card's labels are unknown, so none of its files is uploaded.
    ///
    /// This blocks on the card: call it from a dedicated thread.
    public static func read(cardRoot root: String) throws(LabelError) -> SceneFile? {
        let path = (root.hasSuffix("/") ? root : root + "/") + fileName
        func fail(_ problem: String) -> LabelError { .sceneFile(path: path, problem: problem) }
        let directory: FileDescriptor
        do { directory = try FileDescriptor(path: root, flags: [.readOnly, .directory]) } catch {
            throw fail("cannot be read, as the card's root cannot be opened (\(error.reason))")
        }
        let read: BoundedFile?
        do { read = try BoundedFile.read(fileName, in: directory, links: .refuse, limit: maximumBytes) } catch {
            switch error {
            case .symbolicLink: throw fail(symlinkProblem)
            case .notRegular: throw fail("\(error); replace it with a plain text file")
            case .tooLarge:
                throw fail(
                    "is larger than \(maximumBytes / 1024) KiB, the most a scene file may hold; "
                        + "a scene file holds only 'scene = \"…\"' and a [tags] table: shorten it")
            case .failed: throw fail(error.description)
            }
        }
        guard let bytes = read?.bytes else { return nil }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw fail("is not UTF-8 text; save it as UTF-8")
        }
        return try parse(text, path: path)
    }

    private static var symlinkProblem: String {
        "is a symbolic link; a scene file is read only from the card itself, never through a link: "
            + "replace the link with a copy of the file"
    }

    /// Parses the text of a scene file read from `path`. Keys and values are checked as
    /// labels later, when they are merged with the card's other labels; here, that the file
    /// holds no control character a parser or a C string would lose (a NUL), and no key other
    /// than `scene` and `tags`.
    public static func parse(_ text: String, path: String) throws(LabelError) -> SceneFile {
        func fail(_ problem: String) -> LabelError { .sceneFile(path: path, problem: problem) }
        // TOML allows no control character but tab, line feed and carriage return anywhere in
        // a file, and TOMLKit hands the text to its parser as a C string: a NUL would end the
        // document there and silently drop the rest.
        if let (line, column, scalar) = rawControlCharacter(in: text) {
            let key = plainKey(onLine: line, of: text).map { "in the value of '\($0)', " } ?? ""
            throw fail(
                "holds the control character \(LabelSet.visible(scalar)) \(key)at line \(line), column \(column); "
                    + "control characters are not allowed in a scene file: remove it")
        }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            // The parser's own message may quote the text; only where it is goes out.
            throw fail(
                "is not valid TOML at line \(error.source.begin.line), column \(error.source.begin.column); "
                    + "a scene file holds only 'scene = \"…\"' and a [tags] table of quoted values")
        } catch {
            throw fail("is not valid TOML")
        }
        if let keyPath = table.keyPathHoldingNUL() {
            let named = plainKeyPath(keyPath).map { "'\($0)'" } ?? "a key"
            throw fail("\(named) holds the control character U+0000 (NUL), which would cut it short; remove it")
        }
        for key in table.keys.sorted() where key != "scene" && key != "tags" {
            let named = plainKeyPath(key).map { "unknown key '\($0)'" } ?? "an unknown key"
            throw fail("\(named); a scene file holds only 'scene = \"…\"' and a [tags] table")
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
                    let named = plainKeyPath(key) ?? "a tag"
                    throw fail("tag '\(named)' must be a string, not \(type); write it in quotes: \(named) = \"…\"")
                }
                scene.tags[key] = tag
            }
        }
        return SceneFile(path: path, scene: scene)
    }

    /// The first control character TOML refuses in a file (all but tab, line feed and
    /// carriage return), with its line and column, both counted from 1.
    private static func rawControlCharacter(in text: String) -> (line: Int, column: Int, Unicode.Scalar)? {
        var line = 1, column = 1
        for scalar in text.unicodeScalars {
            if scalar == "\n" {
                line += 1
                column = 1
                continue
            }
            if (scalar.value < 0x20 && scalar != "\t" && scalar != "\r") || scalar.value == 0x7F {
                return (line, column, scalar)
            }
            column += 1
        }
        return nil
    }

    /// The key a `key = value` line sets, if that line (counted from 1) starts with a plain
    /// label key (bare or quoted): text from the card is named only when it cannot garble a
    /// message or carry anything but a key.
    private static func plainKey(onLine line: Int, of text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard line >= 1, line <= lines.count, let equals = lines[line - 1].firstIndex(of: "=") else { return nil }
        var key = lines[line - 1][..<equals].trimmingCharacters(in: .whitespaces)
        if key.count >= 2, let first = key.first, first == "\"" || first == "'", key.last == first {
            key = String(key.dropFirst().dropLast())
        }
        return plainKeyPath(key)
    }

    /// `key` (or a dotted path of keys) if it is made of what a label key may hold, else nil.
    private static func plainKeyPath(_ key: String) -> String? {
        LabelSet.keyProblem(LabelSet.lowercased(key)) == nil ? key : nil
    }
}
