import Foundation
import Glibc
import Testing

@testable import IngestKit

/// Files replaced whole (the metrics file): through a temporary file, renamed over the old one.
@Suite struct AtomicFileTests {
    func names(_ dir: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
    }

    @Test func aFileIsReplacedWholeWithItsModeAndNoTemporaryFileLeft() throws {
        let dir = TemporaryDirectory()
        let path = try dir.write("ingest.prom", Array("old content, longer than the new\n".utf8))
        var before = stat()
        #expect(stat(path, &before) == 0)

        try AtomicFile.write(Array("new\n".utf8), to: path, mode: 0o640)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new\n")
        var after = stat()
        #expect(stat(path, &after) == 0)
        #expect(after.st_mode & 0o777 == 0o640)
        #expect(after.st_ino != before.st_ino, "a new file renamed over the old, not the old one rewritten")
        #expect(try names(dir) == ["ingest.prom"])
    }

    @Test func aFailedRenameLeavesThePathAsItWasAndNoTemporaryFile() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path + "/taken/inside", withIntermediateDirectories: true)
        #expect {
            try AtomicFile.write(Array("x".utf8), to: dir.path + "/taken")
        } throws: { error in
            (error as? SystemError)?.call == "rename"
        }
        #expect(try names(dir) == ["taken"], "the temporary file is removed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/taken") == ["inside"])
    }

    @Test func aMissingDirectoryIsNamedInTheError() {
        #expect(throws: SystemError(call: "mkstemp", errno: .noSuchFileOrDirectory, path: "/nonexistent-ingest-test")) {
            try AtomicFile.write([1], to: "/nonexistent-ingest-test/metrics.prom")
        }
    }
}
