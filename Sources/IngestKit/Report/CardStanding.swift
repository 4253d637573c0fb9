import Foundation

/// Whether a card may be formatted, and if not, why, for one destination its files went to:
/// the verdict `status` (one per card and destination), a run's summary (the run's
/// destination), the `on_card_done` hook, `sd_notify` and the metrics give.
///
/// A card is safe to erase when every file the journal knows of it (but those given up with
/// `ingest forget`) has a verified object in the destination's bucket (its own upload there:
/// another bucket's object proves nothing here), none is quarantined, its last scan
/// found nothing it could not ingest (a folder too deep or unreadable), and every file is
/// listed by an ASC MHL generation in the bucket, when the key template gives the card a
/// folder to hold one. `changed` and `new` add what a look at the card present found: files
/// changed since they were ingested, and files the journal does not know.
///
/// The journal's word only: `ingest verify-card` reads the card and the bucket again.
public struct CardStanding: Sendable, Equatable {
    public var tally: CardTally
    /// Files found changed on the card present (size or modification time), the first.
    public var changed: [CardPath] = []
    public var changedCount = 0
    /// Files on the card present that the journal does not know (never ingested), the first.
    public var new: [CardPath] = []
    public var newCount = 0

    public init(tally: CardTally) { self.tally = tally }

    public var safeToErase: Bool { reasons.isEmpty }

    /// Why not, the most pressing first; empty when safe.
    public var reasons: [String] {
        var reasons: [String] = []
        let t = tally
        if t.copyUnfinished {
            reasons.append("its last run stopped before every file of it was copied: ingest the card again")
        }
        if t.lostCount > 0 {
            let first = t.lost.first.map { ": \($0.path.display) (\($0.reason))" } ?? ""
            reasons.append("\(t.lostCount) \(t.lostCount == 1 ? "folder" : "folders") of the card not ingested\(first)")
        }
        if changedCount > 0 {
            reasons.append("\(changedCount) \(Self.files(changedCount)) changed on the card since ingested: \(changed[0].display)")
        }
        if newCount > 0 {
            reasons.append("\(newCount) \(Self.files(newCount)) on the card never ingested: \(new[0].display) (ingest the card again)")
        }
        if t.notCopied > 0 {
            let first = t.firstWaiting.map { ": \($0.display)" } ?? ""
            reasons.append("\(t.notCopied) \(Self.files(t.notCopied)) not copied from the card yet\(first)")
        }
        if t.objectsLost > 0 {
            let first = t.firstObjectLost.map { ": \($0)" } ?? ""
            reasons.append(
                "\(t.objectsLost) \(Self.files(t.objectsLost)) lost from this bucket since verified, to be ingested into it "
                    + "again\(first)")
        }
        if t.quarantined > 0 { reasons.append("\(t.quarantined) \(Self.files(t.quarantined)) quarantined") }
        if t.notUploaded > 0 {
            let first = t.notCopied == 0 ? t.firstWaiting.map { ": \($0.display)" } ?? "" : ""
            reasons.append("\(t.notUploaded) \(Self.files(t.notUploaded)) not verified in the bucket yet\(first)")
        }
        if t.folder != nil, t.unlisted > 0 {
            reasons.append("\(t.unlisted) \(Self.files(t.unlisted)) not in the card's ASC MHL history in the bucket yet")
        }
        return reasons
    }

    private static func files(_ count: Int) -> String { count == 1 ? "file" : "files" }

    /// One line for people: the card, its files and the verdict with its first reason.
    public var line: String {
        let v = tally.volume
        var who = v.name
        if let label = v.fsLabel, label != v.name { who += " (\(label))" }
        who += "  \(v.key)"
        if let destination = tally.destination { who += "  \(destination.displayName)" }
        let verdict = safeToErase ? "safe to erase" : "NOT safe to erase: " + reasons[0]
        return "\(who)  last seen \(v.lastSeen.formatted(.iso8601))  \(counted(tally.files, "file")) (\(ByteCount(tally.bytes)))  \(verdict)"
    }

    /// The `card` object of `status --json`, and of the hook's JSON.
    public var json: [String: JSONValue] {
        let v = tally.volume
        var object: [String: JSONValue] = [
            "event": "card", "volume": .string(v.key), "name": .string(v.name), "files": .int(Int64(tally.files)),
            "bytes": .int(tally.bytes), "first_seen": .string(v.firstSeen.formatted(.iso8601)),
            "last_seen": .string(v.lastSeen.formatted(.iso8601)), "safe_to_erase": .bool(safeToErase),
            "reasons": .array(reasons.map(JSONValue.string)), "files_not_copied": .int(Int64(tally.notCopied)),
            "files_not_uploaded": .int(Int64(tally.notUploaded)), "files_quarantined": .int(Int64(tally.quarantined)),
            "files_not_in_history": .int(Int64(tally.folder == nil ? 0 : tally.unlisted)),
            "not_ingested": .int(Int64(tally.lostCount)), "files_changed": .int(Int64(changedCount)),
            "files_new": .int(Int64(newCount)),
            "mhl_generations": .int(Int64(tally.generations)),
        ]
        object["fs_label"] = v.fsLabel.map(JSONValue.string)
        object["fs_uuid"] = v.fsUUID.map(JSONValue.string)
        object["serial"] = v.serial.map(JSONValue.string)
        object["folder"] = tally.folder.map(JSONValue.string)
        object["endpoint"] = tally.destination.map { .string($0.endpoint) }
        object["bucket"] = tally.destination.map { .string($0.bucket) }
        object["bucket_id"] = tally.destination?.bucketID.map(JSONValue.string)
        object["files_lost_from_bucket"] = .int(Int64(tally.objectsLost))
        return object
    }
}

extension Journal {
    /// Judges a card in `target` (nil: its main destination, where most of its files link)
    /// from its tally there and records the verdict (``noteVerdict(ofVolume:safe:reason:)``),
    /// durably: no card is reported safe to erase before the verdict that says so is on disk
    /// (it is read back by the metrics, without a look at the card's files). Nil for a card
    /// the journal does not know.
    @discardableResult
    public func judgeCard(_ key: String, in target: S3Destination? = nil) async throws(JournalError) -> CardStanding? {
        let found: CardTally?
        if let target { found = try await cardTally(volumeKey: key, in: target) } else { found = try await cardTallies(volumeKey: key).first }
        guard let tally = found else { return nil }
        let standing = CardStanding(tally: tally)
        try await noteVerdict(ofVolume: key, safe: standing.safeToErase, reason: standing.reasons.first)
        return standing
    }
}
