import Foundation
import Testing

@testable import IngestKit

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// 2023-11-14T22:13:20Z.
private let noon = Date(timeIntervalSince1970: 1_700_000_000)

private let creator = MHLCreator(toolName: "ingest", toolVersion: "1.0", hostName: "station-1")

private func entry(_ path: String, size: Int64 = 5, digest: String = "00fd03cd9996ee8cf8be6a756bf82a42") -> MHLEntry {
    MHLEntry(path: path, size: size, lastModified: noon, xxh128: digest, hashDate: noon)
}

/// One element as an independent XML parser (libxml2, through Foundation) reads it back.
private struct ParsedElement: Equatable {
    var name: String
    var attributes: [String: String]
    var text: String
}

/// Every element of `bytes` in document order, with its namespace-free name and its own text
/// untrimmed; nil unless the document is well-formed.
private func parseXML(_ bytes: [UInt8]) -> [ParsedElement]? {
    final class Collector: NSObject, XMLParserDelegate {
        var elements: [ParsedElement] = []
        var open: [Int] = []

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            open.append(elements.count)
            elements.append(ParsedElement(name: name, attributes: attributes, text: ""))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if let current = open.last { elements[current].text += string }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            open.removeLast()
        }
    }
    let collector = Collector()
    let parser = XMLParser(data: Data(bytes))
    parser.shouldProcessNamespaces = true
    parser.delegate = collector
    return parser.parse() ? collector.elements : nil
}

private func texts(of name: String, in elements: [ParsedElement]) -> [String] {
    elements.filter { $0.name == name }.map(\.text)
}

@Suite struct ASCMHLTests {
    // MARK: C4 id

    /// The vectors of the C4 reference implementation's tests (Avalanche-io/c4, `id_test.go`
    /// and its example): the empty input, "foo", "alfa", "bravo". `ascmhl` 1.2's
    /// `hasher.C4` gives the same ids.
    @Test(arguments: [
        ("", "c459dsjfscH38cYeXXYogktxf4Cd9ibshE3BHUo6a58hBXmRQdZrAkZzsWcbWtDg5oQstpDuni4Hirj75GEmTc1sFT"),
        ("foo", "c45xZeXwMSpqXjpDumcHMA6mhoAmGHkUo7r9WmN2UgSEQzj9KjgseaQdkEJ11fGb5S1WEENcV3q8RFWwEeVpC7Fjk2"),
        ("alfa", "c43zYcLni5LF9rR4Lg4B8h3Jp8SBwjcnyyeh4bc6gTPHndKuKdjUWx1kJPYhZxYt3zV6tQXpDs2shPsPYjgG81wZM1"),
        ("bravo", "c42jd8KUQG9DKppN1qt5aWS3PAmdPmNutXyVTb8H123FcuU3shPxpUXsVdcouSALZ4PaDvMYzQSMYCWkb6rop9zhDa"),
    ])
    func c4MatchesTheReferenceVectors(input: String, id: String) {
        #expect(ASCMHL.c4(Array(input.utf8)) == id)
    }

    /// Digests whose base-58 form has fewer than 88 digits are left-padded with `1`, the
    /// alphabet's zero: "0" and "5" are the first such inputs among the decimal numbers, and
    /// these are their ids as `ascmhl` 1.2's `hasher.C4` computes them.
    @Test(arguments: [
        ("0", "c41zgA3RiM67Fb4w1mXdSeroZSfb5T7Gk5uwVLjuWsyd16PEu2jb3aHbNB95h28atSkc9EtCj2pfPARG5xaz85Zs1r"),
        ("5", "c418y8rb6hAn4PoGMWuXBK5qGgah53ziHdAr3kxRqLDFN6KTaTqh89kFhXaCkv4GZFv2RMSc5Q77HcxjJDbuLRRk5J"),
    ])
    func c4PadsShortDigestsWithTheZeroDigit(input: String, id: String) {
        #expect(ASCMHL.c4(Array(input.utf8)) == id)
    }

    @Test func everyC4IdIsNinetyCharactersOfTheAlphabet() {
        let alphabet = Set("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")
        for count in 0..<200 {
            let id = ASCMHL.c4((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            #expect(id.count == 90 && id.hasPrefix("c4"), "input of \(count) bytes")
            #expect(id.dropFirst(2).allSatisfy(alphabet.contains), "input of \(count) bytes")
        }
    }

    // MARK: File name

    @Test func manifestNameIsNumberFolderAndUTCTime() {
        #expect(ASCMHL.manifestName(generation: 1, folderName: "A001", created: noon) == "0001_A001_2023-11-14_221320Z.mhl")
        #expect(ASCMHL.manifestName(generation: 42, folderName: "A001", created: noon) == "0042_A001_2023-11-14_221320Z.mhl")
    }

    @Test func generationsPastNineThousandNineHundredNinetyNineTakeMoreDigits() {
        #expect(ASCMHL.manifestName(generation: 12_345, folderName: "A001", created: noon) == "12345_A001_2023-11-14_221320Z.mhl")
    }

    @Test func manifestNameKeepsUnicodeAndReplacesWhatBreaksAFileName() {
        #expect(
            ASCMHL.manifestName(generation: 1, folderName: "Tag 3 – Café & Bar", created: noon)
                == "0001_Tag 3 – Café & Bar_2023-11-14_221320Z.mhl")
        #expect(
            ASCMHL.manifestName(generation: 1, folderName: "a/b\\c:d*e?f\"g<h>i|j\nk\u{7F}", created: noon)
                == "0001_a_b_c_d_e_f_g_h_i_j_k__2023-11-14_221320Z.mhl")
    }

    // MARK: Dates

    @Test func datesAreUTCWithSecondsAndHashDatesWithMicroseconds() throws {
        let moment = Date(timeIntervalSince1970: 1_709_164_800.123_456)  // 2024-02-29, a leap day
        let xml = try ASCMHL.manifest(
            entries: [MHLEntry(path: "a", size: 1, lastModified: moment, xxh128: String(repeating: "0", count: 32), hashDate: moment)],
            creator: creator, created: moment, process: .transfer)
        let elements = try #require(parseXML(xml))
        #expect(texts(of: "creationdate", in: elements) == ["2024-02-29T00:00:00+00:00"])
        let path = try #require(elements.first { $0.name == "path" })
        #expect(path.attributes["lastmodificationdate"] == "2024-02-29T00:00:00+00:00")
        let hash = try #require(elements.first { $0.name == "xxh128" })
        #expect(hash.attributes["hashdate"] == "2024-02-29T00:00:00.123456+00:00")
    }

    @Test(arguments: [
        (0.0, "0001_x_1970-01-01_000000Z.mhl"),
        (-1.0, "0001_x_1969-12-31_235959Z.mhl"),
        (951_782_400.0, "0001_x_2000-02-29_000000Z.mhl"),
        (4_107_542_399.0, "0001_x_2100-02-28_235959Z.mhl"),
        (4_107_542_400.0, "0001_x_2100-03-01_000000Z.mhl"),  // 2100 is no leap year
    ])
    func calendarArithmeticHandlesEpochEdgesAndLeapYears(seconds: Double, name: String) {
        #expect(ASCMHL.manifestName(generation: 1, folderName: "x", created: Date(timeIntervalSince1970: seconds)) == name)
    }

    // MARK: Manifest

    /// The whole text of a small manifest, pinned: what `ascmhl` 1.2 was shown to accept.
    @Test func manifestHasTheLayoutAscmhlReads() throws {
        let writer = MHLCreator(
            toolName: "ingest", toolVersion: "1.0", hostName: "station-1", authorName: "Dana",
            details: [.init("card.label", "A001"), .init("scene", "12A")])
        let xml = try ASCMHL.manifest(entries: [entry("Clips/A001C001.mov", size: 1_234_567)], creator: writer, created: noon, process: .transfer)
        #expect(
            String(decoding: xml, as: UTF8.self) == """
                <?xml version="1.0" encoding="UTF-8"?>
                <hashlist version="2.0" xmlns="urn:ASC:MHL:v2.0">
                  <creatorinfo>
                    <creationdate>2023-11-14T22:13:20+00:00</creationdate>
                    <hostname>station-1</hostname>
                    <tool version="1.0">ingest</tool>
                    <author>Dana</author>
                    <comment>card.label: A001
                scene: 12A</comment>
                  </creatorinfo>
                  <processinfo>
                    <process>transfer</process>
                    <ignore>
                      <pattern>.DS_Store</pattern>
                      <pattern>ascmhl</pattern>
                      <pattern>ascmhl/</pattern>
                    </ignore>
                  </processinfo>
                  <hashes>
                    <hash>
                      <path size="1234567" lastmodificationdate="2023-11-14T22:13:20+00:00">Clips/A001C001.mov</path>
                      <xxh128 action="original" hashdate="2023-11-14T22:13:20.000000+00:00">00fd03cd9996ee8cf8be6a756bf82a42</xxh128>
                    </hash>
                  </hashes>
                </hashlist>

                """)
    }

    @Test func inPlaceProcessIsSpelledAsTheSchemaWantsIt() throws {
        let elements = try #require(parseXML(try ASCMHL.manifest(entries: [entry("a")], creator: creator, created: noon, process: .inPlace)))
        #expect(texts(of: "process", in: elements) == ["in-place"])
    }

    /// Names a card may hold, read back by an independent XML parser exactly as given.
    @Test func hostileNamesSurviveAnXMLParserUnchanged() throws {
        let names = [
            "a&b <c>.txt", "q\"uo'te", "]]>", "&amp; literally", "tab\there", "new\nline", "cr\rreturn", "crlf\r\nend",
            " leading and trailing ", "Ümlaut/日本語/🎬.mov", "del\u{7F} and c1\u{85}", "#;?%+=@!$^()[]{}`~,.mov",
        ]
        let xml = try ASCMHL.manifest(entries: names.map { entry($0) }, creator: creator, created: noon, process: .transfer)
        let elements = try #require(parseXML(xml))
        // Byte for byte: String's == would hide a change of Unicode normalization.
        #expect(texts(of: "path", in: elements).map { Array($0.utf8) } == names.map { Array($0.utf8) })
    }

    @Test func creatorTextIsEscapedToo() throws {
        let writer = MHLCreator(
            toolName: "in<gest>", toolVersion: "1.0 \"beta\" & co", hostName: "host&1", authorName: "A <B>",
            details: [.init("label", "x & <y>"), .init("two\nlines", "one\r\nvalue")])
        let elements = try #require(parseXML(try ASCMHL.manifest(entries: [entry("a")], creator: writer, created: noon, process: .transfer)))
        #expect(texts(of: "tool", in: elements) == ["in<gest>"])
        #expect(elements.first { $0.name == "tool" }?.attributes["version"] == "1.0 \"beta\" & co")
        #expect(texts(of: "hostname", in: elements) == ["host&1"])
        #expect(texts(of: "author", in: elements) == ["A <B>"])
        // One line per detail: line breaks inside a key or value become spaces.
        #expect(texts(of: "comment", in: elements) == ["label: x & <y>\ntwo lines: one  value"])
    }

    @Test func controlCharactersInCreatorTextBecomeReplacementCharacters() throws {
        let writer = MHLCreator(toolName: "ingest", toolVersion: "1.0", hostName: "host", details: [.init("label", "A\u{1}B")])
        let elements = try #require(parseXML(try ASCMHL.manifest(entries: [entry("a")], creator: writer, created: noon, process: .transfer)))
        #expect(texts(of: "comment", in: elements) == ["label: A\u{FFFD}B"])
    }

    /// XML 1.0 cannot carry these in any form, and a replacement would name another file.
    @Test func pathsXMLCannotCarryAreRefusedAllTogether() {
        let refused = ["nul\u{0}", "bell\u{7}", "esc\u{1B}[0m", "nonchar\u{FFFE}", "nonchar\u{FFFF}"]
        let entries = [entry("fine.mov")] + refused.map { entry($0) }
        #expect(throws: ASCMHLError.unrecordablePaths(refused)) {
            try ASCMHL.manifest(entries: entries, creator: creator, created: noon, process: .transfer)
        }
    }

    @Test func refusalNamesTheRemedy() {
        let message = ASCMHLError.unrecordablePaths(["a\u{1}b"]).description
        #expect(message.contains("\"a\\u{01}b\""))
        #expect(message.contains("write the manifest without them"))
    }

    @Test func filesAscmhlIgnoresAreLeftOut() throws {
        let entries = [
            entry(".DS_Store"), entry("Clips/.DS_Store"), entry("ascmhl/0001_x.mhl"), entry("Clips/ascmhl"),
            entry("Clips/ascmhl/x"), entry("Clips/A001.mov"), entry("ascmhl.txt"), entry("x.DS_Store"),
        ]
        let elements = try #require(parseXML(try ASCMHL.manifest(entries: entries, creator: creator, created: noon, process: .transfer)))
        #expect(texts(of: "path", in: elements) == ["Clips/A001.mov", "ascmhl.txt", "x.DS_Store"])
        #expect(texts(of: "pattern", in: elements) == [".DS_Store", "ascmhl", "ascmhl/"])
    }

    @Test func noEntriesMeansNoHashesElement() throws {
        let elements = try #require(parseXML(try ASCMHL.manifest(entries: [], creator: creator, created: noon, process: .transfer)))
        #expect(!elements.contains { $0.name == "hashes" })
        #expect(elements.first?.name == "hashlist")
    }

    /// Rendering is linear: 100,000 entries take about 2 s in a debug build. (Foundation's
    /// XML parser on Linux gives up on a document this size, so the check is textual.)
    @Test func aHundredThousandEntriesRenderInOneDocument() throws {
        let entries = (0..<100_000).map { entry("Clips/C\($0).mov", size: Int64($0)) }
        let xml = try ASCMHL.manifest(entries: entries, creator: creator, created: noon, process: .transfer)
        let text = String(decoding: xml, as: UTF8.self)
        #expect(text.components(separatedBy: "<hash>").count - 1 == 100_000)
        #expect(text.hasSuffix("""
                  <path size="99999" lastmodificationdate="2023-11-14T22:13:20+00:00">Clips/C99999.mov</path>
                  <xxh128 action="original" hashdate="2023-11-14T22:13:20.000000+00:00">00fd03cd9996ee8cf8be6a756bf82a42</xxh128>
                </hash>
              </hashes>
            </hashlist>

            """))
    }

    // MARK: Chain

    @Test func chainHasTheLayoutAscmhlReads() {
        let chain = ASCMHL.chain([MHLGeneration(number: 1, fileName: "0001_A001_2023-11-14_221320Z.mhl", c4: "c4x")])
        #expect(
            String(decoding: chain, as: UTF8.self) == """
                <?xml version="1.0" encoding="UTF-8"?>
                <ascmhldirectory xmlns="urn:ASC:MHL:DIRECTORY:v2.0">
                  <hashlist sequencenr="1">
                    <path>0001_A001_2023-11-14_221320Z.mhl</path>
                    <c4>c4x</c4>
                  </hashlist>
                </ascmhldirectory>

                """)
    }

    @Test func chainRoundTripsThroughParseChain() throws {
        let first = try ASCMHL.manifest(entries: [entry("a")], creator: creator, created: noon, process: .transfer)
        let second = try ASCMHL.manifest(entries: [entry("b")], creator: creator, created: noon + 60, process: .transfer)
        let generations = [
            MHLGeneration(number: 1, fileName: ASCMHL.manifestName(generation: 1, folderName: " A&B <1> ", created: noon), c4: ASCMHL.c4(first)),
            MHLGeneration(number: 2, fileName: ASCMHL.manifestName(generation: 2, folderName: " A&B <1> ", created: noon + 60), c4: ASCMHL.c4(second)),
        ]
        #expect(ASCMHL.parseChain(ASCMHL.chain(generations)) == generations)
    }

    @Test func appendingToAParsedChainKeepsEarlierGenerations() throws {
        let earlier = [MHLGeneration(number: 1, fileName: "0001_A001_2023-11-14_221320Z.mhl", c4: ASCMHL.c4([1]))]
        let parsed = try #require(ASCMHL.parseChain(ASCMHL.chain(earlier)))
        let later = parsed + [MHLGeneration(number: parsed.count + 1, fileName: "0002_A001_2023-11-15_080000Z.mhl", c4: ASCMHL.c4([2]))]
        #expect(ASCMHL.parseChain(ASCMHL.chain(later)) == later)
    }

    /// A chain as `ascmhl` 1.2 writes it, and one with a namespace prefix, which the
    /// specification says readers must accept.
    @Test func parseChainReadsChainsOtherToolsWrote() {
        let ascmhl = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ascmhldirectory xmlns="urn:ASC:MHL:DIRECTORY:v2.0">
              <hashlist sequencenr="1">
                <path>0001_F_2026-11-28_113713Z.mhl</path>
                <c4>c45g8srtgpyeaaadJBLdRghPNyHTsKenjg6rTDdN4MHNE2AsGeFhWYKmxyXQeKkyfnYGakvthtQJ6dua7vadXY6V9p</c4>
              </hashlist>
            </ascmhldirectory>
            """
        #expect(
            ASCMHL.parseChain(Array(ascmhl.utf8)) == [
                MHLGeneration(
                    number: 1, fileName: "0001_F_2026-11-28_113713Z.mhl",
                    c4: "c45g8srtgpyeaaadJBLdRghPNyHTsKenjg6rTDdN4MHNE2AsGeFhWYKmxyXQeKkyfnYGakvthtQJ6dua7vadXY6V9p")
            ])
        let prefixed = """
            <d:ascmhldirectory xmlns:d="urn:ASC:MHL:DIRECTORY:v2.0"><d:hashlist sequencenr="7"><d:path>a &amp; b.mhl</d:path>\
            <d:c4><![CDATA[c4y]]></d:c4></d:hashlist></d:ascmhldirectory>
            """
        #expect(ASCMHL.parseChain(Array(prefixed.utf8)) == [MHLGeneration(number: 7, fileName: "a & b.mhl", c4: "c4y")])
    }

    @Test(arguments: [
        "",
        "not xml",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"><hashlist sequencenr=\"1\"><path>x</path>",
        "<ascmhldirectory><hashlist sequencenr=\"1\"><path>x</path><c4>c4x</c4></hashlist></ascmhldirectory>",
        "<hashlist version=\"2.0\" xmlns=\"urn:ASC:MHL:v2.0\"><creatorinfo/></hashlist>",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"><hashlist><path>x</path><c4>c4x</c4></hashlist></ascmhldirectory>",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"><hashlist sequencenr=\"one\"><path>x</path><c4>c4x</c4></hashlist></ascmhldirectory>",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"><hashlist sequencenr=\"1\"><path>x</path></hashlist></ascmhldirectory>",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"><hashlist sequencenr=\"1\"><c4>c4x</c4></hashlist></ascmhldirectory>",
    ])
    func parseChainRefusesWhatIsNotAChain(text: String) {
        #expect(ASCMHL.parseChain(Array(text.utf8)) == nil)
    }

    // MARK: Reading another station's manifest

    @Test func parseManifestReadsBackWhatManifestWrote() throws {
        let entries = [
            entry("DCIM/R&D <take 1> Café.JPG", digest: "0123456789abcdef0123456789abcdef"),
            entry(" lead and trail ", digest: "fedcba9876543210fedcba9876543210"),
            entry("MISC/empty.log"),
        ]
        let manifest = try ASCMHL.manifest(entries: entries, creator: creator, created: noon, process: .transfer)
        #expect(ASCMHL.parseManifest(manifest) == Dictionary(uniqueKeysWithValues: entries.map { ($0.path, $0.xxh128) }))
        let none = try ASCMHL.manifest(entries: [], creator: creator, created: noon, process: .transfer)
        #expect(ASCMHL.parseManifest(none) == [:], "a manifest of no files lists none")
    }

    /// As `ascmhl` 1.2 writes a generation: with directory hashes, and a file hashed with
    /// another algorithm only, which lists its path with nothing to match.
    @Test func parseManifestReadsAManifestTheASCToolWrote() {
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <hashlist version="2.0" xmlns="urn:ASC:MHL:v2.0">
              <creatorinfo><creationdate>2026-11-28T11:37:13+00:00</creationdate><hostname>h</hostname></creatorinfo>
              <hashes>
                <hash><path size="5" lastmodificationdate="2026-11-28T11:37:13+00:00">A/x.mov</path>
                  <xxh128 action="original" hashdate="2026-11-28T11:37:13+00:00">00FD03CD9996EE8CF8BE6A756BF82A42</xxh128></hash>
                <hash><path size="3">B/y.wav</path><md5 action="original">900150983cd24fb0d6963f7d28e17f72</md5></hash>
              </hashes>
              <directoryhashes><directoryhash><path>A</path><content><xxh128>00000000000000000000000000000000</xxh128></content></directoryhash></directoryhashes>
            </hashlist>
            """
        #expect(ASCMHL.parseManifest(Array(text.utf8)) == ["A/x.mov": "00fd03cd9996ee8cf8be6a756bf82a42", "B/y.wav": ""])
    }

    @Test(arguments: [
        "",
        "not xml",
        "<hashlist version=\"2.0\" xmlns=\"urn:ASC:MHL:v2.0\"><hashes><hash><path>a</path>",
        "<hashlist version=\"2.0\"><hashes><hash><path>a</path></hash></hashes></hashlist>",
        "<ascmhldirectory xmlns=\"urn:ASC:MHL:DIRECTORY:v2.0\"/>",
        "<hashlist xmlns=\"urn:ASC:MHL:v2.0\"><hashes><hash><xxh128>00fd03cd9996ee8cf8be6a756bf82a42</xxh128></hash></hashes></hashlist>",
        "<hashlist xmlns=\"urn:ASC:MHL:v2.0\"><hashes><hash><path>a</path><xxh128>not hex</xxh128></hash></hashes></hashlist>",
        "<hashlist xmlns=\"urn:ASC:MHL:v2.0\"><hashes><hash><path>a</path></hash><hash><path>a</path></hash></hashes></hashlist>",
    ])
    func parseManifestRefusesWhatIsNotAManifest(text: String) {
        #expect(ASCMHL.parseManifest(Array(text.utf8)) == nil)
    }

    /// A manifest from the bucket is hostile: an external entity is never read.
    @Test func parseManifestReadsNoExternalEntity() {
        let text = """
            <?xml version="1.0"?>
            <!DOCTYPE hashlist [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
            <hashlist xmlns="urn:ASC:MHL:v2.0"><hashes><hash><path>a&secret;</path></hash></hashes></hashlist>
            """
        let listed = ASCMHL.parseManifest(Array(text.utf8))
        #expect(listed.map { $0.keys.allSatisfy { !$0.contains("root:") } } ?? true, "\(String(describing: listed))")
    }

    @Test(arguments: [
        ("0001_card-a84fdcca_2026-11-28_194613Z.mhl", true), ("0002_ A&B <1> _2026-11-28_194613Z.mhl", true),
        ("", false), (".mhl", false), ("../0001_x.mhl", false), ("a/0001_x.mhl", false), (".hidden.mhl", false),
        ("0001_x.xml", false), ("0001\u{0}_x.mhl", false), (String(repeating: "x", count: 252) + ".mhl", false),
    ])
    func manifestFileNamesFromAChainArePlainNames(name: String, plain: Bool) {
        #expect(ASCMHL.isManifestFileName(name) == plain)
    }
}
