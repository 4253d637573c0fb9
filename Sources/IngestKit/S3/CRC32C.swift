import CIsal

/// CRC32C (Castagnoli, the iSCSI CRC), as S3's `x-amz-checksum-crc32c` defines it: reflected
/// polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF. "123456789" gives
/// 0xE3069283.
///
/// The one file that calls Intel ISA-L (`libisal`): its `crc32_iscsi` picks the fastest code
/// the CPU has at run time, PCLMULQDQ/AVX-512 folding here, many times faster than MD5, so a
/// part's digest costs next to nothing beside reading it.
///
/// ISA-L's function neither inverts its seed nor its result; this type keeps the CRC in its
/// finished form between calls, so `update` of an empty CRC (0) is the CRC of the bytes, and
/// `update(update(0, a), b)` is the CRC of `a` followed by `b`.
enum CRC32C {
    /// The CRC of `crc`'s bytes followed by `bytes`; 0 is the CRC of nothing.
    static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        var state = ~crc
        var offset = 0
        // crc32_iscsi takes an `int` length: feed it at most 1 GiB at a time.
        while offset < bytes.count {
            let count = min(bytes.count - offset, 1 << 30)
            let chunk = UnsafeMutablePointer(mutating: (base + offset).assumingMemoryBound(to: UInt8.self))
            state = crc32_iscsi(chunk, Int32(count), state)
            offset += count
        }
        return ~state
    }

    /// The CRC of `a` followed by `b`, from `a`'s CRC, `b`'s CRC and `b`'s length alone,
    /// with no byte read again: how a server's full-object CRC32C of a multipart object
    /// (`x-amz-checksum-type: FULL_OBJECT`) follows from the CRCs of its parts.
    ///
    /// A CRC is the remainder of the message polynomial modulo P. Appending `n` bytes
    /// multiplies `a`'s remainder by x^(8n) and adds `b`'s; the pre- and post-inversion
    /// cancel out in that sum. x^(8n) mod P is built from the squares x^(2^k) mod P, so the
    /// cost is O(log n) multiplications of 32-bit polynomials.
    static func combine(_ a: UInt32, _ b: UInt32, lengthOfB length: Int64) -> UInt32 {
        precondition(length >= 0, "a length is not negative")
        return multiply(xToThe8n(UInt64(length)), a) ^ b
    }

    /// The reflected polynomial: bit 31 is x^0, bit 0 is x^31.
    private static let polynomial: UInt32 = 0x82F6_3B78

    /// The product of two polynomials modulo P, both in the reflected bit order.
    private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var (a, b, product) = (a, b, UInt32(0))
        while a != 0 {
            if a & 0x8000_0000 != 0 { product ^= b }
            a <<= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return product
    }

    /// x^(2^k) mod P for k in 0..<68 (enough for any 63-bit length times 8): x^1, x^2, x^4, …
    private static let powersOfTwo: [UInt32] = {
        var table = [UInt32(1) << 30]  // x^1
        for _ in 1..<68 { table.append(multiply(table[table.count - 1], table[table.count - 1])) }
        return table
    }()

    /// x^(8n) mod P: the factor that shifts a CRC past `n` bytes.
    private static func xToThe8n(_ n: UInt64) -> UInt32 {
        var result = UInt32(1) << 31  // x^0
        var bits = n
        var k = 3  // 8n = n << 3
        while bits != 0 {
            if bits & 1 != 0 { result = multiply(powersOfTwo[k], result) }
            bits >>= 1
            k += 1
        }
        return result
    }
}
