import Foundation

/// What `ingest rescan` reports besides the events of the ingests it runs: one event per
/// step, and a summary at the end.
public enum RescanEvent: Sendable {
    /// The pending uploads were resumed (the event `ingest resume` ends with).
    case resumed(ResumeOutcome)
    /// The folders of the cards seen lately were listed and compared with the journal.
    case bucketChecked(BucketCheckOutcome)
    /// The night's budget of objects was read back (`[rescan] read_back_bytes`).
    case readBack(ReadBackOutcome)
    /// One card or root is done, or was skipped.
    case card(CardOutcome)
    /// A known card is mounted outside `lookedIn`, the places rescan takes cards from: it
    /// was not ingested.
    case knownCardElsewhere(KnownCardElsewhere, lookedIn: [String])
    /// A card not here has files only it can bring to the bucket (``CardAwaitingItself``).
    case cardAwaitingItself(CardAwaitingItself)
    /// Multipart uploads no journal knows were looked for at one destination, and the old
    /// ones aborted.
    case orphansSwept(OrphanSweepOutcome, age: Duration)
    /// The orphan sweep was not due: the last one that reached every destination ran at
    /// `last`; the next is due after `next`.
    case orphanSweepDeferred(last: Date, next: Date)
    /// The staging area was swept.
    case swept(StagingSweep)
    /// Everything ran; `metricsFile` is where the metrics went, if anywhere.
    case finished(RescanReport, exitStatus: ExitStatus, metricsFile: String?)
}

extension RescanEvent {
    /// The event as one NDJSON object, in the style of the other events.
    public var json: [String: JSONValue] {
        switch self {
        case .resumed(let outcome):
            return outcome.json
        case .bucketChecked(let outcome):
            var object: [String: JSONValue] = [
                "event": "bucket_checked", "cards": .int(outcome.cards), "objects": .int(outcome.objects),
                "problems": .array(outcome.problems.map { .string($0.text) }),
            ]
            object["error"] = outcome.error.map { .string($0.message) }
            return object
        case .cardAwaitingItself(let card):
            var object: [String: JSONValue] = [
                "event": "card_awaited", "key": .string(card.volumeKey), "name": .string(card.name),
                "path": .string(card.rootPath), "files": .int(card.files), "bytes": .int(card.bytes),
                "first": .string(card.firstPath.display), "safe_to_erase": .bool(false),
                "command": .string(card.command),
            ]
            object["reason"] = card.reason.map(JSONValue.string)
            return object
        case .readBack(let outcome):
            var object: [String: JSONValue] = [
                "event": "read_back", "budget_bytes": .int(outcome.budget), "objects": .int(outcome.objects),
                "bytes": .int(outcome.bytes), "problems": .array(outcome.problems.map { .string($0.text) }),
                "unavailable": .array(outcome.unavailable.map(JSONValue.string)),
            ]
            object["error"] = outcome.error.map { .string($0.message) }
            return object
        case .card(let card):
            var object: [String: JSONValue] = [
                "event": "rescan_card", "path": .string(card.source.path), "origin": .string(card.source.origin.rawValue),
                "name": .string(card.name), "status": .string(card.statusCode),
                "pending": .int(card.pending.count), "pending_bytes": .int(card.pending.bytes),
                "exit_status": .int(card.exitStatus.rawValue),
            ]
            object["key"] = card.volumeKey.map(JSONValue.string)
            object["message"] = card.message.map(JSONValue.string)
            if let summary = card.summary {
                object["staged"] = .int(summary.staged)
                object["staged_bytes"] = .int(summary.stagedBytes)
                object["failed"] = .int(summary.failed)
                object["uploaded"] = .int(summary.uploads?.uploaded ?? 0)
                object["uploaded_bytes"] = .int(summary.uploads?.uploadedBytes ?? 0)
                object["upload_failed"] = .int(summary.uploads?.failed ?? 0)
                object["upload_error"] = summary.uploadError.map { .string($0.message) }
                if let safe = summary.safeToErase {
                    object["safe_to_erase"] = .bool(safe)
                    object["not_safe_because"] = .array(summary.notSafeBecause.map(JSONValue.string))
                }
            }
            return object
        case let .knownCardElsewhere(card, lookedIn):
            return [
                "event": "known_card_elsewhere", "key": .string(card.volumeKey), "name": .string(card.name),
                "mount_points": .array(card.mountPoints.map(JSONValue.string)),
                "looked_in": .array(Self.places(lookedIn).map(JSONValue.string)), "command": .string(card.command),
            ]
        case let .orphansSwept(outcome, age):
            var object: [String: JSONValue] = [
                "event": "orphan_uploads_swept", "endpoint": .string(outcome.target.endpoint),
                "bucket": .string(outcome.target.bucket), "prefix": .string(outcome.prefix),
                "age_seconds": .double(age.inSeconds), "listed": .int(outcome.listed), "aborted": .int(outcome.aborted),
                "kept_young": .int(outcome.young), "truncated": .bool(outcome.truncatedAt != nil),
            ]
            object["message"] = outcome.problem.map(JSONValue.string)
            return object
        case let .orphanSweepDeferred(last, next):
            return [
                "event": "orphan_uploads_sweep_deferred", "last_swept_at": .string(last.formatted(.iso8601)),
                "next_after": .string(next.formatted(.iso8601)),
            ]
        case .swept(let sweep):
            return [
                "event": "staging_swept", "staged_copies_removed": .int(sweep.copiesRemoved),
                "partials_removed": .int(sweep.partialsRemoved),
            ]
        case let .finished(report, exitStatus, metricsFile):
            var object: [String: JSONValue] = [
                "event": "rescan_summary", "cards": .int(report.cards.count),
                "skipped": .int(report.cards.filter(\.isSkipped).count),
                "resumed": .int(report.resume.pending),
                "staged": .int(report.staged.count), "staged_bytes": .int(report.staged.bytes),
                "uploaded": .int(report.uploaded.count), "uploaded_bytes": .int(report.uploaded.bytes),
                "failed": .int(report.failed), "upload_failed": .int(report.uploadsFailed),
                "pending": .int(report.totals.notUploaded.count), "pending_bytes": .int(report.totals.notUploaded.bytes),
                "uploads_pending": .int(report.totals.pendingUploads.count),
                "staged_copies_removed": .int(report.sweep.copiesRemoved),
                "orphan_uploads_aborted": .int(report.orphans.aborted),
                "read_back_objects": .int(report.readBack.objects), "read_back_bytes": .int(report.readBack.bytes),
                "read_back_problems": .int(report.readBack.problems.count),
                "orphan_sweeps_failed": .int(report.orphans.failures), "seconds": .double(report.seconds),
                "exit_status": .int(exitStatus.rawValue),
                "cards_safe_to_erase": .array(report.cards.filter { $0.summary?.safeToErase == true }.map { .string($0.name) }),
                "known_cards_elsewhere": .int(report.elsewhere.count),
                "cards_awaited": .array(report.awaiting.map { .string($0.name) }),
            ]
            object["metrics_file"] = metricsFile.map(JSONValue.string)
            return object
        }
    }

    /// The event for people: a line or a few.
    public var text: String {
        switch self {
        case .resumed(let outcome):
            return outcome.text + (outcome.problem.map { "\n  upload error: \($0)" } ?? "")
        case .bucketChecked(let outcome):
            var lines = [
                "Bucket: \(counted(outcome.objects, "object")) of \(counted(outcome.cards, "card")) checked, "
                    + "\(outcome.problems.count) missing or changed"
                    + (outcome.problems.isEmpty ? "" : " (sent again when their card is here; not safe to erase meanwhile):")
            ]
            lines += outcome.problems.prefix(20).map { "  " + $0.text }
            if let error = outcome.error { lines.append("  could not check: \(error)") }
            return lines.joined(separator: "\n")
        case .readBack(let outcome):
            var lines = [
                "Read back: \(counted(outcome.objects, "object")) (\(ByteCount(outcome.bytes)) of a budget of "
                    + "\(ByteCount(outcome.budget))), \(outcome.problems.count) not the bytes ingested"
                    + (outcome.problems.isEmpty ? "" : " (sent again to their alternative keys; not safe to erase meanwhile):")
            ]
            lines += outcome.problems.prefix(20).map { "  " + $0.text }
            lines += outcome.unavailable.map { "  \($0) cannot read objects back: its objects were not read back" }
            if let error = outcome.error { lines.append("  could not read back: \(error)") }
            return lines.joined(separator: "\n")
        case .card(let card):
            let head = "\(card.name) (\(card.volumeKey ?? card.source.path), \(card.source.origin.rawValue))"
            switch card.status {
            case .busy, .unavailable:
                return "\(head): skipped: \(card.message ?? "")"
            case .ingested, .failed:
                let summary = card.summary
                var line = "\(head): staged \(summary?.staged ?? 0) (\(ByteCount(summary?.stagedBytes ?? 0)))"
                line += ", uploaded \(summary?.uploads?.uploaded ?? 0) (\(ByteCount(summary?.uploads?.uploadedBytes ?? 0)))"
                line += ", failed \(summary?.failed ?? 0)"
                if let failed = summary?.uploads?.failed, failed > 0 { line += " (+\(counted(failed, "upload")))" }
                line += ", pending \(card.pending.count) (\(ByteCount(card.pending.bytes)))"
                if let message = card.message { line += "\n  stopped: \(message)" }
                if let problem = summary?.uploadError { line += "\n  upload error: \(problem)" }
                if let safe = summary?.safeToErase {
                    line += safe ? "; safe to erase" : "; NOT safe to erase: \(summary?.notSafeBecause.first ?? "")"
                }
                return line
            }
        case .cardAwaitingItself(let card):
            return "\(card.name) (\(card.volumeKey)): NOT safe to erase: \(counted(card.files, "file")) "
                + "(\(ByteCount(card.bytes))) not in the bucket, which only the card can bring (\(card.firstPath.display)"
                + (card.reason.map { ": \($0)" } ?? "") + "). Insert the card (it is ingested on insertion), or run: "
                + card.command
        case let .knownCardElsewhere(card, lookedIn):
            let places = card.mountPoints.joined(separator: " and ")
            return "\(card.name) (\(card.volumeKey)), a card the journal knows, is mounted at \(places), not where rescan "
                + "takes cards from (\(Self.places(lookedIn).joined(separator: ", "))): not ingested. To ingest it: \(card.command)"
        case let .orphansSwept(outcome, age):
            return "Orphan uploads (unknown to the journal, older than \(age.configText)) at " + outcome.text
        case let .orphanSweepDeferred(last, next):
            return "Orphan uploads: last looked for at \(last.formatted(.iso8601)); not again before \(next.formatted(.iso8601))"
        case .swept(let sweep):
            return "Staging: removed \(counted(sweep.copiesRemoved, "staged copy", plural: "staged copies")) past their "
                + "retention, \(counted(sweep.partialsRemoved, "partial copy", plural: "partial copies")) left by interrupted runs"
        case let .finished(report, exitStatus, metricsFile):
            let cards = report.cards.count
            var lines = [
                "Rescan: \(counted(cards, "card")) (\(report.cards.filter(\.isSkipped).count) skipped), "
                    + "\(counted(report.resume.pending, "upload")) resumed",
                "  staged \(report.staged.count) (\(ByteCount(report.staged.bytes))), "
                    + "uploaded \(report.uploaded.count) (\(ByteCount(report.uploaded.bytes))), "
                    + "failed \(counted(report.failed, "file")) and \(counted(report.uploadsFailed, "upload"))",
                "  pending: \(counted(report.totals.notUploaded.count, "file")) "
                    + "(\(ByteCount(report.totals.notUploaded.bytes))) not in the bucket yet, "
                    + counted(report.totals.pendingUploads.count, "upload"),
            ]
            if report.orphans.aborted > 0 || report.orphans.failures > 0 {
                lines.append(
                    "  orphan multipart uploads aborted: \(report.orphans.aborted)"
                        + (report.orphans.failures > 0
                            ? " (\(counted(report.orphans.failures, "destination")) could not be swept)" : ""))
            }
            if !report.awaiting.isEmpty {
                lines.append(
                    "  cards to insert again (files only they can bring): "
                        + report.awaiting.map { "\($0.name) (\($0.command))" }.joined(separator: ", "))
            }
            if !report.elsewhere.isEmpty {
                lines.append(
                    "  known cards mounted elsewhere, not ingested: "
                        + report.elsewhere.map { "\($0.name) (\($0.command))" }.joined(separator: ", "))
            }
            let safe = report.cards.filter { $0.summary?.safeToErase == true }.map(\.name)
            if !safe.isEmpty { lines.append("  safe to erase: \(safe.joined(separator: ", "))") }
            if let metricsFile { lines.append("  metrics written to \(metricsFile)") }
            lines.append(String(format: "  done in %.1f s, exit status %d", report.seconds, exitStatus.rawValue))
            return lines.joined(separator: "\n")
        }
    }
}

extension RescanEvent {
    /// The places of `roots` not inside another of them (`/run/ingest/cards` is in `/run/ingest`).
    static func places(_ roots: [String]) -> [String] {
        var places: [String] = []
        for root in roots where !places.contains(root)
            && !roots.contains(where: { $0 != root && root.hasPrefix($0 + "/") }) {
            places.append(root)
        }
        return places
    }
}

extension CardOutcome {
    /// A short stable word for `--json`.
    public var statusCode: String {
        switch status {
        case .ingested: "ingested"
        case .busy: "busy"
        case .unavailable: "unavailable"
        case .failed: "failed"
        }
    }

    /// Why it was skipped or stopped, for people.
    public var message: String? {
        switch status {
        case .ingested: nil
        case .busy(let message): message
        case .unavailable(let error), .failed(let error): error.description
        }
    }

    public var isSkipped: Bool {
        switch status {
        case .busy, .unavailable: true
        case .ingested, .failed: false
        }
    }
}

extension OrphanSweepOutcome {
    /// One line for people: where, and what came of it.
    public var text: String {
        let place = "s3://\(target.bucket)/\(prefix) at \(target.endpoint)"
        var line = "\(place): \(listed) unfinished listed, \(aborted) aborted, \(young) younger kept"
        if let bound = truncatedAt {
            line += " (listing stopped at its bound of \(bound.pages) pages or"
                + " \(bound.kept) candidates: the rest next time)"
        }
        if let problem { line += "; stopped: \(problem)" }
        return line
    }
}
