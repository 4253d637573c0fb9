import Testing

@testable import IngestKit

@Suite struct ByteCountTests {
    // MARK: parsing

    @Test(arguments: [
        ("512", 512),
        ("512B", 512),
        ("512 b", 512),
        ("0", 0),
        ("64KiB", 65_536),
        ("64k", 65_536),
        ("64K", 65_536),
        ("3 MiB", 3_145_728),
        ("3m", 3_145_728),
        ("1.5 GiB", 1_610_612_736),
        ("2G", 2_147_483_648),
        ("1gib", 1_073_741_824),
        ("1TiB", 1_099_511_627_776),
        ("0.5KiB", 512),
    ] as [(String, Int64)])
    func binaryUnitsAreMultiplesOf1024(text: String, bytes: Int64) {
        #expect(ByteCount.parse(text) == bytes)
    }

    @Test(arguments: [
        ("1KB", 1_000),
        ("10MB", 10_000_000),
        ("2GB", 2_000_000_000),
        ("1TB", 1_000_000_000_000),
        ("1.5 GB", 1_500_000_000),
    ] as [(String, Int64)])
    func decimalUnitsArePowersOfTen(text: String, bytes: Int64) {
        #expect(ByteCount.parse(text) == bytes)
    }

    /// 4.1 MB is 4 100 000 bytes exactly; `4.1 * 1e6` in binary floating point is 4099999.9999999995.
    @Test(arguments: [
        ("4.1MB", 4_100_000),
        ("4.1 MB", 4_100_000),
        ("4.1GB", 4_100_000_000),
    ] as [(String, Int64)])
    func decimalFractionsGiveTheExactByteCount(text: String, bytes: Int64) {
        #expect(ByteCount.parse(text) == bytes)
    }

    @Test func surroundingSpacesAreIgnored() {
        #expect(ByteCount.parse("  3 MiB  ") == 3_145_728)
        #expect(ByteCount.parse("\t1G\n") == 1_073_741_824)
    }

    @Test(arguments: ["", " ", "MiB", "-1GiB", "-1", "1 XB", "1.2.3", "1e3", "lots", "GiB1", "1 GiB extra", "1 EiB"])
    func textThatIsNotASizeIsRejected(text: String) {
        #expect(ByteCount.parse(text) == nil)
    }

    @Test func sizesBeyondInt64AreRejected() {
        #expect(ByteCount.parse("9000000TB") == nil)
        #expect(ByteCount.parse("99999999999999999999") == nil)
    }

    @Test func largestRepresentableSizesAreAccepted() {
        #expect(ByteCount.parse("8000000TB") == 8_000_000_000_000_000_000)
    }

    // MARK: description

    @Test(arguments: [
        (0, "0 B"),
        (1, "1 B"),
        (512, "512 B"),
        (1_023, "1023 B"),
        (1_024, "1.0 KiB"),
        (1_536, "1.5 KiB"),
        (3_565_158, "3.4 MiB"),
        (1_288_490_189, "1.2 GiB"),
        (1_099_511_627_776, "1.0 TiB"),
        (1_125_899_906_842_624, "1.0 PiB"),
    ] as [(Int64, String)])
    func descriptionUsesTheLargestBinaryUnitWithOneDecimal(bytes: Int64, text: String) {
        #expect(ByteCount(bytes).description == text)
    }

    @Test func largestUnitIsPiB() {
        #expect(ByteCount(Int64(1) << 60).description == "1024.0 PiB")
    }

    @Test func negativeCountsKeepTheirSign() {
        #expect(ByteCount(Int64(-1_536)).description == "-1.5 KiB")
        #expect(ByteCount(Int64(-5)).description == "-5 B")
    }

    @Test func intAndInt64InitializersAgree() {
        #expect(ByteCount(1_536 as Int).description == ByteCount(1_536 as Int64).description)
        #expect(ByteCount(1_536 as Int).bytes == 1_536)
    }

    /// 1048575 bytes is 0.99999905 MiB: rounded to one decimal that is "1.0 MiB", as
    /// `numfmt --to=iec` and `ls -lh` show it, never "1024.0 KiB".
    @Test(arguments: [1_048_575, 1_048_525, 1_073_741_823] as [Int64])
    func roundingUpToTheNextUnitShowsTheNextUnit(bytes: Int64) {
        let text = ByteCount(bytes).description
        #expect(!text.hasPrefix("1024.0"), "\(bytes) shows as \(text)")
    }

    @Test(arguments: [1_024, 1_536, 3_145_728, 1_610_612_736] as [Int64])
    func descriptionOfAnExactSizeParsesBackToIt(bytes: Int64) {
        #expect(ByteCount.parse(ByteCount(bytes).description) == bytes)
    }
}
