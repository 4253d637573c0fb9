import ArgumentParser
import Foundation
import IngestKit

/// `ingest status`: what the journal holds.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what the journal holds: files by state, each card's verdict (safe to erase?), uploads pending and failed.",
        discussion: """
            Each card the journal knows gets a line per destination its files went to (the \
            cluster and the bucket: a card ingested into two buckets gets two lines): its \
            identity, the destination, when it was last seen, its files, and whether it is \
            safe to erase as far as that destination holds it, with the first reason when it \
            is not. A card is safe to erase in a destination when every file of it has a \
            verified object in that bucket (its own upload there: another bucket's proves \
            nothing), \
            none is quarantined, its last scan ingested every folder (none too deep or \
            unreadable), its ASC MHL history in the bucket lists every file, and, when the \
            card is mounted now, no file on it is new or changed since (one lstat per file, \
            walked as an ingest walks it). The \
            journal's word: `ingest verify-card` re-reads the card and the bucket. \
            With --json, one `card` object per card and destination (`endpoint`, `bucket`, \
            `bucket_id`) with `safe_to_erase` and `reasons`.

            With no journal (nothing was ingested with this state directory yet) it says \
            so, with the path it looked at (--json: one `nothing_ingested` event), and exits \
            0; a journal it cannot read (permission denied, not a database) exits 73.

            
            Pending uploads are listed with their id (what resume, abort and forget take), \
            the file, its size, the phase the upload reached, how often the server lost it \
            and it started over, when it last moved, and why it last failed.
            """)

    @OptionGroup var common: CommonOptions

    @Flag(
        help: ArgumentHelp(
            "First list each card's folder in the bucket and compare it with the journal, as the nightly rescan does "
                + "([rescan] bucket_check_days): an object missing or changed is listed, its upload starts again, and "
                + "its card is not safe to erase until the card's next ingest sends it. Needs credentials."))
    var checkBucket = false

    func run() async throws {
        let logger = common.bootstrapLogging()
        do throws(IngestError) {
            let config = try common.loadConfig()
            let statePath = common.statePath(config)
            // No journal is nothing ingested yet, said as such; one that cannot be read is 73.
            guard let journal = try common.readJournal(config) else {
                if !common.json { ReportOutput.standardOutput.line("State directory: \(statePath)") }
                common.say(common.nothingIngested(config, command: "status"), on: .standardOutput)
                return
            }
            if checkBucket {
                let (state, writable) = try common.openState(config)
                let service = try await common.makeUploadService(
                    config: config, state: state, journal: writable, events: DiscardingSink(), logger: logger)
                let outcome = await service.checkBucket(days: max(config.rescan.bucketCheckDays, 1))
                let event = RescanEvent.bucketChecked(outcome)
                if common.json {
                    ReportOutput.standardOutput.write(JSONValue.line(event.json) + "\n")
                } else {
                    for line in event.text.split(separator: "\n", omittingEmptySubsequences: false) {
                        ReportOutput.standardOutput.line(String(line))
                    }
                }
                if let error = outcome.error { throw IngestError.upload(error) }
            }
            let summary: JournalSummary
            let uploads: UploadSummary
            let quarantine: QuarantineSummary
            let cards: [CardStanding]
            do {
                summary = try await journal.summary()
                uploads = try await journal.uploadSummary()
                quarantine = try await journal.quarantine()
                cards = try await CardStandings.all(journal: journal, rules: config.scan)
            } catch {
                throw .journal(error)
            }
            if common.json {
                printJSON(summary, uploads: uploads, quarantine: quarantine, cards: cards, statePath: statePath)
            } else {
                printText(summary, uploads: uploads, quarantine: quarantine, cards: cards, statePath: statePath)
            }
        } catch {
            throw fail(error, json: common.json)
        }
    }

    private func printText(
        _ summary: JournalSummary, uploads: UploadSummary, quarantine: QuarantineSummary, cards: [CardStanding],
        statePath: String
    ) {
        var lines = ["State directory: \(statePath)", "Files:"]
        // As wide as the longest state's name: `padding(toLength:)` cuts what is longer.
        let width = FileState.allCases.map(\.rawValue.count).max() ?? 0
        for fileState in FileState.allCases {
            let tally = summary.files[fileState, default: .zero]
            lines.append("  \(fileState.rawValue.padding(toLength: width, withPad: " ", startingAt: 0)) \(tally.count) (\(ByteCount(tally.bytes)))")
        }
        lines.append("Staged copies: \(summary.stagedObjects.count) (\(ByteCount(summary.stagedObjects.bytes)))")
        let safe = cards.filter(\.safeToErase).count
        let cardCount = Set(cards.map(\.tally.volume.key)).count
        if cardCount == cards.count {
            lines.append("Cards: \(cards.count) (\(safe) safe to erase)")
        } else {
            lines.append("Cards: \(cardCount), \(cards.count) verdicts, one per card and destination (\(safe) safe to erase)")
        }
        for card in cards {
            lines.append("  " + card.line)
            for reason in card.reasons.dropFirst() { lines.append("      also: \(reason)") }
        }
        let completed = uploads.byPhase[.completed, default: .zero]
        // Objects, not files: one per key and bucket, so a file changed since its upload
        // counts once above and once more here for each content of it that went up.
        lines.append(
            "Objects uploaded: \(completed.count) (\(ByteCount(completed.bytes))), one per completed upload: "
                + "a changed file's earlier contents and other buckets count too")
        lines.append("Uploads pending: \(uploads.pending.count)")
        if !uploads.pending.isEmpty {
            lines.append("  ID            PHASE       RESTARTS  SIZE        UPDATED               FILE")
            for record in uploads.pending {
                let columns = [
                    record.id.padding(toLength: 12, withPad: " ", startingAt: 0),
                    record.phase.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0),
                    String(record.restartCount).padding(toLength: 8, withPad: " ", startingAt: 0),
                    ByteCount(record.size).description.padding(toLength: 10, withPad: " ", startingAt: 0),
                    record.updatedAt.formatted(.iso8601).padding(toLength: 20, withPad: " ", startingAt: 0),
                    record.sourceDisplay,
                ]
                lines.append("  " + columns.joined(separator: "  "))
                if let error = record.lastError { lines.append("      last error: \(error)") }
            }
            lines.append("Run ingest resume to finish them, ingest abort ID to give one up.")
        }
        if quarantine.count > 0 {
            lines.append(
                "Quarantined: \(counted(quarantine.files.count, "file")), \(counted(quarantine.uploads.count, "upload")), holding "
                    + "\(ByteCount(quarantine.stagedBytes)) of staging (every run that meets them exits non-zero):")
            for file in quarantine.files {
                lines.append("  \(QuarantinedFileID.text(file))  \(file.cardPath.display), \(file.failures) failed runs: \(file.lastError ?? "")")
            }
            for record in quarantine.uploads {
                lines.append("  \(record.id)  \(record.sourceDisplay), \(record.failures) failed runs: \(record.lastError ?? "")")
            }
            lines.append("They are still tried; fix the cause, or give one up with ingest forget ID (its staged copy is freed).")
        }
        let needingCard = summary.files[.pending, default: .zero].count
        if needingCard > 0 {
            let names = Dictionary(summary.volumes.map { ($0.key, $0.name) }, uniquingKeysWith: { first, _ in first })
            lines.append(
                "Need their card again: \(counted(needingCard, "file")) (ingest each card again to copy them; do not format it yet)"
                    + (needingCard > summary.needingCard.count ? ", the latest \(summary.needingCard.count):" : ":"))
            for file in summary.needingCard {
                let card = names[file.volumeKey] ?? file.volumeKey
                lines.append("  \(card): \(file.cardPath.display): \(file.lastError ?? "not copied yet")")
            }
        }
        if !summary.recentFailures.isEmpty {
            lines.append("Recent failures (retried on the next run):")
            for file in summary.recentFailures {
                lines.append("  \(file.cardPath.display): \(file.lastError ?? "")")
            }
        }
        // A card's label and paths, and the server's words, are hostile: each line escaped.
        for line in lines { ReportOutput.standardOutput.line(line) }
    }

    private func printJSON(
        _ summary: JournalSummary, uploads: UploadSummary, quarantine: QuarantineSummary, cards: [CardStanding],
        statePath: String
    ) {
        var object: [String: JSONValue] = ["event": "status", "state_dir": .string(statePath)]
        for fileState in FileState.allCases {
            let tally = summary.files[fileState, default: .zero]
            object["files_\(fileState.rawValue)"] = .int(Int64(tally.count))
            object["bytes_\(fileState.rawValue)"] = .int(tally.bytes)
        }
        object["staged_objects"] = .int(Int64(summary.stagedObjects.count))
        object["staged_bytes"] = .int(summary.stagedObjects.bytes)
        object["volumes"] = .int(Int64(summary.volumes.count))
        object["card_verdicts"] = .int(Int64(cards.count))
        object["cards_safe_to_erase"] = .int(Int64(cards.filter(\.safeToErase).count))
        object["recent_failures"] = .int(Int64(summary.recentFailures.count))
        object["files_needing_card"] = .int(Int64(summary.files[.pending, default: .zero].count))
        object["uploads_completed"] = .int(Int64(uploads.byPhase[.completed, default: .zero].count))
        object["uploads_pending"] = .int(Int64(uploads.pending.count))
        object["quarantined_files"] = .int(Int64(quarantine.files.count))
        object["quarantined_uploads"] = .int(Int64(quarantine.uploads.count))
        object["quarantined_staged_bytes"] = .int(quarantine.stagedBytes)
        var text = JSONValue.line(object) + "\n"
        for card in cards { text += JSONValue.line(card.json) + "\n" }
        for file in quarantine.files {
            var line: [String: JSONValue] = [
                "event": "quarantined", "id": .string(QuarantinedFileID.text(file)), "kind": "file",
                "path": .string(file.cardPath.display), "volume": .string(file.volumeKey), "size": .int(file.size),
                "failures": .int(Int64(file.failures)),
            ]
            line["last_error"] = file.lastError.map(JSONValue.string)
            text += JSONValue.line(line) + "\n"
        }
        for record in quarantine.uploads {
            var line: [String: JSONValue] = [
                "event": "quarantined", "id": .string(record.id), "kind": "upload", "path": .string(record.sourceDisplay),
                "key": .string(record.key), "size": .int(record.size), "failures": .int(Int64(record.failures)),
            ]
            line["last_error"] = record.lastError.map(JSONValue.string)
            text += JSONValue.line(line) + "\n"
        }
        for file in summary.needingCard {
            var line: [String: JSONValue] = [
                "event": "needs_card", "volume": .string(file.volumeKey), "path": .string(file.cardPath.display),
                "size": .int(file.size),
            ]
            line["last_error"] = file.lastError.map(JSONValue.string)
            text += JSONValue.line(line) + "\n"
        }
        for record in uploads.pending {
            var line: [String: JSONValue] = [
                "event": "pending_upload", "upload_id": .string(record.id), "path": .string(record.sourceDisplay),
                "key": .string(record.key), "bucket": .string(record.bucket), "size": .int(record.size),
                "phase": .string(record.phase.rawValue), "restart_count": .int(Int64(record.restartCount)),
                "updated_at": .string(record.updatedAt.formatted(.iso8601)),
            ]
            line["last_error"] = record.lastError.map(JSONValue.string)
            text += JSONValue.line(line) + "\n"
        }
        ReportOutput.standardOutput.write(text)
    }
}
