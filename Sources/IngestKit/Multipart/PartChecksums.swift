/// The CRC32C of each part of a file, computed in a pass that reads the file anyway: the
/// card read while staging, or the check of a staged copy before a resume.
///
/// The uploader sends them as `x-amz-checksum-crc32c` without reading the staged copy a
/// second time, and because they come from the card's bytes, the server checks the card's
/// bytes end to end: a staged copy damaged on disk is refused (`BadDigest`), not uploaded.
public struct PartChecksums: Sendable, Equatable {
    /// The part size they were cut at; nil: one checksum of the whole file (a single PUT).
    public let partSize: Int64?
    /// One CRC32C per part, in part order.
    public let crc32c: [UInt32]

    /// The digest of part `number` (1-based; 1 for a single PUT) of an upload cut at
    /// `partSize`; nil when these checksums were cut another way, so the caller reads the
    /// range itself.
    public func digest(ofPart number: Int, partSize: Int64?) -> PartDigest? {
        guard partSize == self.partSize, crc32c.indices.contains(number - 1) else { return nil }
        return PartDigest(crc32c: crc32c[number - 1])
    }
}

/// Computes ``PartChecksums`` over a file's bytes as they arrive, in order, in pieces of
/// any size: a piece that straddles a part boundary is split there.
public struct PartChecksummer: Sendable {
    /// The part size the checksums are cut at; nil: the whole file as one.
    public let partSize: Int64?
    private var inPart: Int64 = 0
    private var current: UInt32 = 0
    /// The checksums of the parts given in full so far, in order.
    public private(set) var finished: [UInt32] = []

    /// A checksummer for a file of `fileSize` bytes, cut as ``PartPlan/plan(fileSize:preferredPartSize:singlePutThreshold:)``
    /// cuts it with these settings; nil when the file cannot be planned (the upload will
    /// say why).
    public init?(fileSize: Int64, preferredPartSize: Int64, singlePutThreshold: Int64) {
        guard
            let plan = try? PartPlan.plan(
                fileSize: fileSize, preferredPartSize: preferredPartSize, singlePutThreshold: singlePutThreshold)
        else { return nil }
        partSize = plan.partSize
    }

    /// Checksums cut at `partSize` (nil: the whole file as one).
    public init(partSize: Int64?) {
        precondition(partSize.map { $0 > 0 } ?? true, "a part size must be positive")
        self.partSize = partSize
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let partSize else {
            current = CRC32C.update(current, bytes)
            return
        }
        var rest = bytes
        while !rest.isEmpty {
            let take = Int(min(Int64(rest.count), partSize - inPart))
            current = CRC32C.update(current, UnsafeRawBufferPointer(rebasing: rest[..<take]))
            inPart += Int64(take)
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            if inPart == partSize {
                finished.append(current)
                current = 0
                inPart = 0
            }
        }
    }

    /// The checksums of everything given to ``update(_:)``.
    public func finish() -> PartChecksums {
        // A single PUT always has its one checksum (an empty file's is 0); a multipart
        // file ends with a short part unless its size is a multiple of the part size.
        PartChecksums(partSize: partSize, crc32c: partSize == nil || inPart > 0 ? finished + [current] : finished)
    }
}
