import Foundation
import TOMLKit

extension TOMLTable {
    /// The dotted key path of the first key or string value, in key order, that holds a NUL
    /// (U+0000), with the NUL shown as `U+0000`; nil when there is none.
    ///
    /// TOML lets a string say `"a\u0000b"`, and TOMLKit hands keys and strings over as C
    /// strings, which end at the first NUL: that value would silently read as `"a"`. The
    /// table's JSON form escapes every control character, so the exact keys and strings are
    /// read from it instead. If that form cannot be read back, the path is `"?"`: better a
    /// refusal than a value cut short without a word.
    func keyPathHoldingNUL() -> String? {
        let json = convert(to: .json, options: [.quoteDateAndTimes, .quoteInfinitesAndNaNs, .allowUnicodeStrings])
        guard let root = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) else {
            return "?"
        }
        return Self.keyPathHoldingNUL(in: root, path: [])
    }

    private static func keyPathHoldingNUL(in value: Any, path: [String]) -> String? {
        func shown(_ path: [String]) -> String {
            path.map { key in
                key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? LabelSet.visible($0) : String($0) }.joined()
            }.joined(separator: ".")
        }
        switch value {
        case let table as [String: Any]:
            for key in table.keys.sorted() {
                let here = path + [key]
                if key.unicodeScalars.contains("\u{0}") { return shown(here) }
                if let found = keyPathHoldingNUL(in: table[key]!, path: here) { return found }
            }
            return nil
        case let array as [Any]:
            for (index, element) in array.enumerated() {
                if let found = keyPathHoldingNUL(in: element, path: path + ["\(index)"]) { return found }
            }
            return nil
        case let string as String:
            return string.unicodeScalars.contains("\u{0}") ? shown(path) : nil
        default:
            return nil
        }
    }
}
