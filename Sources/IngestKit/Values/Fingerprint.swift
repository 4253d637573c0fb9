import CXXHash

/// A file's XXH3-128 digest: the content address of its staged copy.
///
/// ``hex`` is exactly what `xxh128sum` prints: the canonical (big-endian) form,
/// high 64 bits first, in lowercase hexadecimal.
public struct Fingerprint: Hashable, Sendable, CustomStringConvertible, Codable {
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses 32 hexadecimal digits as `xxh128sum` prints them.
    public init?(hex: String) {
        guard hex.utf8.count == 32, hex.utf8.allSatisfy({ $0.isHexDigit }),
            let high = UInt64(hex.prefix(16), radix: 16),
            let low = UInt64(hex.suffix(16), radix: 16)
        else { return nil }
        self.init(high: high, low: low)
    }

    /// 32 lower-case hex digits, as `xxh128sum` prints the digest: its 16 bytes, high half
    /// first. A file's fingerprint is spelled a dozen times on its way (its staged copy's
    /// name, its journal rows, its object's key and metadata), so byte by byte.
    public var hex: String { withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { lowercaseHex($0) } }

    public var description: String { hex }

    /// The digest of `bytes` in one call.
    public static func of(_ bytes: UnsafeRawBufferPointer) -> Fingerprint {
        let hash = xxh3_128(bytes.baseAddress, bytes.count)
        return Fingerprint(high: hash.high64, low: hash.low64)
    }

    /// The digest of an array of bytes.
    public static func of(_ bytes: [UInt8]) -> Fingerprint {
        bytes.withUnsafeBytes { Fingerprint.of($0) }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = Fingerprint(hex: text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not an XXH3-128 digest: \(text)"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}

// libxxhash's plain entry points are built for SSE2; on x86-64 its dispatching ones use
// AVX2 or AVX-512 where the CPU has them: several times faster here.
#if arch(x86_64)
private let xxh3_128 = XXH3_128bits_dispatch
private let xxh3_128Update = XXH3_128bits_update_dispatch
#else
private let xxh3_128 = XXH3_128bits
private let xxh3_128Update = XXH3_128bits_update
#endif

/// Streaming XXH3-128 over a file read in chunks (libxxhash's `XXH3_state_t`).
///
/// Not thread-safe: one hasher belongs to the one thread reading the file.
final class FingerprintHasher {
    private let state: OpaquePointer

    init() {
        guard let state = XXH3_createState() else {
            fatalError("XXH3_createState failed: out of memory")
        }
        self.state = state
        XXH3_128bits_reset(state)
    }

    deinit { XXH3_freeState(state) }

    /// Starts a new digest, reusing the state.
    func reset() { XXH3_128bits_reset(state) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        // Only fails for a NULL state, which init rules out.
        _ = xxh3_128Update(state, bytes.baseAddress, bytes.count)
    }

    func finalize() -> Fingerprint {
        let hash = XXH3_128bits_digest(state)
        return Fingerprint(high: hash.high64, low: hash.low64)
    }
}
