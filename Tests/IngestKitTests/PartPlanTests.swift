import Foundation
import Testing

@testable import IngestKit

/// Oracles are S3's documented limits ("Amazon S3 multipart upload limits") and sizes worked
/// out by hand in the comments, never values computed by the code under test.
@Suite struct PartPlanTests {
    static let MiB: Int64 = 1_048_576
    static let GiB: Int64 = 1_073_741_824
    static let TiB: Int64 = 1_099_511_627_776

    private func multipart(
        _ fileSize: Int64, preferred: Int64 = PartPlan.defaultPartSize,
        threshold: Int64 = PartPlan.defaultSinglePutThreshold
    ) throws -> PartPlan {
        let plan = try PartPlan.plan(fileSize: fileSize, preferredPartSize: preferred, singlePutThreshold: threshold)
        try #require(!plan.isSinglePut, "\(fileSize) bytes planned as a single PUT, expected a multipart upload")
        return plan
    }

    // MARK: the documented limits

    @Test func theLimitsAreS3sDocumentedOnes() {
        #expect(S3UploadLimits.minPartSize == 5_242_880)  // 5 MiB
        #expect(S3UploadLimits.maxPartSize == 5_368_709_120)  // 5 GiB
        #expect(S3UploadLimits.maxPartCount == 10_000)
        #expect(S3UploadLimits.maxObjectSize == 5_497_558_138_880)  // 5 TiB
        #expect(S3UploadLimits.maxSinglePutSize == 5_368_709_120)  // 5 GiB
    }

    @Test func theDefaultsAreSixteenMebibytes() {
        #expect(PartPlan.defaultPartSize == 16_777_216)
        #expect(PartPlan.defaultSinglePutThreshold == 16_777_216)
    }

    // MARK: single PUT or multipart

    @Test func anEmptyFileIsASinglePutWhateverTheThreshold() throws {
        #expect(try PartPlan.plan(fileSize: 0).isSinglePut)
        #expect(try PartPlan.plan(fileSize: 0, singlePutThreshold: 0).isSinglePut)
    }

    @Test func aFileOneByteBelowTheThresholdIsASinglePut() throws {
        let plan = try PartPlan.plan(fileSize: 16_777_215)
        #expect(plan.isSinglePut)
        #expect(plan.partCount == 1)
        #expect(plan.range(ofPart: 1) == (0, 16_777_215))
    }

    @Test func aFileExactlyAtTheThresholdIsOneWholePart() throws {
        let plan = try multipart(16_777_216)
        #expect(plan.partCount == 1)
        #expect(plan.range(ofPart: 1) == (offset: 0, length: 16_777_216))
    }

    @Test func aZeroThresholdSendsEvenOneByteAsMultipart() throws {
        let plan = try multipart(1, threshold: 0)
        #expect(plan.partCount == 1)
        #expect(plan.range(ofPart: 1) == (offset: 0, length: 1))
    }

    // MARK: boundary sizes

    @Test func exactlyThreePartSizesMakesThreeFullParts() throws {
        let plan = try multipart(3 * 16_777_216)
        #expect(plan.partSize == 16_777_216)
        #expect(plan.partCount == 3)
        #expect(plan.range(ofPart: 3) == (offset: 33_554_432, length: 16_777_216))
    }

    @Test func oneByteMoreThanThreePartSizesMakesALastPartOfOneByte() throws {
        let plan = try multipart(3 * 16_777_216 + 1)
        #expect(plan.partCount == 4)
        #expect(plan.range(ofPart: 3) == (offset: 33_554_432, length: 16_777_216))
        #expect(plan.range(ofPart: 4) == (offset: 50_331_648, length: 1))
    }

    @Test func tenThousandPreferredPartsNeedNoGrowth() throws {
        let plan = try multipart(10_000 * 16_777_216)
        #expect(plan.partSize == 16_777_216)
        #expect(plan.partCount == 10_000)
    }

    @Test func oneByteBeyondTenThousandPartsGrowsThePartToTheNextWholeMebibyte() throws {
        // 10,000 × 16 MiB + 1 needs parts over 16 MiB: 17 MiB = 17,825,792 bytes.
        // 9,411 × 17,825,792 = 167,758,528,512; the remaining 13,631,489 bytes are part 9,412.
        let plan = try multipart(167_772_160_001)
        #expect(plan.partSize == 17_825_792)
        #expect(plan.partCount == 9_412)
        #expect(plan.range(ofPart: 9_412) == (offset: 167_758_528_512, length: 13_631_489))
    }

    @Test func theLargestObjectFitsInTenThousandParts() throws {
        // 5 TiB / 10,000 = 524.288 MiB, rounded up: 525 MiB = 550,502,400 bytes.
        // 9,986 × 550,502,400 = 5,497,316,966,400; the remaining 241,172,480 bytes are part 9,987.
        let plan = try multipart(5 * Self.TiB)
        #expect(plan.partSize == 550_502_400)
        #expect(plan.partCount == 9_987)
        #expect(plan.range(ofPart: 9_987) == (offset: 5_497_316_966_400, length: 241_172_480))
    }

    @Test func aPreferredPartSizeLargerThanNeededIsKept() throws {
        let plan = try multipart(5 * Self.TiB, preferred: 5 * Self.GiB, threshold: 0)
        #expect(plan.partSize == 5_368_709_120)
        #expect(plan.partCount == 1_024)  // 5 TiB / 5 GiB
    }

    @Test func aPartSizeThatIsNotAWholeMebibyteIsKeptWhenItFits() throws {
        let plan = try multipart(20_000_001, preferred: 6_000_000, threshold: 0)
        #expect(plan.partSize == 6_000_000)
        #expect(plan.partCount == 4)
        #expect(plan.range(ofPart: 4) == (offset: 18_000_000, length: 2_000_001))
    }

    // MARK: errors

    @Test func oneByteOverFiveTebibytesIsTooLargeAndSaysWhy() throws {
        let error = #expect(throws: PartPlanError.self) { try PartPlan.plan(fileSize: 5_497_558_138_881) }
        #expect(error == .objectTooLarge(fileSize: 5_497_558_138_881))
        let message = try #require(error).description
        #expect(message.contains("5.0 TiB"))
        #expect(message.contains("48.8 TiB"))
        #expect(message.contains("Split the file"))
    }

    @Test(arguments: [Int64(5_242_879), 5_368_709_121, 0, -1])
    func aPreferredPartSizeOutsideFiveMebibytesToFiveGibibytesIsRefused(value: Int64) throws {
        let error = #expect(throws: PartPlanError.self) {
            try PartPlan.plan(fileSize: 100 * Self.MiB, preferredPartSize: value)
        }
        #expect(error == .partSizeOutOfRange(value))
        let message = try #require(error).description
        #expect(message.contains("upload.part_size"))
        #expect(message.contains("5.0 MiB to 5.0 GiB"))
    }

    @Test(arguments: [Int64(5_242_880), 5_368_709_120])
    func thePartSizeLimitsThemselvesAreAllowed(value: Int64) throws {
        #expect(try multipart(10 * Self.GiB, preferred: value).partSize == value)
    }

    @Test(arguments: [Int64(-1), 5_368_709_121])
    func aSinglePutThresholdOutsideZeroToFiveGibibytesIsRefused(value: Int64) throws {
        let error = #expect(throws: PartPlanError.self) {
            try PartPlan.plan(fileSize: 100 * Self.MiB, singlePutThreshold: value)
        }
        #expect(error == .singlePutThresholdOutOfRange(value))
        let message = try #require(error).description
        #expect(message.contains("upload.single_put_threshold"))
        #expect(message.contains("0 B to 5.0 GiB"))
    }

    @Test func aSettingOutOfRangeIsReportedEvenForAnEmptyFile() {
        #expect(throws: PartPlanError.partSizeOutOfRange(1)) { try PartPlan.plan(fileSize: 0, preferredPartSize: 1) }
    }

    // MARK: the parts tile the file

    @Test(arguments: [
        16_777_216, 16_777_217, 100_000_000, 50_331_648, 167_772_160_000,
        167_772_160_001, 1_000_000_000_007, 5_497_558_138_880,
    ] as [Int64])
    func thePartsTileTheFileExactlyWithinS3sLimits(fileSize: Int64) throws {
        let plan = try multipart(fileSize)
        #expect(plan.partCount >= 1 && plan.partCount <= 10_000)
        var expectedOffset: Int64 = 0
        for number in 1...plan.partCount {
            let (offset, length) = plan.range(ofPart: number)
            #expect(offset == expectedOffset, "part \(number) does not start where part \(number - 1) ended")
            #expect(length > 0 && length <= 5_368_709_120, "part \(number) is \(length) bytes")
            if number < plan.partCount {
                #expect(length >= 5_242_880, "part \(number) of \(plan.partCount) is below 5 MiB")
            }
            expectedOffset += length
        }
        #expect(expectedOffset == fileSize)
    }

    // MARK: the journal's record

    @Test func aRecordedPartSizeCutsTheFileAsThePlanDid() throws {
        let plan = try multipart(167_772_160_001)
        #expect(try PartPlan.recorded(fileSize: plan.fileSize, partSize: plan.partSize) == plan)
        #expect(try PartPlan.recorded(fileSize: 1_000, partSize: nil).isSinglePut)
        #expect(try PartPlan.recorded(fileSize: 0, partSize: nil).range(ofPart: 1) == (0, 0))
    }

    @Test(arguments: [
        (100_000_000, 1_000),  // part below 5 MiB
        (167_772_160_001, 16_777_216),  // 10,001 parts
        (5_368_709_121, nil),  // a single PUT above S3's 5 GiB
    ] as [(Int64, Int64?)])
    func aJournalPlanThatBreaksTheLimitsIsRejectedNotTrusted(fileSize: Int64, partSize: Int64?) {
        #expect(throws: PartPlanError.self) { try PartPlan.recorded(fileSize: fileSize, partSize: partSize) }
    }
}
