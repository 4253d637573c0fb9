/// What the journal knows of a volume's files, as a scan sorts them: a file is to be staged
/// when it is new, changed since it was journalled (size, time, or inode where the file
/// system keeps inode numbers: ``VolumeIdentity/keepsInodeNumbers``), still pending from
/// an earlier run, or ingested to another destination than the run's (a card's verdict
/// belongs to a destination: run against another bucket, the card is ingested there too). The journal is asked a batch of files at a time (``Journal/knownFiles(ofVolume:paths:)``),
/// so a rescan of a card of 100,000 files never holds the journal's record of all of them.
public struct KnownFiles: Sendable {
    private enum Source: Sendable {
        case journal(Journal, volumeKey: String)
        case records([CardPath: FileRecord])
    }
    private let source: Source
    /// The run's destination (``KnownFile/destination(of:)``); nil when the run uploads nothing.
    private var destination: String?
    /// Files looked up in one query.
    static let batch = 512

    /// The journal's files of the volume `key`.
    /// With `target`, a file whose upload goes to another destination is to be staged again,
    /// for `target`.
    public static func journal(_ journal: Journal, volumeKey key: String, target: S3Destination? = nil) -> KnownFiles {
        KnownFiles(source: .journal(journal, volumeKey: key), destination: target.map(KnownFile.destination(of:)))
    }

    /// Files known from `records` (none: every file is new).
    public static func records(_ records: [CardPath: FileRecord] = [:]) -> KnownFiles { KnownFiles(source: .records(records)) }

    /// Whether each of `files` is to be staged; `inodes`: whether their inodes are compared.
    func toStage(_ files: [ScannedFile], comparingInodes inodes: Bool) throws(IngestError) -> [Bool] {
        let known: (CardPath) -> KnownFile?
        switch source {
        case let .journal(journal, key):
            let found: [CardPath: KnownFile]
            do { found = try journal.knownFiles(ofVolume: key, paths: files.map(\.path)) } catch { throw .journal(error) }
            known = { found[$0] }
        case .records(let records):
            known = { path in records[path].map { KnownFile(size: $0.size, mtime: $0.mtime, inode: $0.inode, state: $0.state) } }
        }
        return files.map { file in
            guard let record = known(file.path) else { return true }
            if record.state == .pending || Self.changed(file, from: record, comparingInode: inodes) { return true }
            if let destination, record.state != .forgotten, let theirs = record.destination, theirs != destination { return true }
            return false
        }
    }

    /// The file is on the card with another size, modification time or (where the file
    /// system keeps them, `comparingInode`) inode than journalled: a file replaced by a copy
    /// of the same size and time (`cp -p`) is another file, whatever its bytes.
    static func changed(_ file: ScannedFile, from record: KnownFile, comparingInode: Bool) -> Bool {
        if comparingInode, let inode = record.inode, let now = file.inode, Int64(bitPattern: now) != inode { return true }
        return file.size != record.size || file.mtime != record.mtime
    }

    /// Walks `volume` (``Scanner``) until `stop`, calling `each` with every finding in the
    /// walk's order and, for a file, whether it is to be staged; files wait for their batch's
    /// answer, at most ``batch`` of them.
    func walk(
        _ volume: VolumeIdentity, rules: ScanRules, until stop: () -> Bool = { false }, _ each: (ScanFinding, Bool) -> Void
    ) throws(IngestError) {
        var waiting: [ScanFinding] = []
        var files: [ScannedFile] = []
        var failure: IngestError?
        let inodes = volume.keepsInodeNumbers
        func flush() {
            guard failure == nil, !waiting.isEmpty else { return }
            do throws(IngestError) {
                var verdicts = try toStage(files, comparingInodes: inodes).makeIterator()
                for finding in waiting {
                    if case .file = finding { each(finding, verdicts.next() ?? true) } else { each(finding, false) }
                }
            } catch {
                failure = error
            }
            waiting.removeAll(keepingCapacity: true)
            files.removeAll(keepingCapacity: true)
        }
        try Scanner(rules: rules).scan(root: volume.rootPath, until: { failure != nil || stop() }) { finding in
            waiting.append(finding)
            if case .file(let file) = finding {
                files.append(file)
                if files.count == Self.batch { flush() }
            } else if waiting.count >= Self.batch {
                flush()
            }
        }
        flush()
        if let failure { throw failure }
    }
}
