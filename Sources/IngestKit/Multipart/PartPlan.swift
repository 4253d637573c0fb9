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

/// How a file is cut for upload, and how its parts go to the server.
///
/// - A **single PUT**: the file is small (or empty), and a multipart upload would only add
///   two requests and a journal entry per part. It is a plan of one part, the whole file,
///   sent as one `PutObject`.
/// - A **multipart upload**: every part is ``partSize`` bytes except the last, which holds
///   what is left.
///
/// ``UploadStateMachine`` runs both: one life for every upload, whatever its size. The
/// plan is computed in one place, ``plan(fileSize:preferredPartSize:singlePutThreshold:)``
/// (the stager's part checksums and the uploader's requests use the same cut). A resumed
/// upload is re-planned from the part size its journal recorded, so it cuts the file
/// exactly as the parts already on the server were cut, even if the configured part size
/// has changed since.
public struct PartPlan: Sendable, Hashable {
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

    /// The size of the file, in bytes: 0 or more for a single PUT, more than 0 otherwise.
    public let fileSize: Int64
    /// The size of every part but the last, in bytes; nil for a single PUT, whose one part
    /// is the whole file.
    public let partSize: Int64?

    /// A multipart plan for a file already known to fit. Callers outside go through
    /// ``plan(fileSize:preferredPartSize:singlePutThreshold:)``.
    init(fileSize: Int64, partSize: Int64) {
        precondition(fileSize > 0, "a multipart plan needs a non-empty file, got \(fileSize) bytes")
        precondition(
            (S3UploadLimits.minPartSize...S3UploadLimits.maxPartSize).contains(partSize),
            "part size \(partSize) is outside S3's limits")
        self.fileSize = fileSize
        self.partSize = partSize
        precondition(partCount <= S3UploadLimits.maxPartCount, "\(partCount) parts exceed S3's 10,000")
    }

    /// A single PUT of `fileSize` bytes.
    private init(singlePut fileSize: Int64) {
        precondition(
            (0...S3UploadLimits.maxSinglePutSize).contains(fileSize), "a single PUT of \(fileSize) bytes is outside S3's limits")
        self.fileSize = fileSize
        self.partSize = nil
    }

    /// The file goes as one `PutObject`.
    public var isSinglePut: Bool { partSize == nil }

    /// How many parts the file has: 1 to 10,000 (1 for a single PUT).
    public var partCount: Int {
        guard let partSize else { return 1 }
        return Int((fileSize + partSize - 1) / partSize)
    }

    /// The part numbers, 1-based as S3 numbers them.
    public var partNumbers: ClosedRange<Int> { 1...partCount }

    /// Where part `number` (1-based) lies in the file. Every part is ``partSize`` bytes long
    /// but the last, which is what remains (1 to ``partSize`` bytes); a single PUT's one
    /// part is the whole file.
    public func range(ofPart number: Int) -> (offset: Int64, length: Int64) {
        precondition(partNumbers.contains(number), "part \(number) is not in 1...\(partCount)")
        guard let partSize else { return (0, fileSize) }
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
    ) throws(PartPlanError) -> PartPlan {
        precondition(fileSize >= 0, "file size \(fileSize) is negative")
        guard PartPlanError.allowedPartSizes.contains(preferredPartSize) else {
            throw .partSizeOutOfRange(preferredPartSize)
        }
        guard PartPlanError.allowedSinglePutThresholds.contains(singlePutThreshold) else {
            throw .singlePutThresholdOutOfRange(singlePutThreshold)
        }
        guard fileSize <= S3UploadLimits.maxObjectSize else { throw .objectTooLarge(fileSize: fileSize) }
        if fileSize == 0 || fileSize < singlePutThreshold { return PartPlan(singlePut: fileSize) }

        let maxCount = Int64(S3UploadLimits.maxPartCount)
        let smallestFitting = (fileSize + maxCount - 1) / maxCount
        let mebibyte = S3UploadLimits.mebibyte
        let grown = (smallestFitting + mebibyte - 1) / mebibyte * mebibyte
        // At most 525 MiB for a 5 TiB file: far inside the 5 GiB part limit.
        return PartPlan(fileSize: fileSize, partSize: max(preferredPartSize, grown))
    }

    /// The plan an upload's journal recorded: its part size, or nil for a single PUT.
    /// - Throws: ``PartPlanError`` when the journal's values break S3's limits (a journal
    ///   is read back after crashes and upgrades: checked, never trusted to fit).
    public static func recorded(fileSize: Int64, partSize: Int64?) throws(PartPlanError) -> PartPlan {
        let broken = PartPlanError.recordedPlanBroken(fileSize: fileSize, partSize: partSize)
        guard let partSize else {
            guard (0...S3UploadLimits.maxSinglePutSize).contains(fileSize) else { throw broken }
            return PartPlan(singlePut: fileSize)
        }
        guard (1...S3UploadLimits.maxObjectSize).contains(fileSize), PartPlanError.allowedPartSizes.contains(partSize),
            (fileSize + partSize - 1) / partSize <= Int64(S3UploadLimits.maxPartCount)
        else { throw broken }
        // Exactly the recorded part size, never regrown: the parts on the server were cut so.
        return PartPlan(fileSize: fileSize, partSize: partSize)
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
    /// An upload's journal records a cut that breaks S3's limits: the journal was damaged.
    case recordedPlanBroken(fileSize: Int64, partSize: Int64?)

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
        case let .recordedPlanBroken(fileSize, partSize):
            return "the journal records an upload of \(fileSize) bytes "
                + (partSize.map { "in parts of \($0) bytes" } ?? "as one PutObject")
                + ", which breaks S3's limits: the journal was damaged. Run ingest forget on the upload, "
                + "then ingest the card again."
        case let .singlePutThresholdOutOfRange(value):
            return "\(PartPlan.singlePutThresholdSetting) is \(ByteCount(value)) (\(value) bytes), outside the "
                + "allowed 0 B to \(ByteCount(S3UploadLimits.maxSinglePutSize)) (S3's limit for one PutObject). "
                + "Set it within that range, for example \"16MiB\"."
        }
    }
}
