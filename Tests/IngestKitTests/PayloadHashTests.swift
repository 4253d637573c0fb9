import Foundation
import Testing

@testable import IngestKit

/// The SHA-256 a signed body carries, against `sha256sum` of the same bytes.
@Suite struct PayloadHashTests {
    @Test(arguments: [(0, 0), (0, 1), (4095, 4097), (1 << 20, 3 << 20), (5_000_001, 2_345_678)] as [(Int64, Int64)])
    func theHashOfAFileRangeIsTheSHA256OfThoseBytes(offset: Int64, length: Int64) throws {
        let dir = TemporaryDirectory()
        let bytes = randomBytes(8 << 20)
        let path = try dir.write("body", bytes)
        let range = try dir.write("range", Array(bytes[Int(offset)..<Int(offset + length)]))
        let expected = String(try runTool("/usr/bin/sha256sum", [range]).prefix(64))
        #expect(try PayloadHash.ofFile(path: path, offset: offset, length: length).value == expected)
    }
}
