import Foundation
import Testing

@testable import IngestKit

/// A station's state directory whose journal knows one card, and the bucket behind every
/// destination (a ``ScriptedStore``): what the tests of the uploader's runs, the streamed
/// parts, the runner and the card's history start from. The journal is a real one, since it
/// is the runner's queue and the streamed parts' record.
struct CardFixture {
    static let volume = VolumeIdentity(
        key: "uuid:1A2B-3C4D", rootPath: "/media/card", mountPoint: "/media/card", pathInFileSystem: "/",
        fsType: "vfat", device: nil)
    static let target = S3Destination(endpoint: "http://127.0.0.1:9", bucket: "cards", region: "us-east-1", addressing: .path)
    /// The labels of the card's objects but the fingerprint: the station as metadata and tag.
    static let labels = [SigV4Header("x-amz-meta-device", "station-7"), SigV4Header(ObjectLabels.taggingHeader, "device=station-7")]

    let directory = TemporaryDirectory()
    let store: ScriptedStore
    let state: StateDirectory
    let journal: Journal
    var volume: VolumeIdentity { Self.volume }

    init(store: ScriptedStore = ScriptedStore()) async throws {
        self.store = store
        state = try StateDirectory(path: directory.path + "/state")
        journal = try Journal(path: state.journalPath)
        try await journal.noteVolume(Self.volume)
    }

    /// The card's `file` journalled as staged with `fingerprint`.
    func recordStaged(_ file: ScannedFile, fingerprint: Fingerprint) async throws {
        try await journal.record(
            [.staged(StagedFile(file: file, fingerprint: fingerprint, deduplicated: false, verified: false))],
            volumeKey: Self.volume.key)
    }

    /// The journalled upload `id` run to its end from `stagedPath`, as a process's runner
    /// takes it up (`resumed`: it had begun in an earlier one).
    func upload(
        _ id: String, from stagedPath: String, partSize: Int64, resumed: Bool, checksums: PartChecksums?
    ) async throws -> UploadResult {
        let (record, parts) = try #require(try await journal.upload(id: id))
        var settings = UploadSettings()
        settings.partSize = partSize
        let uploader = ObjectUploader(
            record: record, client: store, journal: journal, stagedPath: stagedPath,
            limiter: TransferLimiter(maxRequests: 4, maxBytes: 1 << 30), settings: settings, sink: DiscardingSink(),
            hooks: FaultHooks(), stop: StopFlag(), releases: nil, conditionalWrites: true)
        return await UploadRun.upload(uploader, parts: parts, resumed: resumed, checksums: checksums)
    }
}
