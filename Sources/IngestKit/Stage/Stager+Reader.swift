// The stager's reader: opens each file of the card, reads and hashes it, and hands its chunks to
// the writer; runs on the calling thread.

extension Stager.Pipeline {
    func read(_ files: some Sequence<ScannedFile>) {
        let hasher = FingerprintHasher()
        for file in files {
            if readerShouldStop { break }
            switch readOne(file, hasher: hasher) {
            case .copied(let copied, let digest, let checksums):
                queue.put(.end(copied, digest, checksums))
            case .abandoned:
                queue.put(.abandon)
            case .failed(let failure):
                queue.put(.abort(file, failure))
                // One file that cannot be read is that file's error; the run stops only when
                // the card itself is gone. (An I/O error is what a card gone gives too: EIO,
                // ENOMEM, ENODEV…; a missing or refused file is never the card.)
                if case .ioError(let cause) = failure.kind, let evidence = presence.check() {
                    stop(.volumeLost(volume: volumeName, cause: cause, evidence: evidence))
                }
            }
        }
        readerOpener.reset()
        queue.put(.finish)
    }

    /// The failure of a file of `size` bytes that the staging file system could not hold
    /// even empty, above the reserve, or nil. Checked before a byte is read: a 16 TiB sparse
    /// file would otherwise be read whole (its holes as zeros) for a copy that cannot be.
    /// A reserve that leaves no room at all is not the file's fault: then every file goes
    /// on to the writer's space check, which stops the run and names the reserve.
    private func neverFits(_ size: Int64) -> StageFailure? {
        let reserve = stager.settings.reserve
        // `capacity - reserve`: both are the station's own, 0 or more; no sum with the size.
        guard stagingCapacity > reserve, size > stagingCapacity - reserve else { return nil }
        return StageFailure(
            kind: .largerThanStaging(size: size, stagingPath: stager.area.root, capacity: stagingCapacity, reserve: reserve))
    }

    /// How often the reader drops what it has read from the page cache (a file it found cold).
    private static let sourceDropStride: Int64 = 8 << 20

    private enum ReadResult {
        /// Read to the end; the file as it was read, its fingerprint and its parts' checksums.
        case copied(ScannedFile, Fingerprint, PartChecksums?)
        case failed(StageFailure)
        case abandoned
    }

    /// Reads one file to its end, hashing it, and hands its chunks to the writer.
    ///
    /// A file whose first chunk is all in the page cache already (a folder another program
    /// has just written) is warm: it is read through the cache and its pages are left there,
    /// someone else's. Any other file is cold: read direct where the run asks for it, else
    /// through the cache, dropping what was read. The choice is made once, at the open,
    /// because that is the one moment the cache speaks only of others: once this reader has
    /// read a chunk, the kernel's read-ahead has cached the next ones, so asking again per
    /// chunk would find the file warm because it is being read. So a file cached in part is
    /// judged by its head: the cache evicts the pages least recently used first, for a file
    /// written front to back its front, so a cached head means a cached file, and a file whose
    /// head is gone is one the cache was giving up already. One call a file, whatever its size,
    /// and on a card found cold one call in 16 files (``CacheSense``).
    private func readOne(_ scanned: ScannedFile, hasher: FingerprintHasher) -> ReadResult {
        let display = scanned.path.display
        let (source, before): (FileDescriptor, FileStatus)
        do {
            (source, before) = try readerOpener.open(scanned.path, flags: [.readOnly, .nonBlocking])
        } catch {
            return .failed(.opening(error))
        }
        stager.filesOpened.add(1, ordering: .relaxed)
        var file = scanned
        do throws(SystemError) {
            guard before.isRegularFile else { return .failed(StageFailure(kind: .vanished)) }
            if let inode = scanned.inode, UInt64(before.st_ino) != inode {
                return .failed(StageFailure(kind: .replacedSinceScan))
            }
            file.size = Int64(before.st_size)
            file.mtime = before.mtimeNanoseconds
            if let tooLarge = neverFits(file.size) { return .failed(tooLarge) }
            let head = min(file.size, Int64(stager.settings.chunkSize))
            let isWarm = cacheSense.isWarm { source.isInPageCache(firstBytes: head) }
            var isDirect = !isWarm && stager.settings.directReads && source.preferDirectIO()
            if !isDirect { source.adviseSequential() }
            hasher.reset()
            var checksummer = stager.settings.partChecksums.flatMap {
                PartChecksummer(fileSize: file.size, preferredPartSize: $0.partSize, singlePutThreshold: $0.singlePutThreshold)
            }
            let growing = growingCopy(of: file, cutAt: checksummer?.partSize)
            queue.put(.begin(file, growing))
            var checksummed = 0
            var total: Int64 = 0
            var dropped: Int64 = 0
            while true {
                let chunk = pool.take()
                // No more than the rest of the file and a byte: a small file's direct read
                // then asks the disk for its own blocks, not a whole chunk's, and comes back
                // short, which ends it in one read.
                let wanted = Stager.readLength(left: file.size - total, chunk: chunk.storage.count)
                do throws(SystemError) {
                    chunk.count = try source.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: chunk.storage[..<wanted]), at: total, isDirect: &isDirect,
                        path: display)
                } catch {
                    pool.put(chunk)  // the pool is the memory bound: a chunk lost here is never found again
                    throw error
                }
                if chunk.count == 0 {
                    pool.put(chunk)
                    break
                }
                hasher.update(chunk.bytes)
                checksummer?.update(chunk.bytes)
                if let growing, let finished = checksummer?.finished, finished.count > checksummed {
                    for crc in finished[checksummed...] { growing.checksummed(crc) }
                    checksummed = finished.count
                }
                total += Int64(chunk.count)
                if !isDirect, !isWarm, total - dropped >= Self.sourceDropStride {
                    // Read and hashed: the card's pages need not crowd the page cache.
                    source.dropFromCache(offset: dropped, length: total - dropped)
                    dropped = total
                }
                stager.bytesRead.add(Int64(chunk.count), ordering: .relaxed)
                let full = chunk.count == wanted
                queue.put(.chunk(chunk))
                if !full || readerShouldStop { break }
            }
            if readerShouldStop { return .abandoned }
            let after = try source.stat()
            guard total == file.size, Int64(after.st_size) == file.size, after.mtimeNanoseconds == file.mtime else {
                return .failed(StageFailure(kind: .changedWhileCopying))
            }
            let checksums = checksummer?.finish()
            if let growing, let all = checksums?.crc32c, all.count > checksummed {
                for crc in all[checksummed...] { growing.checksummed(crc) }
            }
            return .copied(file, hasher.finalize(), checksums)
        } catch {
            // A bad sector of this file, or the card gone: ext4 reports a vanished device as
            // EIO or ENOMEM, others as ENXIO or ENODEV. `read(_:)` asks the card which.
            return .failed(StageFailure(kind: .ioError(error)))
        }
    }

    /// The copy of `file` the streams read as it grows, when they take it: a file cut into
    /// parts at `partSize`, the cut its parts' CRC32Cs are computed at.
    private func growingCopy(of file: ScannedFile, cutAt partSize: Int64?) -> GrowingCopy? {
        guard let streams = stager.streams, let partSize, file.size > 0, streams.partSize(toStream: file) == partSize else {
            return nil
        }
        let copy = GrowingCopy(file: file, partSize: partSize)
        streams.stream(copy)
        return copy
    }
}
