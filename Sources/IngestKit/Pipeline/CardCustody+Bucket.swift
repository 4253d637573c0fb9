import Foundation

/// A card's history as the bucket holds it, which more than one station may write: a card
/// read at a second station (a handover, two readers at a depot) lands in the same folder
/// when the key template leaves the station out, and each station then has generations to
/// add to one history.
///
/// The chain is the lock on a generation's number. Each upload reads the chain first and
/// writes its own only over the one it read (`If-Match` on that ETag, `If-None-Match` when
/// there is none), so of two stations that read the same chain one writes and the other is
/// refused. The loser reads again, finds the generations the winner wrote, takes them into
/// its journal and its local history (each manifest checked against its C4 id), counts the
/// files they already list with the same xxh128 as listed, and writes the rest, if any, as
/// the next generation. The chain goes up before the manifest it names: a manifest written
/// first by a station that then loses the chain would stay in the bucket under a number of
/// the winner's, in no generation, and nothing may be deleted to mend that. A kill between
/// the two leaves the chain naming a manifest that is not there yet, which the journal
/// still holds as not uploaded, so the card is not safe to erase until the next process
/// uploads it; a station that meets such a generation of another waits for it.
extension UploadService {
    /// How many times an upload reads the chain and tries to place its generation before
    /// it gives up (exit 75, the generation kept for `ingest resume`): each try lost to
    /// another station, or waiting for a manifest another station has yet to write.
    static let chainTries = 6

    /// Uploads a journalled generation from the local history: its place in the chain,
    /// then its manifest. When other stations wrote generations first, theirs are taken in
    /// and this one is written again after them (or not at all, when theirs list every file).
    func upload(
        _ journalled: CustodyGeneration, of volume: VolumeRecord, creator: MHLCreator, into outcome: inout CustodyOutcome
    ) async throws(UploadError) {
        let ready: ReadyDestination
        switch await destinations.client(for: journalled.target) {
        case .success(let destination): ready = destination
        case .failure(let error): throw error
        }
        guard ready.client.capabilities.contains(.documents) else {
            // A destination that keeps no documents of ours (a tus server) has no place for
            // the history: the station's copy, written and synced before the generation was
            // journalled, is the card's history, and the generation is settled as it is.
            do { try await journal.noteGenerationUploaded(journalled, chainETag: "") } catch { throw .journal(error) }
            return
        }
        var generation = journalled
        for attempt in 1...Self.chainTries {
            let (manifest, chain) = try localHistory(of: generation)
            let found: StoredDocument?
            do { found = try await ready.client.getDocument(key: generation.chainKey) } catch {
                throw UploadError(error, what: "GetObject \(generation.chainKey)", target: generation.target)
            }
            let chainETag: String
            switch try await place(generation, in: found) {
            case .claimed(let etag):
                chainETag = etag
            case .free(let condition):
                let written = try await write(chain, at: generation.chainKey, condition: condition, in: generation.target, ready: ready)
                // Refused: another station's chain came first, and is there to be read now.
                guard case .written(let etag) = written else { continue }
                chainETag = etag
            case .taken(let theirs, let etag):
                switch try await adopt(theirs, chainETag: etag, replacing: generation, of: volume, creator: creator, ready: ready) {
                case .next(let next): generation = next
                // Its station is between its chain and its manifest: a moment, then read again.
                case .waiting: try? await Task.sleep(for: .milliseconds(200 * attempt))
                case nil: return
                }
                continue
            }
            hooks.at("mhl-chain-uploaded")
            if case .refused = try await write(
                manifest, at: generation.manifestKey, condition: .ifNoneMatchAny, in: generation.target, ready: ready) {
                throw UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "\(generation.manifestKey) in \(generation.target.displayName) holds other bytes than generation "
                        + "\(generation.number) of this card's ASC MHL history (written by someone else?): nothing was replaced; "
                        + "the generation stays journalled for ingest resume")
            }
            do { try await journal.noteGenerationUploaded(generation, chainETag: chainETag) } catch { throw .journal(error) }
            outcome.uploaded.append(generation)
            return
        }
        throw UploadError(
            exitStatus: .busy, scope: .destination,
            message: "the ASC MHL history of \(generation.folder) in \(generation.target.displayName) kept changing under this "
                + "station (\(Self.chainTries) tries): another station is writing it; generation \(generation.number) stays "
                + "journalled for ingest resume")
    }

    /// The generation's manifest and chain as the local history holds them, checked
    /// against the journal: what is uploaded is exactly what was journalled.
    private func localHistory(of generation: CustodyGeneration) throws(UploadError) -> (manifest: [UInt8], chain: [UInt8]) {
        let directory = custodyDirectory(volumeKey: generation.volumeKey, target: generation.target)
        guard let manifest = FileManager.default.contents(atPath: directory + "/" + generation.fileName).map(Array.init),
            let chain = FileManager.default.contents(atPath: directory + "/" + ASCMHL.chainFileName).map(Array.init),
            ASCMHL.c4(manifest) == generation.c4,
            ASCMHL.parseChain(chain)?.last.map({ $0.number == generation.number && $0.c4 == generation.c4 }) == true
        else {
            throw UploadError(
                exitStatus: .software, scope: .object,
                message: "generation \(generation.number) of \(generation.volumeKey)'s ASC MHL history is missing or changed in "
                    + "\(directory): it cannot be uploaded as it was journalled")
        }
        return (manifest, chain)
    }

    /// Where the generation goes, given the chain in the bucket now.
    private enum Placement {
        /// The chain names it already (this station wrote it, and the answer or the journal's
        /// note of it was lost); the chain's ETag.
        case claimed(etag: String)
        /// Its number is next: the chain is written under this condition.
        case free(SigV4Header)
        /// Other stations wrote generations this station's journal does not have, its
        /// number among them or before it; the chain's ETag.
        case taken([MHLGeneration], etag: String)
    }

    /// Reads the bucket's chain (`found`) against the generations this station uploaded:
    /// every one of them must be in it as it was written, or the history was rewritten and
    /// nothing more is added to it.
    private func place(_ generation: CustodyGeneration, in found: StoredDocument?) async throws(UploadError) -> Placement {
        let ours: [CustodyGeneration]
        do {
            ours = try await journal.generations(ofVolume: generation.volumeKey)
                .filter { $0.target == generation.target && $0.uploadedAt != nil }
        } catch { throw .journal(error) }
        let key = generation.chainKey, place = generation.target.displayName
        guard let found else {
            guard ours.isEmpty else {
                throw UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "\(key) is gone from \(place), though it held \(ours.count) generation(s) of this card's ASC MHL "
                        + "history that this station wrote: nothing is added to a history that lost its chain")
            }
            return .free(.ifNoneMatchAny)
        }
        guard let chain = ASCMHL.parseChain(found.bytes), chain.map(\.number) == Array(0..<chain.count).map({ $0 + 1 }) else {
            throw UploadError(
                exitStatus: .integrity, scope: .object,
                message: "\(key) in \(place) is not an ASC MHL chain of generations 1 to N: nothing is added to it")
        }
        for written in ours where !chain.contains(MHLGeneration(number: written.number, fileName: written.fileName, c4: written.c4)) {
            throw UploadError(
                exitStatus: .integrity, scope: .object,
                message: "\(key) in \(place) no longer lists generation \(written.number) (\(written.fileName)) that this "
                    + "station wrote: the history was rewritten, and nothing is added to it")
        }
        if chain.contains(MHLGeneration(number: generation.number, fileName: generation.fileName, c4: generation.c4)) {
            return .claimed(etag: found.etag)
        }
        let known = Set(ours.map(\.number))
        let theirs = chain.filter { !known.contains($0.number) }
        if theirs.isEmpty { return .free(SigV4Header("If-Match", found.etag)) }
        return .taken(theirs, etag: found.etag)
    }

    /// What taking in other stations' generations came to.
    private enum Adopted {
        /// This station's files that theirs do not list, as the generation after theirs.
        case next(CustodyGeneration)
        /// A manifest of theirs is not in the bucket yet (its station is between the chain
        /// and the manifest): read again later.
        case waiting
    }

    /// Takes the generations other stations wrote (`theirs`, from the chain whose ETag is
    /// `chainETag`) into the journal and the local history in place of `generation`, which
    /// they took the number of; returns the generation to upload after them, nil when they
    /// list every file `generation` did.
    private func adopt(
        _ theirs: [MHLGeneration], chainETag: String, replacing generation: CustodyGeneration, of volume: VolumeRecord,
        creator: MHLCreator, ready: ReadyDestination
    ) async throws(UploadError) -> Adopted? {
        let directory = custodyDirectory(volumeKey: generation.volumeKey, target: generation.target)
        let now = Date()
        var adopted: [CustodyGeneration] = []
        var listed: [String: (number: Int, xxh128: String)] = [:]
        var manifests: [(name: String, bytes: [UInt8])] = []
        for entry in theirs {
            // A name from the bucket becomes a file of the local history: one plain name.
            guard ASCMHL.isManifestFileName(entry.fileName) else {
                throw UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "\(generation.chainKey) names generation \(entry.number)'s manifest \(String(reflecting: entry.fileName)), "
                        + "which is no manifest file name: nothing is taken from it")
            }
            let key = generation.folder + ASCMHL.directoryName + "/" + entry.fileName
            let document: StoredDocument?
            do { document = try await ready.client.getDocument(key: key) } catch {
                throw UploadError(error, what: "GetObject \(key)", target: generation.target)
            }
            guard let document else {
                logger.info("another station's generation is not in the bucket yet", metadata: ["manifest": "\(key)"])
                return .waiting
            }
            guard ASCMHL.c4(document.bytes) == entry.c4, let files = ASCMHL.parseManifest(document.bytes) else {
                throw UploadError(
                    exitStatus: .integrity, scope: .object,
                    message: "\(key) in \(generation.target.displayName) is not the manifest its chain names (C4 id or contents): "
                        + "nothing is taken from it")
            }
            for (path, xxh128) in files where listed[path] == nil { listed[path] = (entry.number, xxh128) }
            manifests.append((entry.fileName, document.bytes))
            adopted.append(CustodyGeneration(
                volumeKey: generation.volumeKey, number: entry.number, target: generation.target, folder: generation.folder,
                fileName: entry.fileName, c4: entry.c4, files: files.count, createdAt: now, uploadedAt: now,
                chainETag: entry == theirs.last ? chainETag : nil))
        }
        var taken: [Int64: Int] = [:]
        let mine: [ListedFile]
        do { mine = try await journal.filesListed(by: generation) } catch { throw .journal(error) }
        for file in mine where file.key.hasPrefix(generation.folder) {
            if let theirs = listed[String(file.key.dropFirst(generation.folder.count))], theirs.xxh128 == file.fingerprint {
                taken[file.id] = theirs.number
            }
        }
        do throws(SystemError) {
            for manifest in manifests { try AtomicFile.write(manifest.bytes, to: directory + "/" + manifest.name) }
        } catch {
            throw UploadError(exitStatus: .cantCreate, scope: .destination, message: "the card's local ASC MHL history: \(error)")
        }
        do { try await journal.adoptGenerations(adopted, replacing: generation, listing: taken) } catch { throw .journal(error) }
        _ = System.removeIfPresent(directory + "/" + generation.fileName)
        logger.notice(
            "another station wrote this card's history first: its generations are taken in",
            metadata: ["folder": "\(generation.folder)", "generations": "\(adopted.map(\.number))", "files": "\(taken.count)"])

        // The next generation lists what this one did that theirs do not: nothing else, so
        // that a file verified since (or a card not all verified now) waits for its own.
        let left = Set(mine.map(\.id)).subtracting(taken.keys)
        let unlisted: [UnlistedFile]
        let all: [CustodyGeneration]
        do {
            unlisted = try await journal.unlistedFiles(ofVolume: generation.volumeKey).filter {
                $0.target == generation.target && left.contains($0.id)
            }
            all = try await journal.generations(ofVolume: generation.volumeKey).filter { $0.target == generation.target }
        } catch { throw .journal(error) }
        if let next = try await writeGeneration(
            of: volume, files: unlisted, target: generation.target, folder: generation.folder, creator: creator)
        {
            return .next(next)
        }
        // Nothing left to list: the local chain becomes the bucket's.
        let chain = ASCMHL.chain(all.map { MHLGeneration(number: $0.number, fileName: $0.fileName, c4: $0.c4) })
        do throws(SystemError) { try AtomicFile.write(chain, to: directory + "/" + ASCMHL.chainFileName) } catch {
            throw UploadError(exitStatus: .cantCreate, scope: .destination, message: "the card's local ASC MHL history: \(error)")
        }
        return nil
    }

    /// What writing a document under a condition came to.
    private enum Written {
        /// The ETag it has now.
        case written(String)
        /// The condition was refused, and the key holds other bytes.
        case refused
    }

    /// Writes `bytes` at `key` of `target` under `condition`; a refused condition is a write
    /// only if the key already holds these very bytes (an answer lost, the write done).
    private func write(
        _ bytes: [UInt8], at key: String, condition: SigV4Header, in target: S3Destination, ready: ReadyDestination
    ) async throws(UploadError) -> Written {
        let md5 = "\"" + lowercaseHex(PartDigest.compute(.md5, bytes: bytes).bytes) + "\""
        let client = ready.client
        let headers = [SigV4Header("Content-Type", "text/xml"), condition]
        do throws(S3ClientError) {
            // Without conditional writes, a look first: a chain someone else rewrote, or a
            // manifest of that name, is never written over.
            if !ready.conditionalWrites, let head = try await client.headObject(key: key) {
                if head.etag == md5 { return .written(md5) }
                if condition == .ifNoneMatchAny || head.etag != condition.value { return .refused }
            }
            return .written(try await client.putDocument(key: key, bytes: bytes, headers: headers).etag)
        } catch {
            guard error.isPreconditionFailed else { throw UploadError(error, what: "PutObject \(key)", target: target) }
            let head: ObjectHead?
            do { head = try await client.headObject(key: key) } catch {
                throw UploadError(error, what: "HeadObject \(key)", target: target)
            }
            return head?.etag == md5 ? .written(md5) : .refused
        }
    }
}
