import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The few shapes of XML an S3 server answers with, read without a schema: the root's name,
/// the text of each field directly under it, and the fields of each repeated record
/// (`<Part>`, `<Upload>`, at any depth: `<Tag>` lies in `<TagSet>`). Names lose any namespace prefix, CDATA counts as text, values are
/// trimmed, and external entities are never resolved.
struct S3XMLDocument {
    /// The root element's name.
    var root: String?
    /// Text of elements directly under the root, by name (the first one wins).
    var fields: [String: String] = [:]
    /// For each record element name asked for, its occurrences' child texts.
    var records: [String: [[String: String]]] = [:]
    /// The whole document parsed; false when it was malformed or reading stopped early.
    var isComplete = false

    /// Reads `bytes`, collecting records named in `recordNames`. Whitespace before the
    /// document (S3 sends spaces to keep a slow Complete's connection alive) is skipped.
    /// With `onlyRoot`, reading stops at once when the root has another name, so probing
    /// every answer for an `<Error>` costs next to nothing.
    static func read(_ bytes: some Collection<UInt8>, records recordNames: Set<String> = [], onlyRoot: String? = nil) -> S3XMLDocument {
        let document = bytes.drop(while: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D })
        guard !document.isEmpty else { return S3XMLDocument() }
        let reader = Reader(recordNames: recordNames, onlyRoot: onlyRoot)
        let parser = XMLParser(data: Data(document))
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        reader.document.isComplete = parser.parse()
        return reader.document
    }

    /// ``read(_:records:onlyRoot:)``, nil unless the whole document parsed.
    static func parse(_ bytes: [UInt8], records recordNames: Set<String> = []) -> S3XMLDocument? {
        let document = read(bytes, records: recordNames)
        return document.isComplete ? document : nil
    }

    private final class Reader: NSObject, XMLParserDelegate {
        let recordNames: Set<String>
        let onlyRoot: String?
        var document = S3XMLDocument()
        var depth = 0
        var text = ""
        var record: [String: String]?
        /// The depth of the record being read.
        var recordDepth = 0

        init(recordNames: Set<String>, onlyRoot: String?) {
            self.recordNames = recordNames
            self.onlyRoot = onlyRoot
        }

        /// The element name without a namespace prefix.
        static func localName(_ name: String) -> String {
            name.split(separator: ":").last.map(String.init) ?? name
        }

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            text = ""
            let name = Self.localName(name)
            if depth == 1 {
                document.root = name
                if let onlyRoot, name != onlyRoot { parser.abortParsing() }
            } else if record == nil, recordNames.contains(name) {
                record = [:]
                recordDepth = depth
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer {
                depth -= 1
                text = ""
            }
            let name = Self.localName(name)
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let finished = record, depth == recordDepth {
                document.records[name, default: []].append(finished)
                record = nil
            } else if depth == 2, !value.isEmpty, document.fields[name] == nil {
                document.fields[name] = value
            } else if depth == recordDepth + 1, record != nil {
                record?[name] = value
            }
        }
    }
}

/// Escapes text for an XML element's content.
func xmlEscaped(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        default: out.append(character)
        }
    }
    return out
}
