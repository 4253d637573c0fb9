import Testing

@testable import IngestKit

@Suite struct ByteRateTests {
    @Test(arguments: [
        ("2MiB/s", 2 << 20),
        ("2 MiB/s", 2 << 20),
        ("2MiB", 2 << 20),
        ("2mib/S", 2 << 20),
        ("500KiB/s", 500 << 10),
        ("10MB/s", 10_000_000),
        ("1.5 GiB/s", 1_610_612_736),
        ("0", 0),
    ] as [(String, Int64)])
    func aRateIsASizeInTheUnitsOfByteCountPerSecond(text: String, bytesPerSecond: Int64) {
        #expect(ByteRate.parse(text) == ByteRate(bytesPerSecond: bytesPerSecond))
        #expect(ByteRate.parse(text)?.bytesPerSecond == ByteCount.parse(text.replacingOccurrences(of: "/s", with: "").replacingOccurrences(of: "/S", with: "")))
    }

    @Test(arguments: ["", "fast", "-2MiB/s", "2Mbit/s", "2MiB/h", "/s", "MiB/s"])
    func textThatIsNoSizePerSecondIsNoRate(text: String) {
        #expect(ByteRate.parse(text) == nil)
    }

    @Test func aRateReadsAsASizePerSecond() {
        #expect(ByteRate(bytesPerSecond: 5 << 20).description == "5.0 MiB/s")
        #expect(ByteRate.parse(ByteRate(bytesPerSecond: 5 << 20).description) == ByteRate(bytesPerSecond: 5 << 20))
    }
}
