import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// A card's label and names are hostile: an escape sequence printed raw clears the operator's
/// screen, retitles the terminal (OSC … BEL) or forges a line. Every command that prints them
/// escapes them (``Printable``), `status` included, which printed them raw.
@Suite(.serialized, needsRoot)
struct ConsoleEscapeTests {
    static let raw: [UInt8] = [0x1B, 0x07]

    static func rawBytes(_ run: IngestRun) -> [UInt8] {
        (Array(run.result.stdout) + Array(run.stderr.utf8)).filter { raw.contains($0) }
    }

    @Test(.timeLimit(.minutes(2)))
    func aLabelAndADirectoryNameOfEscapeSequencesReachNoTerminalRaw() throws {
        // ESC [ 2 J (clear), ESC [ 31 m (red): 12 bytes, within ext4's 16.
        let card = try LoopCard(sizeMiB: 16, label: "\u{1B}[2J\u{1B}[31mEVIL")
        defer { try? card.detach() }
        let folder = card.mountPoint + "/DCIM/\u{1B}]0;pwned\u{07}\u{1B}[2J\nX"
        #expect(mkdir(card.mountPoint + "/DCIM", 0o755) == 0 && mkdir(folder, 0o755) == 0)
        #expect(FileManager.default.createFile(atPath: folder + "/IMG_0001.JPG", contents: Data(randomBytes(5_000))))
        try card.seal()
        let state = TemporaryDirectory()

        let runs = [
            try IngestRun.ingest([card.mountPoint, "--no-upload", "--state-dir", state.path]),
            try IngestRun.ingest(["status", "--state-dir", state.path]),
            try IngestRun.ingest(["scan", card.mountPoint, "--list", "--state-dir", state.path]),
        ]
        #expect(runs[0].status == 0, "\(runs[0].stderr)")
        #expect(runs[1].status == 0, "\(runs[1].stderr)")
        #expect(runs[1].result.stdoutText.contains("\\x1B[2J"), "the label is shown, escaped: \(runs[1].result.stdoutText)")
        for run in runs {
            #expect(Self.rawBytes(run).isEmpty, "no raw ESC or BEL in: \(run.result.stdoutText)\(run.stderr)")
        }
    }
}
