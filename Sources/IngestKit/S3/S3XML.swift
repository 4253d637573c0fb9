import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The few shapes of XML an S3 server answers with, read without a schema: the text of
/// each top-level field, and the fields of each repeated record (`<Part>`, `<Upload>`).
struct S3XMLDocument {
    /// Text of elements directly under the root, by name (the last one wins).
    var fields: [String: String] = [:]
    /// For each record element name asked for, its occurrences' child texts.
    var records: [String: [[String: String]]] = [:]

    /// Parses `data`, collecting records named in `recordNames`; nil if it is not XML.
    static func parse(_ data: [UInt8], records recordNames: Set<String> = []) -> S3XMLDocument? {
        let reader = Reader(recordNames: recordNames)
        let parser = XMLParser(data: Data(data))
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse() else { return nil }
        return reader.document
    }

    private final class Reader: NSObject, XMLParserDelegate {
        let recordNames: Set<String>
        var document = S3XMLDocument()
        var stack: [String] = []
        var text = ""
        var record: [String: String]?

        init(recordNames: Set<String>) { self.recordNames = recordNames }

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            stack.append(name)
            text = ""
            if stack.count == 2, recordNames.contains(name) { record = [:] }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer { stack.removeLast() }
            if stack.count == 2 {
                if let finished = record, recordNames.contains(name) {
                    document.records[name, default: []].append(finished)
                    record = nil
                } else {
                    document.fields[name] = text
                }
            } else if stack.count == 3, record != nil {
                record?[name] = text
            }
            text = ""
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
