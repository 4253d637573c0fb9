import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

// Reading a history written elsewhere (another station's generations of the card, found in
// the bucket): every byte of it is hostile input, so each reader keeps only the elements it
// needs, resolves no external entity, and fails on a document that is cut off or lacks
// what it must have, rather than guessing.

extension ASCMHL {
    /// The generations an `ascmhl_chain.xml` lists, in document order; nil when `bytes` are
    /// not such a file: not well-formed XML, another root element or namespace, or a
    /// `<hashlist>` without an integer `sequencenr`, a `<path>` or a `<c4>`. Any namespace
    /// prefix is accepted, as the specification requires. Texts are taken as they are,
    /// untrimmed, since a file name may begin or end with a space.
    public static func parseChain(_ bytes: [UInt8]) -> [MHLGeneration]? {
        let reader = ChainReader()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        // Foundation's parser on Linux reports success for a document cut off inside its
        // root element, hence the check that the root was closed.
        guard parser.parse(), reader.isChain, reader.isClosed, !reader.isMalformed else { return nil }
        return reader.generations
    }

    /// Reads a chain file's elements: `<ascmhldirectory>`, its `<hashlist>` children, and
    /// their `<path>` and `<c4>`; anything else is skipped.
    private final class ChainReader: NSObject, XMLParserDelegate {
        var isChain = false
        var isClosed = false
        var isMalformed = false
        var generations: [MHLGeneration] = []
        /// Element names from the root down to the current one.
        var open: [String] = []
        var number: Int?
        var path: String?
        var c4: String?
        var text = ""

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            open.append(name)
            text = ""
            switch open.count {
            case 1:
                isChain = name == "ascmhldirectory" && namespaceURI == ASCMHL.chainNamespace
                if !isChain { parser.abortParsing() }
            case 2 where name == "hashlist":
                number = attributes["sequencenr"].flatMap { Int($0) }
                path = nil
                c4 = nil
            default:
                break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer {
                open.removeLast()
                text = ""
            }
            if open.count == 1 { isClosed = true }
            guard open.count >= 2, open[1] == "hashlist" else { return }
            switch (open.count, name) {
            case (3, "path"): path = text
            case (3, "c4"): c4 = text
            case (2, _):
                guard let number, let path, let c4 else {
                    isMalformed = true
                    parser.abortParsing()
                    return
                }
                generations.append(MHLGeneration(number: number, fileName: path, c4: c4))
            default: break
            }
        }
    }

    /// The files a manifest lists, by path (relative to the history's folder) with the
    /// `xxh128` recorded for it; nil when `bytes` are not such a manifest: not well-formed
    /// XML, another root element or namespace, a `<hash>` without a `<path>`, a path listed
    /// twice, or a digest that is not 32 hex digits. A `<hash>` without `xxh128` (another
    /// tool's manifest, hashed with another algorithm) is kept with an empty digest: it
    /// lists the path, but nothing this station's fingerprint can match.
    public static func parseManifest(_ bytes: [UInt8]) -> [String: String]? {
        let reader = ManifestReader()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse(), reader.isManifest, reader.isClosed, !reader.isMalformed else { return nil }
        return reader.listed
    }

    /// Reads a manifest's `<hashlist>`, its `<hashes>`, each `<hash>`'s `<path>` and
    /// `<xxh128>`; anything else is skipped.
    private final class ManifestReader: NSObject, XMLParserDelegate {
        var isManifest = false
        var isClosed = false
        var isMalformed = false
        var listed: [String: String] = [:]
        var open: [String] = []
        var path: String?
        var digest: String?
        var text = ""

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            open.append(name)
            text = ""
            if open.count == 1 {
                isManifest = name == "hashlist" && namespaceURI == ASCMHL.manifestNamespace
                if !isManifest { parser.abortParsing() }
            } else if open == ["hashlist", "hashes", "hash"] {
                path = nil
                digest = nil
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer {
                open.removeLast()
                text = ""
            }
            if open.count == 1 { isClosed = true }
            guard open.count >= 3, open[1] == "hashes", open[2] == "hash" else { return }
            switch (open.count, name) {
            case (4, "path"): path = text
            case (4, "xxh128"): digest = text.lowercased()
            case (3, _):
                guard let path, !path.isEmpty, listed[path] == nil, digest.map(ASCMHL.isDigest) ?? true else {
                    isMalformed = true
                    parser.abortParsing()
                    return
                }
                listed[path] = digest ?? ""
            default: break
            }
        }
    }
}
