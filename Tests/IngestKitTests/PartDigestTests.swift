import Foundation
import Testing

@testable import IngestKit

/// CRC32C bit by bit, straight from its definition (reflected polynomial 0x82F63B78, initial
/// value and final XOR all ones): the oracle that ISA-L's folded, vectorised code is held to.
private func referenceCRC32C(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}

/// What `openssl md5 -binary` gives for a byte range of a file cut out by `dd`, in base64.
private func opensslMD5(_ path: String, offset: Int, length: Int) throws -> String {
    try sh(
        "dd if=\(shellQuoted(path)) iflag=skip_bytes,count_bytes skip=\(offset) count=\(length) bs=1M status=none "
            + "| openssl md5 -binary | base64"
    ).trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite struct CRC32CTests {
    /// The check value of the CRC catalogue, and RFC 3720's (iSCSI) appendix B.4 vectors.
    @Test(arguments: [
        (Array("123456789".utf8), UInt32(0xE306_9283)),
        ([UInt8](), UInt32(0)),
        ([UInt8](repeating: 0, count: 32), UInt32(0x8A91_36AA)),
        ([UInt8](repeating: 0xFF, count: 32), UInt32(0x62A8_AB43)),
        ((0..<32).map { UInt8($0) }, UInt32(0x46DD_794E)),
        ((0..<32).reversed().map { UInt8($0) }, UInt32(0x113F_DB5C)),
    ])
    func publishedVectors(bytes: [UInt8], crc: UInt32) {
        #expect(PartDigest.compute(.crc32c, bytes: bytes).crc32c == crc)
        #expect(referenceCRC32C(bytes) == crc, "the reference itself is right")
    }

    @Test func isaLAgreesWithTheBitwiseDefinitionAtEveryLengthAndAlignment() {
        let bytes = randomBytes(4099)
        for start in 0..<9 {
            for length in [0, 1, 7, 8, 15, 16, 63, 64, 255, 256, 1023, 4090] {
                let slice = bytes[start..<(start + length)]
                #expect(PartDigest.compute(.crc32c, bytes: Array(slice)).crc32c == referenceCRC32C(slice))
            }
        }
    }

    @Test func updatingInPiecesIsTheCRCOfTheWhole() {
        let bytes = randomBytes(100_003)
        let whole = bytes.withUnsafeBytes { CRC32C.update(0, $0) }
        for cut in [0, 1, 4096, 65_537, 100_003] {
            let first = bytes[..<cut].withUnsafeBytes { CRC32C.update(0, $0) }
            #expect(bytes[cut...].withUnsafeBytes { CRC32C.update(first, $0) } == whole)
        }
    }
}

@Suite struct PartDigestTests {
    /// Offsets and lengths around the 1 MiB read buffer, so that ranges end inside, exactly at
    /// and just after a buffer's worth.
    static let buffer = PartDigest.readBufferSize
    static let ranges: [(offset: Int, length: Int)] = [
        (0, 0), (0, 1), (5, 9), (0, buffer - 1), (0, buffer), (0, buffer + 1), (3, buffer),
        (buffer - 1, 2), (buffer, buffer), (7, 2 * buffer + 13), (0, 3 * buffer + 5),
    ]

    @Test func md5OfFileRangesIsWhatOpenSSLComputesForTheSameBytes() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("staged", randomBytes(3 * Self.buffer + 5))
        for (offset, length) in Self.ranges {
            let digest = try PartDigest.compute(.md5, path: path, offset: Int64(offset), length: Int64(length))
            #expect(digest.base64 == (try opensslMD5(path, offset: offset, length: length)), "range \(offset)+\(length)")
            #expect(digest.headers == [SigV4Header("Content-MD5", digest.base64)])
        }
    }

    @Test func crc32cOfFileRangesIsTheCRCOfThoseBytesReadInOnePiece() throws {
        let directory = TemporaryDirectory()
        let bytes = randomBytes(3 * Self.buffer + 5)
        let path = try directory.write("staged", bytes)
        for (offset, length) in Self.ranges {
            let digest = try PartDigest.compute(.crc32c, path: path, offset: Int64(offset), length: Int64(length))
            let slice = Array(bytes[offset..<(offset + length)])
            #expect(digest == PartDigest.compute(.crc32c, bytes: slice), "range \(offset)+\(length)")
        }
        // One range with the bitwise definition too: the buffering is checked against
        // something that shares no code with it.
        let digest = try PartDigest.compute(.crc32c, path: path, offset: 3, length: Int64(Self.buffer) + 10)
        #expect(digest.crc32c == referenceCRC32C(bytes[3..<(3 + Self.buffer + 10)]))
    }

    @Test func aRangeBeyondTheEndOfTheFileIsAnIOErrorAndAMissingFileNamesItsPath() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("short", randomBytes(100))
        #expect(throws: SystemError(call: "pread", errno: .ioError, path: path)) {
            try PartDigest.compute(.crc32c, path: path, offset: 50, length: 51)
        }
        #expect(throws: SystemError(call: "open", errno: .noSuchFileOrDirectory, path: path + ".gone")) {
            try PartDigest.compute(.md5, path: path + ".gone", offset: 0, length: 1)
        }
    }

    @Test func headersCarryTheBase64DigestUnderTheAlgorithmsName() {
        let crc = PartDigest.compute(.crc32c, bytes: Array("123456789".utf8))
        #expect(crc.bytes == [0xE3, 0x06, 0x92, 0x83], "big-endian, as S3 encodes it")
        #expect(crc.headers == [SigV4Header("x-amz-sdk-checksum-algorithm", "CRC32C"), SigV4Header("x-amz-checksum-crc32c", "4waSgw==")])
        #expect(PartDigest.compute(.md5, bytes: []).headers == [SigV4Header("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")])
        #expect(
            PartDigestAlgorithm.crc32c.createMultipartUploadHeaders
                == [SigV4Header("x-amz-checksum-algorithm", "CRC32C"), SigV4Header("x-amz-checksum-type", "COMPOSITE")])
        #expect(PartDigestAlgorithm.md5.createMultipartUploadHeaders.isEmpty)
    }

    @Test func journalTextAndJSONRoundTrip() throws {
        let digests = [
            PartDigest(crc32c: 0xE306_9283), PartDigest(crc32c: 0), PartDigest.compute(.md5, bytes: Array("x".utf8)),
        ]
        #expect(digests.map(\.journalText) == ["crc32c:4waSgw==", "crc32c:AAAAAA==", "md5:ndTkYSaMgDT1yFZOFVxnpg=="])
        for digest in digests {
            #expect(try PartDigest(journalText: digest.journalText) == digest)
        }
        let json = try JSONEncoder().encode(digests)
        #expect(String(decoding: json, as: UTF8.self) == #"["crc32c:4waSgw==","crc32c:AAAAAA==","md5:ndTkYSaMgDT1yFZOFVxnpg=="]"#)
        #expect(try JSONDecoder().decode([PartDigest].self, from: json) == digests)
    }

    @Test(arguments: ["", "crc32c", "crc32c:", "crc32c:AAAA", "md5:4waSgw==", "sha1:4waSgw==", "CRC32C:4waSgw==", "crc32c:!!!!"])
    func malformedJournalTextIsRefusedNamingTheExpectedForm(text: String) {
        #expect(throws: PartDigestError.malformed(text)) { try PartDigest(journalText: text) }
        #expect(PartDigestError.malformed(text).description.contains("crc32c:<base64 of 4 bytes>"))
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([PartDigest].self, from: Data(#"["\#(text)"]"#.utf8)) }
    }

    @Test func aDigestOfTheWrongLengthCannotBeMade() {
        #expect(PartDigest(algorithm: .crc32c, bytes: [1, 2, 3]) == nil)
        #expect(PartDigest(algorithm: .md5, bytes: [1, 2, 3, 4]) == nil)
        #expect(PartDigest(algorithm: .crc32c, bytes: [1, 2, 3, 4])?.crc32c == 0x0102_0304)
        #expect(PartDigest.compute(.md5, bytes: []).crc32c == nil)
    }
}

@Suite struct WholeObjectDigestTests {
    /// Three parts, each 5 MiB but the last, cut from one file.
    static func parts() throws -> (directory: TemporaryDirectory, path: String, ranges: [(Int, Int)]) {
        let directory = TemporaryDirectory()
        let path = try directory.write("staged", randomBytes((10 << 20) + 12345))
        return (directory, path, [(0, 5 << 20), (5 << 20, 5 << 20), (10 << 20, 12345)])
    }

    @Test func multipartETagIsTheMD5OfThePartMD5sAsOpenSSLComputesIt() throws {
        let (directory, path, ranges) = try Self.parts()
        _ = directory
        let digests = try ranges.map { try PartDigest.compute(.md5, path: path, offset: Int64($0.0), length: Int64($0.1)) }
        let partMD5s = ranges.map {
            "dd if=\(shellQuoted(path)) iflag=skip_bytes,count_bytes skip=\($0.0) count=\($0.1) bs=1M status=none "
                + "| openssl md5 -binary"
        }.joined(separator: "; ")
        let oracle = try sh("{ \(partMD5s); } | openssl md5 -hex | sed 's/^.*= //'")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let expected = WholeObjectDigest.expected(parts: digests, lengths: ranges.map { Int64($0.1) })
        #expect(expected == .etag("\(oracle)-3"))
        #expect(!expected.needsChecksumMode)
    }

    @Test func compositeCRC32CIsTheCRCOfTheBigEndianPartCRCs() throws {
        let (directory, path, ranges) = try Self.parts()
        _ = directory
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let digests = try ranges.map { try PartDigest.compute(.crc32c, path: path, offset: Int64($0.0), length: Int64($0.1)) }
        let partCRCs = ranges.map { referenceCRC32C(bytes[$0.0..<($0.0 + $0.1)]) }
        #expect(digests.map(\.crc32c) == partCRCs)
        let composite = referenceCRC32C(partCRCs.flatMap { withUnsafeBytes(of: $0.bigEndian) { Array($0) } })
        let base64 = Data(withUnsafeBytes(of: composite.bigEndian) { Array($0) }).base64EncodedString()
        let whole = Data(withUnsafeBytes(of: referenceCRC32C(bytes[...]).bigEndian) { Array($0) }).base64EncodedString()
        let expected = WholeObjectDigest.expected(parts: digests, lengths: ranges.map { Int64($0.1) })
        #expect(expected == .crc32c(composite: "\(base64)-3", fullObject: whole))
        #expect(expected.needsChecksumMode)
    }

    /// The full-object CRC of a multipart object follows from its parts' CRCs and lengths:
    /// held to the bitwise CRC of the whole, for cuts of every shape (empty parts included).
    @Test func combinedPartCRCsAreTheCRCOfTheWhole() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for cuts in [[0, 70_000], [1, 69_999], [5, 0, 69_995], [4096, 65_904], [33_333, 33_333, 3_334]] {
            var offset = 0
            var combined = UInt32(0)
            for length in cuts {
                let part = referenceCRC32C(bytes[offset..<(offset + length)])
                combined = CRC32C.combine(combined, part, lengthOfB: Int64(length))
                offset += length
            }
            #expect(combined == referenceCRC32C(bytes[...]), "cut as \(cuts)")
        }
        // Lengths past 4 GiB (a card's 20 GiB clip in 2 GiB parts) take the higher powers of
        // x: shifting past n bytes then m bytes is shifting past n + m, whatever the CRCs.
        let (a, b, c) = (referenceCRC32C(bytes[0..<100]), referenceCRC32C(bytes[100..<200]), UInt32(0x1234_5678))
        for (n, m) in [(Int64(3) << 30, Int64(2) << 30), (Int64(20) << 30, 1), (Int64(1) << 40, (Int64(1) << 40) + 7)] {
            #expect(
                CRC32C.combine(CRC32C.combine(a, b, lengthOfB: n), c, lengthOfB: m)
                    == CRC32C.combine(a, CRC32C.combine(b, c, lengthOfB: m), lengthOfB: n + m), "\(n) then \(m)")
        }
    }

    /// Values SeaweedFS 4.48 returned for two parts: part ETags d618… and 4a2a…, part CRCs
    /// h5UW1w== and 3V/oKQ==; the object's ETag and composite checksum.
    @Test func serverReportedValuesAreReproduced() throws {
        func digest(_ algorithm: PartDigestAlgorithm, hex: String) -> PartDigest {
            let bytes = stride(from: 0, to: hex.count, by: 2).map {
                UInt8(hex.dropFirst($0).prefix(2), radix: 16)!
            }
            return PartDigest(algorithm: algorithm, bytes: bytes)!
        }
        let md5s = [digest(.md5, hex: "4a2a1bef639a82a838e019869cff5257"), digest(.md5, hex: "d618f586333b1afa74451f15899ec99c")]
        #expect(WholeObjectDigest.expected(parts: md5s, lengths: [5 << 20, 5 << 20]) == .etag("ec8b0c814e9017d7e93f12f72a614501-2"))
        let crcs = try ["crc32c:h5UW1w==", "crc32c:3V/oKQ=="].map { try PartDigest(journalText: $0) }
        guard case .crc32c(let composite, _) = WholeObjectDigest.expected(parts: crcs, lengths: [5 << 20, 5 << 20]) else {
            Issue.record("CRC32C parts make a CRC32C digest")
            return
        }
        #expect(composite == "NBd6rA==-2")
    }

    @Test func singlePutExpectsThePlainDigest() {
        let body = Array("hello".utf8)
        #expect(WholeObjectDigest.expected(singlePut: .compute(.md5, bytes: body)) == .etag("5d41402abc4b2a76b9719d911017c592"))
        #expect(WholeObjectDigest.expected(singlePut: .compute(.crc32c, bytes: [])) == .crc32c(composite: "AAAAAA==", fullObject: "AAAAAA=="))
    }

    @Test func etagChecks() {
        let single = WholeObjectDigest.etag("5d41402abc4b2a76b9719d911017c592")
        let multi = WholeObjectDigest.etag("ec8b0c814e9017d7e93f12f72a614501-2")
        func head(_ etag: String?, sse: String? = nil, customer: String? = nil) -> ObjectHead {
            ObjectHead(size: 5, etag: etag, serverSideEncryption: sse, customerKeyAlgorithm: customer)
        }
        #expect(single.check(head("\"5d41402abc4b2a76b9719d911017c592\"")) == .matches)
        #expect(single.check(head("\"5D41402ABC4B2A76B9719D911017C592\"")) == .matches, "hex case does not matter")
        #expect(multi.check(head("\"ec8b0c814e9017d7e93f12f72a614501-2\"")) == .matches)
        #expect(single.check(head("\"5d41402abc4b2a76b9719d911017c592\"", sse: "AES256")) == .matches, "SSE-S3 keeps MD5 ETags")
        #expect(
            multi.check(head("\"ec8b0c814e9017d7e93f12f72a614501-3\""))
                == .mismatch(expected: "ec8b0c814e9017d7e93f12f72a614501-2", found: "ec8b0c814e9017d7e93f12f72a614501-3"))
        #expect(
            single.check(head("\"00000000000000000000000000000000\""))
                == .mismatch(expected: "5d41402abc4b2a76b9719d911017c592", found: "00000000000000000000000000000000"))

        for notComparable in [
            head(nil), head("\"6f1b8cf9f1c12fc8a39bd0b3a5d6a5e0\"", sse: "aws:kms"),
            head("\"6f1b8cf9f1c12fc8a39bd0b3a5d6a5e0\"", customer: "AES256"), head("\"not-an-md5\""),
        ] {
            guard case .notComparable(let reason) = single.check(notComparable) else {
                Issue.record("\(notComparable) should not be comparable")
                continue
            }
            #expect(reason.contains("size and fingerprint checks still apply"))
        }
        // A multipart object whose ETag has no part count is from a server with its own scheme.
        guard case .notComparable = multi.check(head("\"6f1b8cf9f1c12fc8a39bd0b3a5d6a5e0\"")) else {
            Issue.record("a multipart ETag without -N is not comparable")
            return
        }
    }

    /// Each form a server may report a multipart object's CRC32C in: composite (`-N`, S3's
    /// default and SeaweedFS's), full-object (moto, or S3 asked for `FULL_OBJECT`), each
    /// with or without `x-amz-checksum-type`, and none (Ceph RGW before Squid).
    @Test func everyChecksumFormIsUnderstood() {
        let expected = WholeObjectDigest.crc32c(composite: "NBd6rA==-2", fullObject: "kRgY/g==")
        func head(_ checksum: String?, type: String? = nil) -> ObjectHead {
            ObjectHead(size: 5, etag: "\"ec8b0c814e9017d7e93f12f72a614501-2\"", checksumCRC32C: checksum, checksumType: type)
        }
        #expect(expected.check(head("NBd6rA==-2", type: "COMPOSITE")) == .matches)
        #expect(expected.check(head("NBd6rA==-2")) == .matches)
        #expect(expected.check(head("kRgY/g==", type: "FULL_OBJECT")) == .matches)
        #expect(expected.check(head("kRgY/g==")) == .matches, "a value without -N is a full-object CRC")
        #expect(expected.check(head("NBd6rA==")) == .matches, "or a composite one without its part count (moto's HEAD)")
        #expect(expected.check(head("NBd6rA==", type: "COMPOSITE")) == .matches)
        #expect(expected.check(head("NBd6rA==", type: "FULL_OBJECT")) == .mismatch(expected: "kRgY/g==", found: "NBd6rA=="))
        #expect(expected.check(head("AAAAAA==-2")) == .mismatch(expected: "NBd6rA==-2", found: "AAAAAA==-2"))
        #expect(expected.check(head("AAAAAA==")) == .mismatch(expected: "NBd6rA== or kRgY/g==", found: "AAAAAA=="))
        #expect(expected.check(head("AAAAAA==", type: "full_object")) == .mismatch(expected: "kRgY/g==", found: "AAAAAA=="))
        guard case .notComparable(let reason) = expected.check(head(nil)) else {
            Issue.record("no checksum is not comparable")
            return
        }
        #expect(reason.contains("size and fingerprint checks still apply"))
        let single = WholeObjectDigest.expected(singlePut: PartDigest(crc32c: 0xE306_9283))
        #expect(single.check(head("4waSgw==")) == .matches)
        #expect(single.check(head("4waSgw==", type: "FULL_OBJECT")) == .matches)
    }
}

/// Part checksums computed on the fly, as the stager reads a card in chunks that know
/// nothing of part boundaries, held to the bitwise CRC32C of each part's bytes.
@Suite struct PartChecksummerTests {
    static let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    static func checksums(_ bytes: [UInt8], partSize: Int64?, pieceSize: Int) -> PartChecksums {
        var checksummer = PartChecksummer(partSize: partSize)
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + pieceSize, bytes.count)
            bytes[offset..<end].withUnsafeBytes { checksummer.update($0) }
            offset = end
        }
        return checksummer.finish()
    }

    @Test(arguments: [1, 3, 7, 96, 97, 1000])
    func piecesOfAnySizeGiveEachPartTheCRCOfExactlyItsBytes(pieceSize: Int) {
        let checksums = Self.checksums(Self.bytes, partSize: 96, pieceSize: pieceSize)
        let expected = stride(from: 0, to: 1000, by: 96).map { referenceCRC32C(Self.bytes[$0..<min($0 + 96, 1000)]) }
        #expect(expected.count == 11)  // ten parts of 96 bytes and one of 40
        #expect(checksums.crc32c == expected)
        #expect(checksums.partSize == 96)
    }

    @Test func aFileThatIsAWholeNumberOfPartsEndsWithAFullPart() {
        let checksums = Self.checksums(Array(Self.bytes[..<960]), partSize: 96, pieceSize: 100)
        #expect(checksums.crc32c.count == 10)
        #expect(checksums.crc32c.last == referenceCRC32C(Self.bytes[864..<960]))
    }

    @Test func aSinglePutHasOneChecksumEvenForAnEmptyFile() {
        #expect(Self.checksums([], partSize: nil, pieceSize: 1).crc32c == [0])
        #expect(Self.checksums(Array("123456789".utf8), partSize: nil, pieceSize: 4).crc32c == [0xE306_9283])
    }

    @Test func theCutIsThePartPlans() throws {
        let mebibyte: Int64 = 1 << 20
        let small = try #require(PartChecksummer(fileSize: 10 * mebibyte, preferredPartSize: 16 * mebibyte, singlePutThreshold: 16 * mebibyte))
        #expect(small.finish().partSize == nil)
        let large = try #require(PartChecksummer(fileSize: 40 * mebibyte, preferredPartSize: 16 * mebibyte, singlePutThreshold: 16 * mebibyte))
        #expect(large.finish().partSize == 16 * mebibyte)
        #expect(PartChecksummer(fileSize: 40 * mebibyte, preferredPartSize: 1 * mebibyte, singlePutThreshold: 0) == nil)
    }

    @Test func aDigestIsGivenOnlyForAnUploadCutTheSameWay() {
        let checksums = Self.checksums(Self.bytes, partSize: 96, pieceSize: 50)
        #expect(checksums.digest(ofPart: 1, partSize: 96) == PartDigest(crc32c: referenceCRC32C(Self.bytes[0..<96])))
        #expect(checksums.digest(ofPart: 11, partSize: 96) != nil)
        #expect(checksums.digest(ofPart: 12, partSize: 96) == nil)
        #expect(checksums.digest(ofPart: 0, partSize: 96) == nil)
        #expect(checksums.digest(ofPart: 1, partSize: 128) == nil)
        #expect(checksums.digest(ofPart: 1, partSize: nil) == nil)
    }
}
