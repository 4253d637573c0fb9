import Foundation

/// The verdicts of every card the journal knows (``CardStanding``), for `ingest status`: one
/// per card and destination its files went to, each from that destination's uploads only.
///
/// A card that is present (mounted where the journal last saw it, with the same identity)
/// is judged whole: it is walked as an ingest walks it (``Scanner``, the same rules, `lstat`
/// only) and its files compared with the journal a batch at a time, so memory stays flat
/// whatever the card. A file the journal does not know (added since the card was ingested)
/// or a verified file changed since (size, modification time, or inode where the file system
/// keeps inode numbers) turns the verdict to no before the next ingest of the card notices
/// it. A file deleted from the card changes nothing: its object is in the bucket.
public enum CardStandings {
    /// `rules`: the scan's, so that a file an ingest leaves out is not counted as new.
    public static func all(journal: Journal, rules: ScanRules = ScanRules()) async throws(JournalError) -> [CardStanding] {
        var standings: [CardStanding] = []
        // A card's tallies come together; its walk serves all of them.
        var walked: (key: String, found: Look?)?
        for tally in try await journal.cardTallies() {
            var standing = CardStanding(tally: tally)
            if walked?.key != tally.volume.key {
                walked = (tally.volume.key, try await look(at: tally.volume, journal: journal, rules: rules))
            }
            if let found = walked?.found {
                (standing.changedCount, standing.changed) = (found.changedCount, found.changed)
                (standing.newCount, standing.new) = (found.newCount, found.new)
            }
            standings.append(standing)
        }
        return standings
    }

    /// A walk of the card when it is present (mounted where the journal last saw it, with the
    /// same identity); nil when it is not.
    private static func look(at volume: VolumeRecord, journal: Journal, rules: ScanRules) async throws(JournalError) -> Look? {
        guard let present = try? VolumeIdentity.identify(path: volume.rootPath), present.key == volume.key else { return nil }
        let look = await onDedicatedThread("ingest-look") { () -> Result<Look, JournalError> in
            Result { () throws(JournalError) in try Look(of: present, journal: journal, rules: rules) }
        }
        return try look.get()
    }

    /// What a walk of a present card found against the journal: the first few of each kind.
    struct Look {
        static let kept = 5
        var changed: [CardPath] = []
        var changedCount = 0
        var new: [CardPath] = []
        var newCount = 0

        init(of volume: VolumeIdentity, journal: Journal, rules: ScanRules) throws(JournalError) {
            var batch: [ScannedFile] = []
            var failure: JournalError?
            func judge() {
                guard failure == nil, !batch.isEmpty else { return }
                do {
                    let known = try journal.knownFiles(ofVolume: volume.key, paths: batch.map(\.path))
                    for file in batch {
                        if let record = known[file.path] {
                            guard record.state == .uploaded,
                                KnownFiles.changed(file, from: record, comparingInode: volume.keepsInodeNumbers)
                            else { continue }
                            changedCount += 1
                            if changed.count < Self.kept { changed.append(file.path) }
                        } else {
                            newCount += 1
                            if new.count < Self.kept { new.append(file.path) }
                        }
                    }
                } catch {
                    failure = error
                }
                batch.removeAll(keepingCapacity: true)
            }
            // A walk that fails (the card pulled) judges what it reached.
            try? Scanner(rules: rules).scan(root: volume.rootPath, until: { failure != nil }) { finding in
                guard case .file(let file) = finding else { return }
                batch.append(file)
                if batch.count == KnownFiles.batch { judge() }
            }
            judge()
            if let failure { throw failure }
        }
    }
}
