import Crypto
import Foundation

/// Which digest goes with every part (and single PUT) so that the server refuses bytes that
/// changed on the way, and which whole-object value is checked after completion.
///
/// CRC32C is the one to use, by measurement on the 2-core station (docs/benchmarks.md): the
/// CRC itself (ISA-L's `crc32_iscsi`) costs next to nothing, and a part's digest from the
/// page cache is nearly all the copy out of the cache; MD5 costs many times more CPU
/// (swift-crypto and `openssl md5` alike), more than the SHA-256 of the signed payload.
/// SeaweedFS 4.48 (the test server) verifies both:
/// a part or object whose bytes do not match either header is refused with `BadDigest`.
/// MD5 stays for servers that verify `Content-MD5` only (older S3-compatible servers).
public enum PartDigestAlgorithm: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// `x-amz-checksum-crc32c` on each part; the whole object's composite checksum
    /// (`x-amz-checksum-crc32c: <base64>-N`) read back with HEAD's checksum mode.
    case crc32c = "CRC32C"
    /// `Content-MD5` on each part; the whole object's ETag (the MD5 of the part MD5s, `-N`).
    case md5 = "MD5"

    /// The digest's length in bytes.
    public var byteCount: Int {
        switch self {
        case .crc32c: 4
        case .md5: 16
        }
    }

    /// Headers for `CreateMultipartUpload`. With CRC32C the server is told the algorithm, so
    /// that it keeps the parts' checksums and reports the composite one for the object
    /// (without it SeaweedFS 4.48 still checks each part, but reports no checksum for the
    /// object, so the whole-object check has nothing to compare). The type is asked for too,
    /// `COMPOSITE` (S3's default for CRC32C, which S3 also computes as `FULL_OBJECT` when
    /// asked), so that the answer does not depend on a server's default; servers that know no
    /// checksum types ignore it. MD5 needs nothing: S3 servers keep the multipart ETag anyway.
    public var createMultipartUploadHeaders: [SigV4Header] {
        switch self {
        case .crc32c: [SigV4Header("x-amz-checksum-algorithm", rawValue), SigV4Header("x-amz-checksum-type", "COMPOSITE")]
        case .md5: []
        }
    }

    /// The element that carries a part's digest inside `<Part>` of `CompleteMultipartUpload`;
    /// nil for MD5, which S3 finds through the ETag.
    var completeElementName: String? {
        switch self {
        case .crc32c: "ChecksumCRC32C"
        case .md5: nil
        }
    }

    /// The journal's lower-case name, as in `crc32c:...`.
    fileprivate var journalName: String { rawValue.lowercased() }

    public var description: String { rawValue }
}

/// The digest of one part (or of a single PUT's body): what is sent with it, what the
/// journal keeps, and what the whole-object check is computed from.
///
/// The journal and `Codable` form is `<algorithm>:<base64>`, e.g. `crc32c:4waSgw==` or
/// `md5:1B2M2Y8AsgTpgAmY7PhCfg==`: self-describing, so a journal written with one algorithm
/// is still read right after the configuration changes to the other.
public struct PartDigest: Sendable, Hashable, Codable, CustomStringConvertible {
    public let algorithm: PartDigestAlgorithm
    /// The digest as S3 encodes it: CRC32C's 4 bytes big-endian, or MD5's 16 bytes.
    public let bytes: [UInt8]

    /// A digest of `algorithm`'s length; nil when `bytes` is not that long.
    public init?(algorithm: PartDigestAlgorithm, bytes: [UInt8]) {
        guard bytes.count == algorithm.byteCount else { return nil }
        self.algorithm = algorithm
        self.bytes = bytes
    }

    /// A CRC32C digest from its numeric value.
    public init(crc32c value: UInt32) {
        algorithm = .crc32c
        bytes = withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    /// The CRC32C value, for a CRC32C digest.
    public var crc32c: UInt32? {
        guard algorithm == .crc32c else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Base64 of ``bytes``: the header value, and the form in `<ChecksumCRC32C>`.
    public var base64: String { Data(bytes).base64EncodedString() }

    /// Headers to send (and sign) with the `UploadPart` or `PutObject` that carries these
    /// bytes: the server computes the same digest over what it received and refuses the
    /// request with `BadDigest` when they differ. With CRC32C, the algorithm is named too, as
    /// the AWS SDKs name it (`x-amz-sdk-checksum-algorithm`): moto keeps and echoes a
    /// `PutObject`'s checksum only then. (Ceph RGW before Squid checks neither CRC32C
    /// header; ``ConditionalWriteTrial/echoedCRC32C`` finds that out.)
    public var headers: [SigV4Header] {
        switch algorithm {
        case .crc32c: [SigV4Header("x-amz-sdk-checksum-algorithm", "CRC32C"), SigV4Header("x-amz-checksum-crc32c", base64)]
        case .md5: [SigV4Header("Content-MD5", base64)]
        }
    }

    /// The form the journal keeps: `crc32c:<base64>` or `md5:<base64>`.
    public var journalText: String { "\(algorithm.journalName):\(base64)" }

    /// Reads ``journalText`` back.
    public init(journalText text: String) throws(PartDigestError) {
        let pieces = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard pieces.count == 2,
            let algorithm = PartDigestAlgorithm.allCases.first(where: { $0.journalName == pieces[0] }),
            let decoded = Data(base64Encoded: String(pieces[1])),
            let digest = PartDigest(algorithm: algorithm, bytes: Array(decoded))
        else { throw .malformed(text) }
        self = digest
    }

    public var description: String { journalText }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(journalText: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(error)"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(journalText)
    }
}

/// A part digest that cannot be read back.
public enum PartDigestError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)

    public var description: String {
        switch self {
        case .malformed(let text):
            "'\(text)' is not a part digest (expected crc32c:<base64 of 4 bytes> or md5:<base64 of 16 bytes>): "
                + "the journal entry is damaged (a disk fault, or a journal written by a newer ingest), "
                + "so the part cannot count as sent and must be sent again"
        }
    }
}

// MARK: Computing

extension PartDigest {
    /// The read buffer: 1 MiB, allocated once per part and reused for every read of it. Large
    /// enough that a read costs little next to the digest of its bytes, small enough that
    /// parts digested at once cost no real memory.
    static let readBufferSize = 1 << 20

    /// The digest of `length` bytes at `offset` of the file at `path` (a part of a staged
    /// file, or all of it for a single PUT).
    ///
    /// Blocking: it reads the range from disk. The uploader calls it on a dedicated thread
    /// (``onDedicatedThread(_:_:)``), never on the Swift concurrency pool.
    ///
    /// The range is read past the page cache (``FileRangeReader``), like the transport reads
    /// it to send it: caching it here would save that read nothing.
    ///
    /// - Throws: the failing call's ``SystemError``; a file shorter than the range is `EIO`
    ///   on `pread`, as the transport reports it: the staged copy is damaged.
    public static func compute(
        _ algorithm: PartDigestAlgorithm, path: String, offset: Int64, length: Int64
    ) throws(SystemError) -> PartDigest {
        let blockSize = min(readBufferSize, max(Int(length + 4095) / 4096 * 4096, 4096))
        let reader = try FileRangeReader(path: path, offset: offset, length: length, buffer: AlignedBuffer(size: blockSize))
        var accumulator = Accumulator(algorithm)
        while case let bytes = try reader.next(), !bytes.isEmpty { accumulator.update(bytes) }
        return accumulator.finish()
    }

    /// The digest of bytes held in memory (a small body sent as `.bytes`).
    public static func compute(_ algorithm: PartDigestAlgorithm, bytes: [UInt8]) -> PartDigest {
        var accumulator = Accumulator(algorithm)
        bytes.withUnsafeBytes { accumulator.update($0) }
        return accumulator.finish()
    }

    /// A digest being computed over bytes that arrive in pieces.
    private enum Accumulator {
        case crc32c(UInt32)
        case md5(Insecure.MD5)

        init(_ algorithm: PartDigestAlgorithm) {
            switch algorithm {
            case .crc32c: self = .crc32c(0)
            case .md5: self = .md5(Insecure.MD5())
            }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch self {
            case .crc32c(let crc):
                self = .crc32c(CRC32C.update(crc, bytes))
            case .md5(var md5):
                md5.update(bufferPointer: bytes)
                self = .md5(md5)
            }
        }

        func finish() -> PartDigest {
            switch self {
            case .crc32c(let crc): PartDigest(crc32c: crc)
            case .md5(let md5): PartDigest(algorithm: .md5, bytes: Array(md5.finalize()))!
            }
        }
    }
}

// MARK: The whole object

/// What the server must report for a completed object, computed from the digests of the
/// parts that were sent: checked once after `Complete` (or a single PUT) with `HeadObject`.
///
/// The part digests only prove each part arrived intact; this proves the object is those
/// parts, all of them, in that order.
public enum WholeObjectDigest: Sendable, Hashable, CustomStringConvertible {
    /// The ETag without quotes, in lower-case hex: a single PUT's is the MD5 of its body; a
    /// multipart object's is the MD5 of the parts' binary MD5s, concatenated in part order,
    /// then `-` and the part count.
    case etag(String)
    /// The `x-amz-checksum-crc32c` value, in the two forms S3 servers report it in; a single
    /// PUT's is the base64 CRC32C of its body in both.
    /// - `composite` (S3's default for a multipart upload, and SeaweedFS's): the base64 CRC32C
    ///   of the parts' big-endian CRC32Cs, concatenated in part order, then `-` and the part
    ///   count.
    /// - `fullObject` (`x-amz-checksum-type: FULL_OBJECT`, what moto reports): the CRC32C of
    ///   every byte of the object, combined from the parts' CRCs and lengths
    ///   (``CRC32C/combine(_:_:lengthOfB:)``), so no byte is read twice.
    case crc32c(composite: String, fullObject: String)

    /// What a multipart object made of `parts` must report. `parts` are in part-number order,
    /// one per part (1 to 10,000), all of one algorithm, with their byte counts in
    /// `lengths`: an upload keeps its algorithm from creation to completion, so a mixture is
    /// a bug in the caller and traps.
    public static func expected(parts: [PartDigest], lengths: [Int64]) -> WholeObjectDigest {
        precondition(!parts.isEmpty, "a multipart object has at least one part")
        precondition(lengths.count == parts.count, "one length per part, got \(lengths.count) for \(parts.count)")
        let algorithm = parts[0].algorithm
        precondition(
            parts.allSatisfy { $0.algorithm == algorithm },
            "the parts of one upload have one digest algorithm, got \(Set(parts.map(\.algorithm)))")
        let concatenated = parts.flatMap(\.bytes)
        let digest = PartDigest.compute(algorithm, bytes: concatenated)
        switch algorithm {
        case .crc32c:
            var whole = UInt32(0)
            for (part, length) in zip(parts, lengths) { whole = CRC32C.combine(whole, part.crc32c!, lengthOfB: length) }
            return .crc32c(composite: "\(digest.base64)-\(parts.count)", fullObject: PartDigest(crc32c: whole).base64)
        case .md5: return .etag("\(lowercaseHex(digest.bytes))-\(parts.count)")
        }
    }

    /// What an object sent with one `PutObject` whose body has `digest` must report.
    public static func expected(singlePut digest: PartDigest) -> WholeObjectDigest {
        switch digest.algorithm {
        case .crc32c: .crc32c(composite: digest.base64, fullObject: digest.base64)
        case .md5: .etag(lowercaseHex(digest.bytes))
        }
    }

    /// Whether the `HeadObject` that reads this back must ask for checksums
    /// (`x-amz-checksum-mode: ENABLED`): S3 reports them only then.
    public var needsChecksumMode: Bool {
        if case .crc32c = self { return true }
        return false
    }

    /// Compares with what `HeadObject` reported.
    public func check(_ head: ObjectHead) -> WholeObjectCheck {
        switch self {
        case .etag(let expected): Self.checkETag(expected: expected, head: head)
        case let .crc32c(composite, fullObject): Self.checkCRC32C(composite: composite, fullObject: fullObject, head: head)
        }
    }

    public var description: String {
        switch self {
        case .etag(let value): "ETag \"\(value)\""
        case let .crc32c(composite, fullObject) where composite == fullObject: "x-amz-checksum-crc32c \(composite)"
        case let .crc32c(composite, fullObject):
            "x-amz-checksum-crc32c \(composite) (composite) or \(fullObject) (full object)"
        }
    }

    private static func checkETag(expected: String, head: ObjectHead) -> WholeObjectCheck {
        guard let raw = head.etag else {
            return .notComparable("the server sent no ETag; the size and fingerprint checks still apply")
        }
        let found = ETag.unquoted(raw).lowercased()
        if found == expected { return .matches }
        if let encryption = head.encryptionHidingMD5 {
            return .notComparable(
                "the object is encrypted with \(encryption), whose ETag is not the MD5 of the content; "
                    + "the size and fingerprint checks still apply (use CRC32C part digests to check such objects)")
        }
        let isMultipart = expected.contains("-")
        guard Self.isMD5ETag(found, multipart: isMultipart) else {
            return .notComparable(
                "the server's ETag \(raw) is not an MD5\(isMultipart ? " of part MD5s (-N)" : "") "
                    + "(this server computes ETags its own way); the size and fingerprint checks still apply")
        }
        return .mismatch(expected: expected, found: found)
    }

    /// A composite value ends in `-N` as S3 reports it; a full-object one does not.
    /// `x-amz-checksum-type` says which where the server sends it. Where it does not and the
    /// value has no `-N`, it is either: moto's `HeadObject` reports a composite value without
    /// its part count, so that form is understood too (both prove the parts, in order).
    private static func checkCRC32C(composite: String, fullObject: String, head: ObjectHead) -> WholeObjectCheck {
        guard let found = head.checksumCRC32C else {
            return .notComparable(
                "the server reported no x-amz-checksum-crc32c (servers that keep no checksums, such as Ceph RGW "
                    + "before Squid, cannot be checked this way); the size and fingerprint checks still apply")
        }
        let compositeValue = String(composite.prefix { $0 != "-" })
        let candidates: [String] =
            switch head.checksumType?.uppercased() {
            case "FULL_OBJECT": [fullObject]
            case "COMPOSITE": found.contains("-") ? [composite] : [compositeValue]
            default: found.contains("-") ? [composite] : [fullObject, compositeValue]
            }
        if candidates.contains(found) { return .matches }
        return .mismatch(expected: Array(Set(candidates)).sorted().joined(separator: " or "), found: found)
    }

    /// 32 hex digits, and for a multipart object `-` and a part count after them.
    private static func isMD5ETag(_ etag: String, multipart: Bool) -> Bool {
        let pieces = etag.utf8.split(separator: UInt8(ascii: "-"), maxSplits: 1, omittingEmptySubsequences: false)
        let isHex: (UInt8) -> Bool = { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        guard pieces[0].count == 32, pieces[0].allSatisfy(isHex) else { return false }
        guard multipart else { return pieces.count == 1 }
        return pieces.count == 2 && !pieces[1].isEmpty && pieces[1].allSatisfy { (0x30...0x39).contains($0) }
    }
}

/// The outcome of ``WholeObjectDigest/check(_:)``.
public enum WholeObjectCheck: Sendable, Hashable, CustomStringConvertible {
    /// The server reports exactly the value the parts sent add up to.
    case matches
    /// The server's object is not the parts that were sent: do not count it as uploaded.
    case mismatch(expected: String, found: String)
    /// The server reports nothing this can be compared with; the reason says why.
    case notComparable(String)

    public var description: String {
        switch self {
        case .matches:
            "the whole-object digest matches the parts sent"
        case let .mismatch(expected, found):
            "the object on the server is not what was sent: expected \(expected), the server reports \(found); "
                + "it must not count as uploaded: upload the file again"
        case .notComparable(let reason):
            "the whole-object digest cannot be checked: \(reason)"
        }
    }
}
