import Testing

@testable import IngestKit

/// The reader asks the page cache about every file of a warm folder, and about one file in 16
/// of a card found cold.
@Suite struct CacheSenseTests {
    /// Runs `sense` over files whose warmth `warm(i)` tells; returns the files it asked about,
    /// and those it called warm.
    func run(_ count: Int, _ sense: inout CacheSense, warm: (Int) -> Bool) -> (asked: [Int], warm: [Int]) {
        var asked: [Int] = [], found: [Int] = []
        for i in 0..<count where sense.isWarm({ asked.append(i); return warm(i) }) { found.append(i) }
        return (asked, found)
    }

    @Test func aColdCardIsAskedAboutFileByFileThenOneFileIn16() {
        var sense = CacheSense()
        let (asked, warm) = run(5000, &sense) { _ in false }
        #expect(warm.isEmpty)
        #expect(Array(asked.prefix(CacheSense.coldBeforeSampling)) == Array(0..<CacheSense.coldBeforeSampling))
        let sampled = asked.dropFirst(CacheSense.coldBeforeSampling)
        #expect(zip(sampled, sampled.dropFirst()).allSatisfy { $1 - $0 == CacheSense.sampleEvery })
        #expect(asked.count == 64 + (5000 - 64) / 16)
    }

    @Test func aWarmFolderIsAskedAboutEveryFile() {
        var sense = CacheSense()
        let (asked, warm) = run(1000, &sense) { _ in true }
        #expect(asked == Array(0..<1000))
        #expect(warm == Array(0..<1000))
    }

    /// Warm files after a long cold run: the first sample to meet one brings the question back
    /// for every file, so at most 15 are taken for cold.
    @Test func aWarmFileFoundBySamplingBringsBackTheQuestionForEveryFile() {
        var sense = CacheSense()
        let (_, warm) = run(2000, &sense) { $0 >= 500 && $0 < 1500 }
        #expect(warm.first.map { $0 - 500 < CacheSense.sampleEvery } == true)
        #expect(warm.last == 1499)
        #expect(warm.count >= 1000 - (CacheSense.sampleEvery - 1))
        #expect(warm == Array(warm.first!...1499))
    }
}
