/// The reading, on a thread of its own: the walk of the card, the journal asked about each
/// batch of files, each file read and fingerprinted; and the walk that only counts.
extension CardVerification {
    /// Walks `volume`, asks the journal about each batch of files, reads each file and hands
    /// it on with the journal's record; the folders the walk lost are handed on too. Throws
    /// what ended it early: the card gone, the journal unreadable.
    func read(
        _ volume: VolumeIdentity, into batches: Batches<CardFinding>, progress: CardVerificationProgress,
        until stop: @escaping @Sendable () -> Bool
    ) throws(IngestError) {
        let root: FileDescriptor
        do throws(SystemError) { root = try FileDescriptor(path: volume.rootPath, flags: [.readOnly, .directory]) } catch {
            throw .sourceUnavailable(path: volume.rootPath, reason: error.reason)
        }
        let presence = try? CardPresence(root: root, rootPath: volume.rootPath)
        let reader = CardFileReader(root: root, progress: progress)
        var waiting: [ScanFinding] = []
        var paths: [CardPath] = []
        var failure: IngestError?
        func flush() {
            guard failure == nil, !waiting.isEmpty else { return }
            defer {
                waiting.removeAll(keepingCapacity: true)
                paths.removeAll(keepingCapacity: true)
            }
            var known: [CardPath: CardJournalEntry] = [:]
            if let journal {
                do { known = try journal.verificationEntries(ofVolume: volume.key, paths: paths) } catch {
                    failure = .journal(error)
                    return
                }
            }
            for finding in waiting {
                guard !stop() else { return }
                switch finding {
                case let .skipped(path, reason):
                    batches.add(.lost(path, reason))
                case .file(let file):
                    let read = reader.read(file)
                    // One file that cannot be read is that file's problem; the check stops only
                    // when the card itself is gone (as an ingest's staging does).
                    if let cause = read.ioError, let evidence = presence?.check() {
                        failure = .volumeLost(volume: volume.displayName, cause: cause, evidence: evidence)
                        return
                    }
                    batches.add(.file(read, known[file.path]))
                }
            }
        }
        defer { reader.close() }
        try Scanner(rules: rules).scan(root: volume.rootPath, until: { failure != nil || stop() }) { finding in
            switch finding {
            case .file(let file):
                waiting.append(finding)
                paths.append(file.path)
                if paths.count >= Self.batch { flush() }
            case .skipped(_, let reason) where reason.losesContent:
                waiting.append(finding)
                if waiting.count >= Self.batch { flush() }
            case .skipped:
                break  // left out by the rules, or nothing with content: no problem
            }
        }
        flush()
        if let failure { throw failure }
    }

    /// Counts the card's files and bytes, for the progress's totals and its ETA: a walk of
    /// metadata alone, on a thread of its own beside the reading. Blocking.
    func count(_ volume: VolumeIdentity, progress: CardVerificationProgress, until stop: @escaping @Sendable () -> Bool) {
        var files = 0
        var bytes: Int64 = 0
        do throws(IngestError) {
            try Scanner(rules: rules).scan(root: volume.rootPath, until: stop) { finding in
                if case .file(let file) = finding {
                    files += 1
                    bytes = bytes.addingSaturating(file.size)
                }
            }
        } catch {
            return  // the reading reports it
        }
        if !stop() { progress.setTotals(files: files, bytes: bytes) }
    }
}

/// A card file as read now: its size and time as opened, and its fingerprint, or why it
/// could not be read.
struct CardFileRead: Sendable {
    var path: CardPath
    var size: Int64
    var mtime: Int64
    var fingerprint: Fingerprint?
    /// Why it could not be read.
    var failure: String?
    /// The failed system call, when it may be the card's end (an I/O error).
    var ioError: SystemError?
}

/// What the reading hands on.
enum CardFinding: Sendable {
    case file(CardFileRead, CardJournalEntry?)
    /// A folder whose contents the walk lost (``SkipReason/losesContent``).
    case lost(CardPath, SkipReason)
}

/// Reads card files whole, each beneath the card's root (``CardOpener``: no link followed, no
/// other mount entered), in 1 MiB blocks, direct where the file system allows, and
/// fingerprints them. One thread.
final class CardFileReader {
    private let opener: CardOpener
    private let buffer = AlignedBuffer(size: CardVerification.blockSize)
    private let hasher = FingerprintHasher()
    private let progress: CardVerificationProgress

    init(root: FileDescriptor, progress: CardVerificationProgress) {
        opener = CardOpener(root: root)
        self.progress = progress
    }

    func read(_ file: ScannedFile) -> CardFileRead {
        var read = CardFileRead(path: file.path, size: file.size, mtime: file.mtime)
        let opened: (file: FileDescriptor, status: FileStatus)
        do throws(CardOpenError) { opened = try opener.open(file.path, flags: .readOnly) } catch {
            switch error {
            case .symlink(let link):
                read.failure = "\(link.display) is a symbolic link now (the walk saw none there): not followed"
            case .otherFileSystem(let place):
                read.failure = "\(place.display) is another mount now: not entered"
            case .system(let cause):
                read.failure = cause.reason
                read.ioError = Self.mayBeTheCard(cause) ? cause : nil
            }
            return read
        }
        read.size = Int64(opened.status.st_size)
        read.mtime = opened.status.mtimeNanoseconds
        let reader = FileRangeReader(
            FileRange(file: opened.file, path: file.path.display, offset: 0, length: read.size), buffer: buffer)
        hasher.reset()
        do throws(SystemError) {
            while case let bytes = try reader.next(), !bytes.isEmpty {
                hasher.update(bytes)
                progress.bytesRead.add(Int64(bytes.count), ordering: .relaxed)
            }
        } catch {
            read.failure = "\(error.call) failed: \(error.reason)"
            read.ioError = Self.mayBeTheCard(error) ? error : nil
            return read
        }
        read.fingerprint = hasher.finalize()
        return read
    }

    /// Closes the folders held open.
    func close() { opener.reset() }

    /// An error a card gone gives too (EIO, ENOMEM, ENODEV…); a missing or refused file is
    /// never the card.
    private static func mayBeTheCard(_ error: SystemError) -> Bool {
        ![.noSuchFileOrDirectory, .notDirectory, .permissionDenied, .notPermitted, .tooManySymbolicLinkLevels, .nameTooLong]
            .contains(error.errno)
    }
}
