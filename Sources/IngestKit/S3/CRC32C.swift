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
}
