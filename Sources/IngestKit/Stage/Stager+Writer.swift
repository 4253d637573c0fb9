// The stager's writer: writes each file's chunks to a partial file, then publishes the copies
// in batches, durable and named by their content; runs on its own thread.

extension Stager.Pipeline {
    private struct Partial {
        var file: FileDescriptor
        var path: String
        /// What the file held before (a spare's old copy): cut off when the copy is shorter.
        var stale: Int64
        /// Written with direct I/O, past the page cache (see ``append(_:to:)``).
        var isDirect: Bool
        var written: Int64 = 0
        /// Writeback has been started up to here…
        var writebackStarted: Int64 = 0
        /// …and finished, with the pages dropped, up to here.
        var dropped: Int64 = 0
        /// Read by an upload as it is written.
        var growing: GrowingCopy?
    }

    /// A copy written in full, waiting for its batch to be made durable and published.
    private struct Written {
        var partial: Partial
        var file: ScannedFile
        var fingerprint: Fingerprint
        var checksums: PartChecksums?
    }

    /// Kick off writeback every this many bytes, so dirty pages never pile up.
    private static let writebackStride: Int64 = 8 << 20
    /// Copies become durable in batches: one `syncfs` for the data of a batch and one for
    /// its new names, instead of two `fsync`s per file (which made a card of small files
    /// several times slower than `cp`). A batch is published when the reader has nothing more
    /// ready, or when it reaches its size in files (see `write(report:)`) or `batchBytes`.
    private static let batchFiles = 64
    private static let batchBytes: Int64 = 256 << 20
    /// How long a batch waits for more copies once the reader has none ready. Without it, a
    /// card of small files read at card speed left the writer ahead of the reader at almost
    /// every file, and published batches of two or three: a `syncfs` per few copies, a
    /// visible share of the CPU time of a card of small files. A copy's upload starts this
    /// much later at most.
    private static let batchGathering: Duration = .milliseconds(10)

    func write(report: @Sendable (StageOutcome) -> Void) {
        var partial: Partial?
        var failedCurrent = false
        var batch: [Written] = []
        var batchBytes: Int64 = 0
        // Batches start at one file and double up to `batchFiles`: the uploader gets its
        // first files at once, not after 64 copies (it sat idle for that long when direct
        // reads let the reader keep the queue full), and a long card still costs few syncs.
        var batchLimit = 1
        // When the batch's first copy was written: it waits no longer than `batchGathering`.
        var batchStart = ContinuousClock.now

        func publishBatch() {
            guard !batch.isEmpty else { return }
            do throws(IngestError) {
                for outcome in try publish(batch) { report(outcome) }
            } catch {
                stop(error)
                for written in batch { System.removeIfPresent(written.partial.path) }
            }
            batch.removeAll(keepingCapacity: true)
            batchBytes = 0
            batchLimit = min(2 * batchLimit, Self.batchFiles)
        }

        loop: while true {
            if !batch.isEmpty, batch.count >= batchLimit || batchBytes >= Self.batchBytes
                || !queue.waitForItem(until: batchStart + Self.batchGathering)
            {
                publishBatch()
            }
            switch queue.take() {
            case .begin(let file, let growing):
                failedCurrent = false
                do throws(IngestError) { partial = try open(for: file, growing: growing) } catch {
                    growing?.ended(.failed)
                    stop(error)
                    failedCurrent = true
                }
            case .chunk(let chunk):
                if var current = partial, !failedCurrent {
                    do throws(IngestError) {
                        try append(chunk, to: &current)
                        partial = current
                    } catch {
                        stop(error)
                        failedCurrent = true
                        discard(&partial)
                    }
                }
                pool.put(chunk)
            case .end(let file, let fingerprint, let checksums):
                guard !failedCurrent, let current = partial else { continue }
                partial = nil
                current.growing?.ended(.complete(fingerprint))
                if batch.isEmpty { batchStart = .now }
                batch.append(Written(partial: current, file: file, fingerprint: fingerprint, checksums: checksums))
                batchBytes += current.written
            case .abort(let file, let failure):
                discard(&partial)
                report(.failed(file, failure))
            case .abandon:
                discard(&partial)
            case .finish:
                discard(&partial)
                publishBatch()
                break loop
            }
        }
    }

    private func discard(_ partial: inout Partial?) {
        if let current = partial {
            System.removeIfPresent(current.path)
            current.growing?.ended(.failed)
        }
        partial = nil
    }

    private func open(for file: ScannedFile, growing: GrowingCopy?) throws(IngestError) -> Partial {
        let area = stager.area
        try makeRoom(for: file.size)
        var partial: Partial
        do {
            let (fd, path, stale) = try area.createPartial()
            // Direct writes (see DirectIO.swift) where the staging file system takes them, but
            // for a small copy: one buffered write, read back from memory by its upload.
            partial = Partial(file: fd, path: path, stale: stale, isDirect: file.size > smallCopyLimit && fd.preferDirectIO())
        } catch {
            throw stagingError(error)
        }
        // Reserve the blocks now: running out of space shows at once, not mid-file. File
        // systems without fallocate (EOPNOTSUPP) are written the ordinary way; a small copy
        // is written in one go, whose failure shows as soon.
        if file.size > smallCopyLimit {
            do { try partial.file.reserve(length: file.size, path: partial.path) } catch {
                if error.isOutOfSpace {
                    System.removeIfPresent(partial.path)
                    throw .stagingFull(stagingPath: area.root, needed: file.size, available: 0, reserve: stager.settings.reserve)
                }
            }
        }
        if let growing {
            // A name of the stream's own: the partial's goes at publication, or with a failure.
            let streamPath = String(partial.path.dropLast(".partial".count)) + "-stream.partial"
            do throws(SystemError) {
                try System.link(partial.path, to: streamPath)
                growing.attach(path: streamPath)
                partial.growing = growing
            } catch {
                growing.ended(.failed)
            }
        }
        return partial
    }

    /// Free space is asked again after this many copies, or bytes, at the latest: other
    /// programs write to the disk too, and the reserve is what covers them meanwhile.
    private static let roomCheckCopies = 64
    private static let roomCheckBytes: Int64 = 64 << 20

    /// Throws ``IngestError/stagingFull(stagingPath:needed:available:reserve:)`` unless a
    /// copy of `size` bytes leaves the reserve free. The file system is asked (`statvfs`)
    /// every ``roomCheckCopies`` copies or ``roomCheckBytes`` bytes, not for every copy, and
    /// always before the disk is called full, after the spare files gave their blocks back.
    private func makeRoom(for size: Int64) throws(IngestError) {
        let area = stager.area
        let reserve = stager.settings.reserve
        // Compared without a sum: the size is the card's to say, and `size + reserve` of a
        // hostile file system's file could overflow (every operand is 0 or more).
        func fits() -> Bool { size <= room.available - reserve - room.spent }
        func ask() throws(IngestError) {
            do { room = (try area.availableBytes(), 0, 0) } catch { throw .stagingUnwritable(error) }
        }
        if room.copies >= Self.roomCheckCopies || room.spent >= Self.roomCheckBytes || !fits() { try ask() }
        if !fits(), area.emptySpares() > 0 { try ask() }
        guard fits() else {
            throw .stagingFull(
                stagingPath: area.root, needed: size, available: max(0, room.available - reserve), reserve: reserve)
        }
        room.spent += size
        room.copies += 1
    }

    /// Writes a chunk. With direct I/O the chunk goes from its (aligned) buffer to the disk:
    /// no page-cache page is allocated, filled and dropped for it, which on a virtual machine
    /// whose host takes back idle guest memory is most of what a buffered write costs
    /// (measured on our CI machine, see DirectIO.swift). The file's
    /// unaligned tail, and any write the file system refuses direct, go through the cache.
    private func append(_ chunk: Chunk, to partial: inout Partial) throws(IngestError) {
        let wasDirect = partial.isDirect
        do { try partial.file.write(chunk.bytes, at: partial.written, isDirect: &partial.isDirect, path: partial.path) } catch {
            throw stagingError(error)
        }
        partial.written += Int64(chunk.count)
        partial.growing?.wrote(upTo: partial.written)
        if !wasDirect { streamWriteback(&partial) }
    }

    /// Buffered writes stream: every stride, writeback of the new stride starts and the
    /// stride before it, written back by now, leaves the page cache. A copy of any size
    /// holds at most two strides of dirty pages, and the disk, not memory, sets the pace.
    private func streamWriteback(_ partial: inout Partial) {
        guard partial.written - partial.writebackStarted >= Self.writebackStride else { return }
        let file = partial.file
        if partial.writebackStarted > partial.dropped,
            file.waitForWriteback(offset: partial.dropped, length: partial.writebackStarted - partial.dropped)
        {
            file.dropFromCache(offset: partial.dropped, length: partial.writebackStarted - partial.dropped)
            partial.dropped = partial.writebackStarted
        }
        file.startWriteback(offset: partial.writebackStarted, length: partial.written - partial.writebackStarted)
        partial.writebackStarted = partial.written
    }

    /// Makes a batch of written copies durable and gives each its content address: sync
    /// the data, link each copy to its name, sync the names. Only then is a copy staged.
    /// A batch of one large copy (read alone: the reader was on it for a while) syncs only
    /// its own data and name.
    private func publish(_ batch: [Written]) throws(IngestError) -> [StageOutcome] {
        let area = stager.area
        var isNew: [Bool] = []
        let lone = batch.count == 1 && batch[0].partial.written >= Self.writebackStride ? batch.first : nil
        do {
            for written in batch {
                try StagingArea.cut(written.partial.file, to: written.partial.written, stale: written.partial.stale, path: written.partial.path)
            }
            if let lone { try area.sync(copy: lone.partial.file, path: lone.partial.path) } else { try area.sync() }
            for written in batch {
                // On disk now: its pages need not stay in memory (verify drops them itself), but
                // for a small copy's, which its upload reads shortly.
                if written.partial.written > smallCopyLimit { written.partial.file.dropFromCache() }
                try written.partial.file.close()
                isNew.append(try area.link(partial: written.partial.path, as: written.fingerprint))
            }
            if isNew.contains(true) {
                if let lone { try area.syncName(of: lone.fingerprint) } else { try area.sync() }
            }
        } catch {
            throw stagingError(error)
        }
        for written in batch { System.removeIfPresent(written.partial.path) }
        return zip(batch, isNew).map { written, isNew in
            var verified = false
            if stager.settings.verify != .off {
                if let mismatch = verify(written.file, fingerprint: written.fingerprint) { return .failed(written.file, mismatch) }
                verified = true
            }
            return .staged(
                StagedFile(
                    file: written.file, fingerprint: written.fingerprint, deduplicated: !isNew, verified: verified,
                    partChecksums: written.checksums))
        }
    }

    /// Re-reads the staged copy (and the source, with `.both`) and compares fingerprints.
    private func verify(_ file: ScannedFile, fingerprint: Fingerprint) -> StageFailure? {
        let stagedPath = stager.area.path(for: fingerprint)
        let staged = Result { () throws(SystemError) in
            try fingerprintOfFile(FileDescriptor(path: stagedPath, flags: .readOnly), path: stagedPath)
        }
        switch staged {
        case .failure(let error): return StageFailure(kind: .ioError(error))
        case .success(let found) where found != fingerprint:
            // A staged copy that does not match its name must not stay under that name.
            System.removeIfPresent(stagedPath)
            return StageFailure(kind: .verificationMismatch(expected: fingerprint, found: found, of: "the staged copy"))
        default: break
        }
        guard stager.settings.verify == .both else { return nil }
        let source: FileDescriptor
        do { source = try writerOpener.open(file.path, flags: .readOnly).file } catch { return .opening(error) }
        switch Result(catching: { () throws(SystemError) in try fingerprintOfFile(source, path: file.path.display) }) {
        case .failure(let error): return StageFailure(kind: .ioError(error))
        case .success(let found) where found != fingerprint:
            return StageFailure(kind: .verificationMismatch(expected: fingerprint, found: found, of: "the source"))
        default: return nil
        }
    }

    /// Hashes a whole file, from the disk (direct reads, or the cache dropped first);
    /// writer thread only.
    private func fingerprintOfFile(_ fd: FileDescriptor, path: String) throws(SystemError) -> Fingerprint {
        fd.dropFromCache()
        return try Fingerprint.of(FileRangeReader(wholeFile: fd, path: path, buffer: verifyBuffer)).0
    }

    private func stagingError(_ error: SystemError) -> IngestError {
        if error.isOutOfSpace {
            return .stagingFull(stagingPath: stager.area.root, needed: 0, available: 0, reserve: stager.settings.reserve)
        }
        return .stagingUnwritable(error)
    }
}
