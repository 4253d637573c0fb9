import Foundation
import Logging

/// Who wrote a card's history, for the manifests' `<creatorinfo>`: the tool, the station
/// (its device id and tags), the card (file-system UUID, label, serial) and the scene.
public struct CustodyCreator: Sendable, Equatable {
    public var device: String
    public var deviceTags: [String: String]
    public var scene: String?

    public init(config: Config, scene: String?) {
        device = config.device.id ?? UploadPlanner.hostName()
        deviceTags = config.device.tags
        self.scene = scene ?? config.scene.name
    }

    func creator(for volume: VolumeRecord) -> MHLCreator {
        var details = [MHLCreator.Detail("device", device)]
        details += deviceTags.sorted { $0.key < $1.key }.map { MHLCreator.Detail("device tag \($0.key)", $0.value) }
        details.append(MHLCreator.Detail("card", volume.key))
        if let uuid = volume.fsUUID { details.append(MHLCreator.Detail("card file-system UUID", uuid)) }
        if let label = volume.fsLabel { details.append(MHLCreator.Detail("card label", label)) }
        if let serial = volume.serial { details.append(MHLCreator.Detail("card serial", serial)) }
        if let model = volume.model { details.append(MHLCreator.Detail("card reader", [volume.vendor, model].compactMap { $0 }.joined(separator: " "))) }
        if let scene { details.append(MHLCreator.Detail("scene", scene)) }
        return MHLCreator(toolName: "ingest", toolVersion: IngestVersion.number, hostName: UploadPlanner.hostName(), details: details)
    }
}

/// What writing a card's history came to.
public struct CustodyOutcome: Sendable, Equatable {
    /// Generations uploaded now (written by this run or left by an earlier one).
    public var uploaded: [CustodyGeneration] = []
    /// Why the history could not be written or uploaded; it stays journalled, for the next
    /// run, `resume` or `rescan`.
    public var error: UploadError?
    public init() {}
}

/// A card's chain of custody in the bucket: an ASC MHL generation per run that adds verified
/// files, in `ascmhl/` of the card's folder, so that a client who downloads the folder checks
/// it with the ASC's tool (`ascmhl diff`, `ascmhl create -h xxh128`).
///
/// Written only once every file the journal knows of the card is verified, and in this
/// order, each step durable before the next: the manifest and the chain are written to the
/// state directory (where they stay, the card's local history), the generation is
/// journalled with the files it lists, the chain naming it is uploaded, then the manifest
/// (`CardCustody+Bucket.swift`). A kill anywhere leaves a journalled generation that the next
/// process uploads as it was, never a second one. The chain, which each generation rewrites,
/// is written only over the chain just read (`If-Match` on its ETag, `If-None-Match` for
/// the first), and the manifest only where no object is, so nothing is ever replaced; the
/// chain is the lock on a generation's number when two stations write one card's history.
extension UploadService {
    /// Uploads the generations left journalled by a process that stopped, then the card's
    /// next generation if it has verified files no generation lists.
    public func writeCustody(ofVolume key: String, creator: CustodyCreator) async -> CustodyOutcome {
        var outcome = CustodyOutcome()
        do throws(UploadError) {
            let unuploaded: [CustodyGeneration]
            let folder: String?
            let verified: Bool
            let volume: VolumeRecord?
            let files: [UnlistedFile]
            do {
                try await journal.settleFilesOfVerifiedUploads()
                unuploaded = try await journal.unuploadedGenerations().filter { $0.volumeKey == key }
                folder = try await journal.cardFolder(ofVolume: key)
                verified = try await journal.allVerified(ofVolume: key)
                volume = try await journal.cardTallies(volumeKey: key).first?.volume
                files = folder != nil && verified ? try await journal.unlistedFiles(ofVolume: key) : []
            } catch { throw .journal(error) }
            guard let volume else { return outcome }
            let creator = creator.creator(for: volume)
            for generation in unuploaded { try await upload(generation, of: volume, creator: creator, into: &outcome) }
            guard let folder else { return outcome }
            let byTarget = Dictionary(grouping: files, by: \.target)
            for (target, files) in byTarget.sorted(by: { $0.key.bucket < $1.key.bucket }) {
                let generation = try await writeGeneration(of: volume, files: files, target: target, folder: folder, creator: creator)
                if let generation { try await upload(generation, of: volume, creator: creator, into: &outcome) }
            }
        } catch {
            outcome.error = error
            logger.warning("the card's ASC MHL history is not in the bucket yet", metadata: ["volume": "\(key)", "error": "\(error)"])
        }
        return outcome
    }

    /// For `resume` and `rescan`: the generations left unuploaded, and the cards whose run
    /// ended between their last object and their generation.
    public func finishCustody(creator: CustodyCreator) async -> CustodyOutcome {
        var outcome = CustodyOutcome()
        var volumes: Set<String> = []
        do {
            volumes.formUnion(try await journal.unuploadedGenerations().map(\.volumeKey))
            volumes.formUnion(try await journal.volumesAwaitingGeneration())
        } catch {
            outcome.error = .journal(error)
            return outcome
        }
        for key in volumes.sorted() {
            let one = await writeCustody(ofVolume: key, creator: creator)
            outcome.uploaded += one.uploaded
            if outcome.error == nil { outcome.error = one.error }
            // The card's verdict changes with its history: recorded again, for the metrics.
            do { try await journal.judgeCard(key) } catch {
                if outcome.error == nil { outcome.error = .journal(error) }
            }
        }
        return outcome
    }

    /// Where the card's local history in `target` lives: `custody/<card id>-<bucket>/ascmhl/`.
    func custodyDirectory(volumeKey: String, target: S3Destination) -> String {
        "\(stateDirectory.path)/custody/\(KeyContext.cardID(volumeKey: volumeKey))-\(target.bucket)/ascmhl"
    }

    /// Renders and journals the next generation of `files`, and writes it with the chain to
    /// the local history; nil when none of them is in the card's folder.
    func writeGeneration(
        of volume: VolumeRecord, files: [UnlistedFile], target: S3Destination, folder: String, creator: MHLCreator
    ) async throws(UploadError) -> CustodyGeneration? {
        var listed: [Int64] = []
        var entries: [MHLEntry] = []
        var seen: Set<String> = []
        for file in files {
            // A key outside the folder (made by an earlier template) cannot be listed there.
            guard file.key.hasPrefix(folder), seen.insert(file.key).inserted else { continue }
            listed.append(file.id)
            entries.append(MHLEntry(
                path: String(file.key.dropFirst(folder.count)), size: file.size,
                lastModified: Date(timeIntervalSince1970: Double(file.mtime) / 1e9), xxh128: file.fingerprint,
                hashDate: file.hashedAt))
        }
        guard !entries.isEmpty else { return nil }
        let earlier: [CustodyGeneration]
        do { earlier = try await journal.generations(ofVolume: volume.key).filter { $0.target == target } } catch {
            throw .journal(error)
        }
        let now = Date()
        let number = (earlier.last?.number ?? 0) + 1
        let folderName = folder.split(separator: "/").last.map(String.init) ?? volume.name
        let fileName = ASCMHL.manifestName(generation: number, folderName: folderName, created: now)
        let manifest: [UInt8]
        do { manifest = try ASCMHL.manifest(entries: entries, creator: creator, created: now, process: .transfer) } catch {
            throw UploadError(exitStatus: .dataError, scope: .object, message: "\(error)")
        }
        let generation = CustodyGeneration(
            volumeKey: volume.key, number: number, target: target, folder: folder, fileName: fileName,
            c4: ASCMHL.c4(manifest), files: entries.count, createdAt: now)
        let chain = ASCMHL.chain((earlier + [generation]).map { MHLGeneration(number: $0.number, fileName: $0.fileName, c4: $0.c4) })
        let directory = custodyDirectory(volumeKey: volume.key, target: target)
        do throws(SystemError) {
            try makeDirectories(directory)
            try AtomicFile.write(manifest, to: directory + "/" + fileName)
            try AtomicFile.write(chain, to: directory + "/" + ASCMHL.chainFileName)
        } catch {
            throw UploadError(exitStatus: .cantCreate, scope: .destination, message: "the card's local ASC MHL history: \(error)")
        }
        do { try await journal.recordGeneration(generation, listing: listed) } catch { throw .journal(error) }
        hooks.at("mhl-journalled")
        return generation
    }
}
