/// What a scan of a volume, compared with the journal, says should happen: how many files
/// to stage and how many bytes, what was skipped, what deserves a word.
///
/// It counts the files to stage but does not hold them: a card of 100,000 files would keep
/// 100,000 paths for the whole run. The stager takes them from a second walk of the card
/// (``FilesToStage``), which sorts the same way (``KnownFiles``); it costs a
/// second pass over the card's metadata, a small part of the run for a card of small files.
public struct ScanPlan: Sendable {
    public var volume: VolumeIdentity
    public var totals = ScanTotals()
    /// Skipped entries worth telling (litter and exclusions are only counted), the first
    /// ``reportLimit``.
    public var notableSkips: [(CardPath, SkipReason)] = []
    /// Of ``notableSkips``, those that lose content (``SkipReason/losesContent``): journalled
    /// with the card, for `status` and its verdict.
    public var lostSkips: [(CardPath, SkipReason)] {
        notableSkips.filter { $0.1.losesContent }
    }
    /// Files ingested that deserve a word (names that are not UTF-8, empty files), the first
    /// ``reportLimit``.
    public var notices: [(ScannedFile, code: String, message: String)] = []
    /// How many skips and notices each list keeps: a card of a million FIFOs or empty files
    /// is counted, not listed (``ScanTotals/unlisted``).
    public static let reportLimit = 1000

    /// Scans `volume` and sorts what it finds against what the journal `known`s: reads no
    /// file contents, changes nothing.
    public static func make(volume: VolumeIdentity, rules: ScanRules, known: KnownFiles) async throws(IngestError) -> ScanPlan {
        try await onDedicatedThread("ingest-scan") { () throws(IngestError) -> ScanPlan in
            var plan = ScanPlan(volume: volume)
            try known.walk(volume, rules: rules) { finding, toStage in plan.add(finding, toStage: toStage) }
            return plan
        }
    }

    /// Counts `finding`; `toStage`: a file is to be staged (``KnownFiles``).
    mutating func add(_ finding: ScanFinding, toStage: Bool) {
        switch finding {
        case let .skipped(path, reason):
            totals.skipped += 1
            if reason.losesContent { totals.lost += 1 }
            if reason.isNotable {
                if notableSkips.count < Self.reportLimit { notableSkips.append((path, reason)) } else { totals.unlisted += 1 }
            }
        case .file(let file):
            guard toStage else {
                totals.known += 1
                totals.knownBytes = totals.knownBytes.addingSaturating(file.size)
                return
            }
            if !file.path.isValidUTF8 {
                notice(file, "name-not-utf8", "name is not valid UTF-8; ingested under its raw bytes")
            }
            if file.size == 0 {
                notice(file, "empty-file", "empty file; ingested like any other")
            }
            totals.toStage += 1
            totals.toStageBytes = totals.toStageBytes.addingSaturating(file.size)
        }
    }

    private mutating func notice(_ file: ScannedFile, _ code: String, _ message: String) {
        if notices.count < Self.reportLimit { notices.append((file, code, message)) } else { totals.unlisted += 1 }
    }
}
