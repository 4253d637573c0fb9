import Foundation

/// The verdict of every card the journal knows (``CardStanding``), for `ingest status`.
///
/// A card that is present (mounted where the journal last saw it, with the same identity)
/// is looked at too: one `lstat` per verified file, so that a file changed on the card since
/// it was ingested (size, modification time, or inode where the file system keeps inode
/// numbers) turns the verdict to no before the next ingest of the card notices it. A file deleted from the card changes nothing: its object
/// is in the bucket.
public enum CardStandings {
    public static func all(journal: Journal) async throws(JournalError) -> [CardStanding] {
        var standings: [CardStanding] = []
        for tally in try await journal.cardTallies() {
            var standing = CardStanding(tally: tally)
            if let present = try? VolumeIdentity.identify(path: tally.volume.rootPath), present.key == tally.volume.key {
                let files = try await journal.files(ofVolume: tally.volume.key)
                let root = present.rootPath
                let inodes = present.keepsInodeNumbers
                let changed = await onDedicatedThread("ingest-look") { () -> [CardPath] in
                    files.values.filter { $0.state == .uploaded }.sorted { $0.path.lexicographicallyPrecedes($1.path) }
                        .filter { record in Self.changed(record, under: root, comparingInode: inodes) }.map(\.cardPath)
                }
                standing.changedCount = changed.count
                standing.changed = Array(changed.prefix(5))
            }
            standings.append(standing)
        }
        return standings
    }

    /// The file is on the card with another size, modification time or (where the file
    /// system keeps them) inode than ingested: a file replaced by a copy of the same size
    /// and time (`cp -p`) is another file, whatever its bytes.
    static func changed(_ record: FileRecord, under root: String, comparingInode: Bool) -> Bool {
        // The name's own bytes: a card's names need not be UTF-8.
        let path = (Array(root.utf8) + [UInt8(ascii: "/")] + Array(record.path) + [0]).map { CChar(bitPattern: $0) }
        guard let status = try? System.status(path, followingLinks: false) else { return false }
        if comparingInode, let inode = record.inode, Int64(bitPattern: UInt64(status.st_ino)) != inode { return true }
        return Int64(status.st_size) != record.size || status.mtimeNanoseconds != record.mtime
    }
}
