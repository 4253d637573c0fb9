import Foundation

/// The `Upload-Metadata` of a tus upload: keys with byte values, as the creation request
/// sends them, `key base64(value)` pairs joined by commas (tus 1.0, "Upload-Metadata").
///
/// Keys are checked when set, so a header that the server would split differently than we
/// meant (a key with a space or a comma) is never sent. Values are bytes, not text: the
/// protocol base64-encodes them so that any bytes pass, file names that are not UTF-8 among
/// them.
public struct TusMetadata: Sendable, Equatable {
    /// The pairs by key; the header lists them sorted, so that the same metadata always
    /// makes the same header.
    public private(set) var values: [String: [UInt8]] = [:]

    public init() {}

    /// Metadata with these values; throws for the first key the protocol does not allow.
    public init(_ values: [String: [UInt8]]) throws(TusError) {
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { try set(key, value) }
    }

    /// The metadata a server's `Upload-Metadata` header holds (in a `HEAD` answer), read as
    /// hostile input: at most ``maxPairs`` pairs are kept, a pair whose key the protocol does
    /// not allow or whose value is not base64 is left out (servers write `, ` or `,` between
    /// pairs; both are read). Never fails: the header only adds to what the offset says.
    public init(headerValue: String) {
        for pair in headerValue.split(separator: ",").prefix(Self.maxPairs) {
            let words = pair.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard let key = words.first.map(String.init) else { continue }
            let value: [UInt8]
            if words.count == 2 {
                guard let decoded = Data(base64Encoded: String(words[1]).trimmingCharacters(in: .whitespaces)) else { continue }
                value = Array(decoded)
            } else {
                value = []
            }
            try? set(key, value)
        }
    }

    /// The most pairs read from a server's header: ingest sends fewer than 20.
    public static let maxPairs = 64

    /// The value of `key` as text, if it is UTF-8.
    public func text(_ key: String) -> String? {
        values[key].flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// Metadata with these text values (sent as their UTF-8 bytes).
    public init(text values: [String: String]) throws(TusError) {
        try self.init(values.mapValues { Array($0.utf8) })
    }

    /// Sets `key` to `value`, replacing any value it had: keys are unique.
    ///
    /// A key must be non-empty printable ASCII without spaces and commas: the spec says a
    /// key SHOULD NOT hold either, and a server splitting the header on them (every one
    /// does) would read another key than the one meant.
    public mutating func set(_ key: String, _ value: [UInt8]) throws(TusError) {
        guard !key.isEmpty, key.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: ",") }) else {
            throw .invalidMetadataKey(key)
        }
        values[key] = value
    }

    /// The header's value: `key base64`, joined by `,`; an empty value leaves out the space
    /// and the base64 as the spec allows. Empty when there are no pairs (the header is then
    /// not sent).
    public var headerValue: String {
        values.sorted { $0.key < $1.key }.map { key, value in
            value.isEmpty ? key : key + " " + Data(value).base64EncodedString()
        }.joined(separator: ",")
    }
}
