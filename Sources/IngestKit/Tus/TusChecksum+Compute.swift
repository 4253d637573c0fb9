// The checksum of a chunk (the `checksum` extension): which algorithm, and its digest of the
// bytes a PATCH sends.

import Crypto

extension TusChecksum {
    /// The algorithms this client computes, strongest first. CRC32 is left out: it detects
    /// what the transport's own checks already do, and the others cost little more.
    public static let algorithms = ["sha512", "sha256", "sha1", "md5"]

    /// The strongest algorithm both this client and a server announcing `serverAlgorithms`
    /// (`Tus-Checksum-Algorithm`, lowercase) have; nil when they share none.
    public static func strongest(of serverAlgorithms: Set<String>) -> String? {
        algorithms.first { serverAlgorithms.contains($0) }
    }

    /// The checksum of `body`, read from disk when it is a file's range (past the page
    /// cache, as the transport reads it). Blocking: call it off the Swift concurrency pool.
    /// `algorithm` is one of ``algorithms``.
    public static func compute(_ algorithm: String, of body: HTTPBody) throws(SystemError) -> TusChecksum {
        var hasher = Hasher(algorithm)
        switch body {
        case .empty: break
        case .bytes(let bytes): bytes.withUnsafeBytes { hasher.update($0) }
        case let .file(path, offset, length):
            let block = min(1 << 20, max(Int(length + 4095) / 4096 * 4096, 4096))
            let reader = try FileRangeReader(path: path, offset: offset, length: length, buffer: AlignedBuffer(size: block))
            while case let bytes = try reader.next(), !bytes.isEmpty { hasher.update(bytes) }
        }
        return TusChecksum(algorithm: algorithm, digest: hasher.finish())
    }

    /// One of the algorithms, fed in pieces.
    private enum Hasher {
        case sha512(SHA512)
        case sha256(SHA256)
        case sha1(Insecure.SHA1)
        case md5(Insecure.MD5)

        init(_ algorithm: String) {
            switch algorithm {
            case "sha512": self = .sha512(SHA512())
            case "sha256": self = .sha256(SHA256())
            case "sha1": self = .sha1(Insecure.SHA1())
            case "md5": self = .md5(Insecure.MD5())
            default: preconditionFailure("TusChecksum: \(algorithm) is not one of \(TusChecksum.algorithms)")
            }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch self {
            case .sha512(var h): h.update(bufferPointer: bytes); self = .sha512(h)
            case .sha256(var h): h.update(bufferPointer: bytes); self = .sha256(h)
            case .sha1(var h): h.update(bufferPointer: bytes); self = .sha1(h)
            case .md5(var h): h.update(bufferPointer: bytes); self = .md5(h)
            }
        }

        func finish() -> [UInt8] {
            switch self {
            case .sha512(let h): Array(h.finalize())
            case .sha256(let h): Array(h.finalize())
            case .sha1(let h): Array(h.finalize())
            case .md5(let h): Array(h.finalize())
            }
        }
    }
}
