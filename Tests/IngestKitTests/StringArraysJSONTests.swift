import Foundation
import Testing

@testable import IngestKit

/// The journal's headers column, checked against Foundation's JSON as the oracle.
@Suite struct StringArraysJSONTests {
    static let samples: [[[String]]] = [
        [],
        [[]],
        [["x-amz-meta-original-name", "DJI_0001.JPG"], ["x-amz-tagging", "device=station-7&scene=dock%20north"]],
        [["quote \" backslash \\ slash /", "tab\tnewline\nreturn\rbell\u{07}nul\u{0}"]],
        [["ünïcödé 日本語", "emoji 🛰️ and a lone high scalar \u{10FFFF}"], ["", ""]],
    ]

    @Test func whatItWritesFoundationReadsAndItReadsBack() throws {
        for sample in Self.samples {
            let text = StringArraysJSON.encode(sample)
            #expect(try JSONDecoder().decode([[String]].self, from: Data(text.utf8)) == sample, "\(text)")
            #expect(StringArraysJSON.decode(text) == sample, "\(text)")
        }
    }

    @Test func itReadsWhatFoundationWroteWhitespaceAndEveryEscapeIncluded() throws {
        for sample in Self.samples {
            let text = String(decoding: try JSONEncoder().encode(sample), as: UTF8.self)
            #expect(StringArraysJSON.decode(text) == sample, "\(text)")
        }
        #expect(StringArraysJSON.decode(#" [ [ "a\/b" , "\u00e9\ud83d\udef0\b\f" ] ] "#) == [["a/b", "é🛰\u{08}\u{0C}"]])
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let sample = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                (0..<Int.random(in: 0...3, using: &random)).map { _ in
                    String(String.UnicodeScalarView((0..<Int.random(in: 0...12, using: &random)).compactMap { _ in
                        Unicode.Scalar(UInt32.random(in: 0...[0x7F, 0x800, 0x10FFFF].randomElement(using: &random)!, using: &random))
                    }))
                }
            }
            let text = String(decoding: try JSONEncoder().encode(sample), as: UTF8.self)
            #expect(StringArraysJSON.decode(text) == sample, "\(text)")
            #expect(StringArraysJSON.decode(StringArraysJSON.encode(sample)) == sample)
        }
    }

    @Test func anythingElseIsRefused() {
        for text in [
            "", "[", "[[", "[[\"a\"]", "[[\"a\"]]]", "{}", "[[1]]", "[\"a\"]", "[[\"a\",]]", "[[\"a\" \"b\"]]",
            "[[\"unterminated]]", "[[\"bad \\x escape\"]]", "[[\"raw\ncontrol\"]]", "[[\"\\ud800 lone\"]]", "[[\"\\u12\"]]",
            "[[\"a\"]] x",
        ] {
            #expect(StringArraysJSON.decode(text) == nil, "\(text)")
        }
    }
}
