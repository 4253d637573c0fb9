import Foundation
import Testing

@testable import IngestKit

/// What the `on_card_done` hook is given: its document and its environment.
@Suite struct CardDoneHookTests {
    let card = VolumeIdentity(
        key: "uuid:1B6E-2F0A", rootPath: "/run/ingest/sdb1", mountPoint: "/run/ingest/sdb1", pathInFileSystem: "/",
        fsType: "vfat",
        device: BlockDevice(node: "/dev/sdb1", udevProperties: ["ID_FS_UUID": "1B6E-2F0A", "ID_FS_LABEL": "DRONE"]))

    var summary: RunSummary {
        var summary = RunSummary(volume: "DRONE")
        summary.scan.toStage = 3
        summary.scan.toStageBytes = 300
        summary.scan.known = 7
        summary.scan.knownBytes = 700
        summary.staged = 3
        summary.stagedBytes = 300
        summary.failed = 1
        var uploads = UploadTotals()
        uploads.uploaded = 2
        uploads.uploadedBytes = 200
        uploads.failed = 1
        summary.uploads = uploads
        summary.seconds = 4.5
        return summary
    }

    let left: [FileState: JournalSummary.Tally] = [
        .uploaded: .init(count: 9, bytes: 900), .staged: .init(count: 1, bytes: 100), .pending: .init(count: 1, bytes: 10),
    ]

    @Test func theDocumentHoldsTheCardsIdentityItsCountsAndItsEnd() {
        let document = CardDoneHook.document(volume: card, summary: summary, error: nil, left: left)
        #expect(document["event"] == "card_done")
        #expect(document["key"] == "uuid:1B6E-2F0A")
        #expect(document["device"] == "/dev/sdb1")
        #expect(document["fs_label"] == "DRONE")
        #expect(document["files"] == .int(10))
        #expect(document["bytes"] == .int(1000))
        #expect(document["objects"] == .int(9))
        #expect(document["objects_bytes"] == .int(900))
        #expect(document["pending"] == .int(2), "staged and not yet staged alike")
        #expect(document["pending_bytes"] == .int(110))
        #expect(document["failed"] == .int(2), "to stage and to upload")
        #expect(document["exit_status"] == .int(1))
        #expect(document["error"] == nil)
        #expect(document["manifest_key"] == nil, "no manifest yet")
    }

    @Test func aRunThatEndedWithAnErrorGivesItsStatusAndMessage() {
        let lost = IngestError.volumeLost(volume: "DRONE", cause: SystemError(call: "read", errno: .ioError), evidence: "its device is gone")
        let document = CardDoneHook.document(volume: card, summary: summary, error: lost, left: left)
        #expect(document["exit_status"] == .int(Int64(ExitStatus.ioError.rawValue)))
        #expect(document["error"] == .string(lost.description))
    }

    @Test func theHookIsNotGivenTheStationsAWSKeys() {
        let environment = CardDoneHook.environment([
            "PATH": "/usr/bin", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token",
            "AWS_SHARED_CREDENTIALS_FILE": "/etc/ingest/credentials",
        ])
        #expect(environment == ["PATH": "/usr/bin", "AWS_SHARED_CREDENTIALS_FILE": "/etc/ingest/credentials"])
    }
}
