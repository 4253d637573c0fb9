/// How files are cut for upload: what ``PartPlan/plan(fileSize:preferredPartSize:singlePutThreshold:)``
/// takes besides the file's size, from the `[upload]` configuration.
public struct UploadCut: Sendable, Hashable {
    public var partSize: Int64
    public var singlePutThreshold: Int64

    public init(partSize: Int64, singlePutThreshold: Int64) {
        self.partSize = partSize
        self.singlePutThreshold = singlePutThreshold
    }
}

/// How one staged file goes to the server.
public enum UploadShape: Sendable, Hashable {
    /// One `PutObject`: the file is small (or empty), and a multipart upload would only add
    /// two requests and a journal entry per part.
    case singlePut
    /// A multipart upload cut as the plan says.
    case multipart(PartPlan)
}

/// How a file is cut into the parts of a multipart upload: every part is `partSize` bytes
/// except the last, which holds what is left.
///
/// A plan is stored in the upload's journal snapshot, so that a resumed upload cuts the file
/// exactly as the parts already on the server were cut, even if the configured part size has
/// changed since.
public struct PartPlan: Sendable, Hashable, Codable {
    /// The configuration key of the preferred part size, named in errors.
    public static let partSizeSetting = "upload.part_size"
    /// The configuration key of the single-PUT threshold, named in errors.
    public static let singlePutThresholdSetting = "upload.single_put_threshold"
    /// 16 MiB: big enough that a request's fixed cost (signing, a round trip, a journal
    /// commit) is small next to its transfer, small enough that a retried part costs little
    /// and that a window of parts in flight fits in memory.
    public static let defaultPartSize: Int64 = 16 * S3UploadLimits.mebibyte
    /// Files below 16 MiB go as one `PutObject`: they would be a single part anyway.
    public static let defaultSinglePutThreshold: Int64 = 16 * S3UploadLimits.mebibyte

    /// The size of the file, in bytes; more than zero.
    public let fileSize: Int64
    /// The size of every part but the last, in bytes.
    public let partSize: Int64

    /// A plan for a file already known to fit. Callers outside go through ``plan(fileSize:preferredPartSize:singlePutThreshold:)``.
    init(fileSize: Int64, partSize: Int64) {
        precondition(fileSize > 0, "a multipart plan needs a non-empty file, got \(fileSize) bytes")
        precondition(
            (S3UploadLimits.minPartSize...S3UploadLimits.maxPartSize).contains(partSize),
            "part size \(partSize) is outside S3's limits")
        self.fileSize = fileSize
        self.partSize = partSize
        precondition(partCount <= S3UploadLimits.maxPartCount, "\(partCount) parts exceed S3's 10,000")
    }

    /// How many parts the file has: 1 to 10,000.
    public var partCount: Int { Int((fileSize + partSize - 1) / partSize) }

    /// The part numbers, 1-based as S3 numbers them.
    public var partNumbers: ClosedRange<Int> { 1...partCount }

    /// Where part `number` (1-based) lies in the file. Every part is ``partSize`` bytes long
    /// but the last, which is what remains (1 to ``partSize`` bytes).
    public func range(ofPart number: Int) -> (offset: Int64, length: Int64) {
        precondition(partNumbers.contains(number), "part \(number) is not in 1...\(partCount)")
        let offset = Int64(number - 1) * partSize
        return (offset, min(partSize, fileSize - offset))
    }

    /// The length of part `number`: what S3 must report for it in `ListParts`.
    public func length(ofPart number: Int) -> Int64 { range(ofPart: number).length }

    /// How to upload a file of `fileSize` bytes.
    ///
    /// - An empty file, or one below `singlePutThreshold`, is one `PutObject`.
    /// - Otherwise the parts are `preferredPartSize`, unless the file would need more than
    ///   10,000 of them: then the part size grows to the file size divided by 10,000, rounded
    ///   up to a whole MiB (so the plan reads well in logs and every part but the last is
    ///   page-aligned in the staged file).
    ///
    /// - Parameters:
    ///   - fileSize: bytes, 0 or more (a negative size is a programming error and traps).
    ///   - preferredPartSize: the configured part size, 5 MiB to 5 GiB.
    ///   - singlePutThreshold: the configured threshold, 0 to 5 GiB (0: never a single PUT,
    ///     except for an empty file).
    /// - Throws: ``PartPlanError`` for a file larger than S3 stores, or a setting outside
    ///   S3's limits.
    public static func plan(
        fileSize: Int64,
        preferredPartSize: Int64 = defaultPartSize,
        singlePutThreshold: Int64 = defaultSinglePutThreshold
    ) throws(PartPlanError) -> UploadShape {
        precondition(fileSize >= 0, "file size \(fileSize) is negative")
        guard PartPlanError.allowedPartSizes.contains(preferredPartSize) else {
            throw .partSizeOutOfRange(preferredPartSize)
        }
        guard PartPlanError.allowedSinglePutThresholds.contains(singlePutThreshold) else {
            throw .singlePutThresholdOutOfRange(singlePutThreshold)
        }
        guard fileSize <= S3UploadLimits.maxObjectSize else { throw .objectTooLarge(fileSize: fileSize) }
        if fileSize == 0 || fileSize < singlePutThreshold { return .singlePut }

        let maxCount = Int64(S3UploadLimits.maxPartCount)
        let smallestFitting = (fileSize + maxCount - 1) / maxCount
        let mebibyte = S3UploadLimits.mebibyte
        let grown = (smallestFitting + mebibyte - 1) / mebibyte * mebibyte
        // At most 525 MiB for a 5 TiB file: far inside the 5 GiB part limit.
        return .multipart(PartPlan(fileSize: fileSize, partSize: max(preferredPartSize, grown)))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let fileSize = try container.decode(Int64.self, forKey: .fileSize)
        let partSize = try container.decode(Int64.self, forKey: .partSize)
        // A journal is read back after crashes and upgrades: check it rather than trap on it.
        guard fileSize > 0, fileSize <= S3UploadLimits.maxObjectSize,
            PartPlanError.allowedPartSizes.contains(partSize),
            (fileSize + partSize - 1) / partSize <= Int64(S3UploadLimits.maxPartCount)
        else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "part plan of \(fileSize) bytes in parts of \(partSize) breaks S3's limits"))
        }
        self.init(fileSize: fileSize, partSize: partSize)
    }
}

/// Why a file cannot be planned. Each message names the limit and what to do.
public enum PartPlanError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file is larger than the largest object S3 stores.
    case objectTooLarge(fileSize: Int64)
    /// The configured part size (``PartPlan/partSizeSetting``) is outside 5 MiB…5 GiB.
    case partSizeOutOfRange(Int64)
    /// The configured single-PUT threshold (``PartPlan/singlePutThresholdSetting``) is
    /// outside 0…5 GiB.
    case singlePutThresholdOutOfRange(Int64)

    static let allowedPartSizes = S3UploadLimits.minPartSize...S3UploadLimits.maxPartSize
    static let allowedSinglePutThresholds = 0...S3UploadLimits.maxSinglePutSize

    public var description: String {
        switch self {
        case let .objectTooLarge(fileSize):
            return "the file is \(ByteCount(fileSize)) (\(fileSize) bytes), larger than the "
                + "\(ByteCount(S3UploadLimits.maxObjectSize)) S3 stores in one object "
                + "(the classic documented limit; AWS now allows 48.8 TiB, S3-compatible servers "
                + "often do not). Split the file before ingesting it; it stays pending until then."
        case let .partSizeOutOfRange(value):
            return "\(PartPlan.partSizeSetting) is \(ByteCount(value)) (\(value) bytes), outside the allowed "
                + "\(ByteCount(S3UploadLimits.minPartSize)) to \(ByteCount(S3UploadLimits.maxPartSize)) "
                + "(S3's limits for one part). Set it within that range, for example \"16MiB\"."
        case let .singlePutThresholdOutOfRange(value):
            return "\(PartPlan.singlePutThresholdSetting) is \(ByteCount(value)) (\(value) bytes), outside the "
                + "allowed 0 B to \(ByteCount(S3UploadLimits.maxSinglePutSize)) (S3's limit for one PutObject). "
                + "Set it within that range, for example \"16MiB\"."
        }
    }
}
