import Foundation
import Testing

@testable import IngestKit

/// XXH3-128 of zero bytes, as `xxh128sum < /dev/null` prints it.
private let emptyDigest = "99aa06d3014798d86001c324468d497f"

/// What `/usr/bin/xxh128sum` (the reference implementation) prints for `bytes`, written to a temp file.
private func referenceDigest(of bytes: [UInt8]) throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("fingerprint-\(UUID().uuidString)")
    try Data(bytes).write(to: url)
    defer { try? FileManager.default.removeItem(at: url) }
    let digest = String(try runTool("/usr/bin/xxh128sum", [url.path]).prefix(32))
    try #require(digest.count == 32 && digest.allSatisfy(\.isHexDigit))
    return digest
}

/// Deterministic bytes that are not a repeating pattern (SplitMix64).
private func sampleBytes(_ count: Int, seed: UInt64 = 0x1234_5678_9ABC_DEF0) -> [UInt8] {
    var state = seed
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        withUnsafeBytes(of: z) { bytes.append(contentsOf: $0.prefix(count - bytes.count)) }
    }
    return bytes
}

private func oneShot(_ bytes: [UInt8]) -> Fingerprint {
    bytes.withUnsafeBytes { Fingerprint.of($0) }
}

/// Feeds `bytes` to `hasher` in chunks of the given sizes, cycling through them.
private func stream(_ bytes: [UInt8], into hasher: FingerprintHasher, chunks: [Int]) {
    bytes.withUnsafeBytes { raw in
        var offset = 0
        var index = 0
        while offset < raw.count {
            let length = min(chunks[index % chunks.count], raw.count - offset)
            hasher.update(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]))
            offset += length
            index += 1
        }
    }
}

@Suite struct FingerprintTests {
    // MARK: against xxh128sum

    @Test func emptyInputHasTheKnownDigest() throws {
        #expect(oneShot([]).hex == emptyDigest)
        #expect(try referenceDigest(of: []) == emptyDigest)
    }

    /// Lengths on both sides of XXH3's internal size classes (16, 128, 240 bytes, stripes, blocks).
    @Test(arguments: [1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1_024, 1_025, 65_536, 1_000_003])
    func digestEqualsXxh128sum(length: Int) throws {
        let bytes = sampleBytes(length)
        #expect(oneShot(bytes).hex == (try referenceDigest(of: bytes)))
    }

    @Test func digestOfTextEqualsXxh128sum() throws {
        let bytes = Array("The quick brown fox jumps over the lazy dog\n".utf8)
        #expect(oneShot(bytes).hex == (try referenceDigest(of: bytes)))
    }

    @Test func digestsOfDifferentBytesDiffer() {
        var changed = sampleBytes(4_096)
        let original = oneShot(changed)
        changed[2_000] ^= 0x01
        #expect(oneShot(changed) != original)
    }

    // MARK: streaming

    @Test func hasherWithoutInputGivesTheEmptyDigest() {
        #expect(FingerprintHasher().finalize().hex == emptyDigest)
    }

    @Test(arguments: [
        [1],
        [7, 63, 64, 65, 1, 255, 4_097, 3],
        [1_000_003],
        [13, 240, 241],
        [65_536, 1, 65_535],
    ])
    func streamingInUnevenChunksEqualsTheOneShotDigest(chunks: [Int]) throws {
        let bytes = sampleBytes(300_007)
        let hasher = FingerprintHasher()
        stream(bytes, into: hasher, chunks: chunks)
        let streamed = hasher.finalize()
        #expect(streamed == oneShot(bytes))
        #expect(streamed.hex == (try referenceDigest(of: bytes)))
    }

    @Test func emptyUpdatesDoNotChangeTheDigest() {
        let bytes = sampleBytes(1_000)
        let hasher = FingerprintHasher()
        let nothing: [UInt8] = []
        nothing.withUnsafeBytes { hasher.update($0) }
        stream(bytes, into: hasher, chunks: [100])
        nothing.withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize() == oneShot(bytes))
    }

    @Test func resetStartsAFreshDigest() {
        let hasher = FingerprintHasher()
        stream(sampleBytes(5_000, seed: 1), into: hasher, chunks: [333])
        _ = hasher.finalize()
        hasher.reset()
        let second = sampleBytes(7_777, seed: 2)
        stream(second, into: hasher, chunks: [1_000])
        #expect(hasher.finalize() == oneShot(second))
        hasher.reset()
        #expect(hasher.finalize().hex == emptyDigest)
    }

    @Test func finalizeDoesNotEndTheStream() {
        // libxxhash's digest leaves the state usable: more input continues the same stream.
        let bytes = sampleBytes(2_000)
        let hasher = FingerprintHasher()
        stream(Array(bytes[..<1_000]), into: hasher, chunks: [1_000])
        #expect(hasher.finalize() == oneShot(Array(bytes[..<1_000])))
        stream(Array(bytes[1_000...]), into: hasher, chunks: [1_000])
        #expect(hasher.finalize() == oneShot(bytes))
    }

    // MARK: hex text

    @Test func hexIsHighThenLowZeroPaddedLowercase() {
        let fingerprint = Fingerprint(high: 0x0000_0000_0000_00AB, low: 0x0123_4567_89AB_CDEF)
        #expect(fingerprint.hex == "00000000000000ab0123456789abcdef")
        #expect(fingerprint.description == fingerprint.hex)
    }

    @Test func hexOfTheEmptyDigestSplitsIntoHighAndLow() throws {
        let fingerprint = try #require(Fingerprint(hex: emptyDigest))
        #expect(fingerprint.high == 0x99AA_06D3_0147_98D8)
        #expect(fingerprint.low == 0x6001_C324_468D_497F)
        #expect(fingerprint == oneShot([]))
    }

    @Test func hexRoundTrips() throws {
        let fingerprint = oneShot(sampleBytes(999))
        #expect(Fingerprint(hex: fingerprint.hex) == fingerprint)
    }

    @Test func uppercaseHexIsAccepted() {
        #expect(Fingerprint(hex: emptyDigest.uppercased()) == Fingerprint(hex: emptyDigest))
    }

    @Test(arguments: [
        "",
        "99aa06d3014798d86001c324468d497",  // 31 digits
        "99aa06d3014798d86001c324468d497f0",  // 33 digits
        "99aa06d3014798d86001c324468d497g",  // not hex
        "99aa06d3014798d8 6001c324468d497",  // space
        "0x9aa06d3014798d86001c324468d497f",  // prefix
    ])
    func textThatIsNotThirtyTwoHexDigitsIsRejected(text: String) {
        #expect(Fingerprint(hex: text) == nil)
    }

    /// `UInt64(_:radix:)` accepts a leading sign; a digest is digits only.
    @Test(arguments: ["+9aa06d3014798d86001c324468d497f", "99aa06d3014798d8+001c324468d497f"])
    func signedHexIsRejected(text: String) {
        #expect(Fingerprint(hex: text) == nil)
    }

    // MARK: Codable

    @Test func encodesAsItsHexString() throws {
        let data = try JSONEncoder().encode([oneShot([])])
        #expect(String(decoding: data, as: UTF8.self) == "[\"\(emptyDigest)\"]")
    }

    @Test func decodesFromItsHexString() throws {
        let decoded = try JSONDecoder().decode([Fingerprint].self, from: Data("[\"\(emptyDigest)\"]".utf8))
        #expect(decoded == [oneShot([])])
    }

    @Test func decodingRejectsTextThatIsNotADigest() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([Fingerprint].self, from: Data("[\"not a digest\"]".utf8))
        }
    }
}
