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
        ChainReader().read(bytes)?.generations
    }

    /// The files a manifest lists, by path (relative to the history's folder) with the
    /// `xxh128` recorded for it; nil when `bytes` are not such a manifest: not well-formed
    /// XML, another root element or namespace, a `<hash>` without a `<path>`, a path listed
    /// twice, or a digest that is not 32 hex digits. A `<hash>` without `xxh128` (another
    /// tool's manifest, hashed with another algorithm) is kept with an empty digest: it
    /// lists the path, but nothing this station's fingerprint can match.
    public static func parseManifest(_ bytes: [UInt8]) -> [String: String]? {
        ManifestReader().read(bytes)?.listed
    }
}

/// What both readers share: the path of open elements, the current element's text, and the
/// checks that the root was the expected one and was closed. A subclass names its root and
/// takes what it needs as each element below it starts and ends.
private class HistoryReader: NSObject, XMLParserDelegate {
    /// Element names (namespace-free) from the root down to the current one.
    var open: [String] = []
    /// The current element's text so far, untrimmed.
    var text = ""
    private var isRoot = false
    private var isClosed = false
    private var isMalformed = false

    /// The root element this reader reads: its name and namespace.
    private let root: (name: String, namespace: String)

    init(root name: String, namespace: String) {
        root = (name, namespace)
    }

    /// An element below the root opened; `open` ends with it.
    func started(attributes: [String: String]) {}
    /// An element below the root ends; `open` still ends with it, `text` is its text. False:
    /// the document lacks what it must have.
    func ended() -> Bool { true }

    /// Reads `bytes`; self when they are a whole document of this reader's root.
    func read(_ bytes: [UInt8]) -> Self? {
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = self
        // Foundation's parser on Linux reports success for a document cut off inside its
        // root element, hence the check that the root was closed.
        guard parser.parse(), isRoot, isClosed, !isMalformed else { return nil }
        return self
    }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        open.append(name)
        text = ""
        if open.count == 1 {
            isRoot = name == root.name && namespaceURI == root.namespace
            if !isRoot { parser.abortParsing() }
        } else {
            started(attributes: attributes)
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        defer {
            open.removeLast()
            text = ""
        }
        if open.count == 1 {
            isClosed = true
        } else if !ended() {
            isMalformed = true
            parser.abortParsing()
        }
    }
}

/// Reads a chain file's elements: `<ascmhldirectory>`, its `<hashlist>` children, and their
/// `<path>` and `<c4>`; anything else is skipped.
private final class ChainReader: HistoryReader {
    var generations: [MHLGeneration] = []
    private var number: Int?
    private var path: String?
    private var c4: String?

    init() { super.init(root: "ascmhldirectory", namespace: ASCMHL.chainNamespace) }

    override func started(attributes: [String: String]) {
        guard open.count == 2, open[1] == "hashlist" else { return }
        number = attributes["sequencenr"].flatMap { Int($0) }
        path = nil
        c4 = nil
    }

    override func ended() -> Bool {
        guard open[1] == "hashlist" else { return true }
        switch (open.count, open.last) {
        case (3, "path"): path = text
        case (3, "c4"): c4 = text
        case (2, _):
            guard let number, let path, let c4 else { return false }
            generations.append(MHLGeneration(number: number, fileName: path, c4: c4))
        default: break
        }
        return true
    }
}

/// Reads a manifest's `<hashlist>`, its `<hashes>`, each `<hash>`'s `<path>` and `<xxh128>`;
/// anything else is skipped.
private final class ManifestReader: HistoryReader {
    var listed: [String: String] = [:]
    private var path: String?
    private var digest: String?

    init() { super.init(root: "hashlist", namespace: ASCMHL.manifestNamespace) }

    override func started(attributes: [String: String]) {
        guard open == ["hashlist", "hashes", "hash"] else { return }
        path = nil
        digest = nil
    }

    override func ended() -> Bool {
        guard open.count >= 3, open[1] == "hashes", open[2] == "hash" else { return true }
        switch (open.count, open.last) {
        case (4, "path"): path = text
        case (4, "xxh128"): digest = text.lowercased()
        case (3, _):
            guard let path, !path.isEmpty, listed[path] == nil, digest.map(ASCMHL.isDigest) ?? true else { return false }
            listed[path] = digest ?? ""
        default: break
        }
        return true
    }
}
