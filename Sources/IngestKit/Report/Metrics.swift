import Foundation

/// One metric family of the Prometheus text format: its HELP and TYPE lines and its samples.
public struct MetricFamily: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case counter, gauge
    }

    public struct Sample: Sendable, Equatable {
        /// Label names and values, written in this order.
        public var labels: [Label]
        public var value: Double

        public init(_ value: Double, labels: [Label] = []) {
            self.labels = labels
            self.value = value
        }
    }

    public struct Label: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var name: String
    public var help: String
    public var kind: Kind
    public var samples: [Sample]

    public init(_ name: String, _ kind: Kind, help: String, samples: [Sample]) {
        self.name = name
        self.kind = kind
        self.help = help
        self.samples = samples
    }

    public init(_ name: String, _ kind: Kind, help: String, value: Double) {
        self.init(name, kind, help: help, samples: [Sample(value)])
    }
}

/// The Prometheus text exposition format (0.0.4), as node_exporter's textfile collector
/// reads it: `# HELP` and `# TYPE` before each family's samples, label values quoted with
/// `\`, `"` and line feeds escaped, no timestamps (the collector refuses them).
public enum PrometheusText {
    public static func render(_ families: [MetricFamily]) -> String {
        var text = ""
        for family in families {
            precondition(isMetricName(family.name), "not a Prometheus metric name: \(family.name)")
            text += "# HELP \(family.name) \(escapeHelp(family.help))\n"
            text += "# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                text += family.name
                if !sample.labels.isEmpty {
                    let labels = sample.labels.map { label in
                        precondition(isLabelName(label.name), "not a Prometheus label name: \(label.name)")
                        return "\(label.name)=\"\(escapeLabelValue(label.value))\""
                    }
                    text += "{" + labels.joined(separator: ",") + "}"
                }
                text += " \(format(sample.value))\n"
            }
        }
        return text
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isMetricName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCIILetter || first == "_" || first == ":" else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" || $0 == ":" }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, and not starting with `__` (reserved for Prometheus).
    public static func isLabelName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCIILetter || first == "_", !name.hasPrefix("__") else {
            return false
        }
        return name.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" }
    }

    /// HELP text: backslash and line feed escaped.
    static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Label values: backslash, double quote and line feed escaped.
    static func escapeLabelValue(_ text: String) -> String {
        escapeHelp(text).replacingOccurrences(of: "\"", with: "\\\"")
    }

    /// Whole numbers without a fraction; `+Inf`, `-Inf` and `NaN` as the format spells them.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return "\(value)"
    }

    /// Writes `text` to `path` atomically (``AtomicFile``), mode 0644: node_exporter reads
    /// only `*.prom`, so it passes over the temporary `.NAME.prom.XXXXXX` beside it, and it
    /// sees the old file or the new one, never half of one.
    public static func write(_ text: String, to path: String) throws(IngestError) {
        do { try AtomicFile.write(Array(text.utf8), to: path, mode: 0o644) } catch {
            throw .metricsUnwritable(path: path, reason: error.description)
        }
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// The metrics written after every card and by `ingest rescan`, all from the journal (so
/// whichever process writes the file last writes the truth of every run before it):
/// lifetime totals, the state as of now, and the last card's ingest, which is what
/// node_exporter serves until the next card or rescan. Every query is an aggregate over
/// the journal or one row of it: the file costs one pass per card, never one per file.
public enum IngestMetrics {
    public static func families(_ totals: JournalTotals) -> [MetricFamily] {
        let files = totals.files
        func waiting(_ tally: (JournalSummary.Tally) -> Int64) -> [MetricFamily.Sample] {
            [
                .init(Double(tally(files[.pending, default: .zero])), labels: [.init("waiting_for", "stage")]),
                .init(Double(tally(files[.staged, default: .zero])), labels: [.init("waiting_for", "upload")]),
            ]
        }
        var families: [MetricFamily] = [
            .init(
                "ingest_files_staged_total", .counter,
                help: "Files copied from cards into staging and fingerprinted, including those uploaded since.",
                value: Double(totals.stagedEver.count)),
            .init(
                "ingest_staged_bytes_total", .counter, help: "Bytes of the files counted in ingest_files_staged_total.",
                value: Double(totals.stagedEver.bytes)),
            .init(
                "ingest_files_uploaded_total", .counter, help: "Files whose content is in the bucket, verified.",
                value: Double(files[.uploaded, default: .zero].count)),
            .init(
                "ingest_uploaded_bytes_total", .counter, help: "Bytes of the files counted in ingest_files_uploaded_total.",
                value: Double(files[.uploaded, default: .zero].bytes)),
            .init(
                "ingest_files_pending", .gauge,
                help: "Files not in the bucket yet, by what they wait for: stage (a copy from their card) or upload.",
                samples: waiting { Int64($0.count) }),
            .init(
                "ingest_pending_bytes", .gauge, help: "Bytes of the files counted in ingest_files_pending.",
                samples: waiting { $0.bytes }),
            .init(
                "ingest_files_failed", .gauge,
                help: "Files not in the bucket yet whose last attempt failed; they are retried on the next run.",
                value: Double(totals.failedFiles.count)),
            .init(
                "ingest_failed_bytes", .gauge, help: "Bytes of the files counted in ingest_files_failed.",
                value: Double(totals.failedFiles.bytes)),
            .init(
                "ingest_uploads_pending", .gauge, help: "Uploads (one per content and bucket) not verified in the bucket yet.",
                value: Double(totals.pendingUploads.count)),
            .init(
                "ingest_uploads_pending_bytes", .gauge, help: "Bytes of the uploads counted in ingest_uploads_pending.",
                value: Double(totals.pendingUploads.bytes)),
            .init(
                "ingest_uploads_failed", .gauge, help: "Pending uploads whose last attempt failed (ingest status says why).",
                value: Double(totals.failedUploads.count)),
            .init(
                "ingest_staging_bytes", .gauge, help: "Bytes of the staged copies held in the staging area.",
                value: Double(totals.stagedCopies.bytes)),
            .init(
                "ingest_quarantined", .gauge,
                help: "Files and uploads that failed upload.quarantine_after runs in a row, or can never become an "
                    + "object as configured (ingest status lists them; ingest forget releases them).",
                samples: [
                    .init(Double(totals.quarantinedFiles.count), labels: [.init("kind", "file")]),
                    .init(Double(totals.quarantinedUploads.count), labels: [.init("kind", "upload")]),
                ]),
        ]
        func timestamp(_ name: String, _ help: String, _ date: Date?) {
            guard let date else { return }
            families.append(.init(name, .gauge, help: help, value: date.timeIntervalSince1970.rounded(.down)))
        }
        timestamp(
            "ingest_last_upload_timestamp_seconds", "When the most recent object verified in the bucket (Unix time).",
            totals.lastUploadAt)
        timestamp(
            "ingest_rescan_last_success_timestamp_seconds",
            "When the last ingest rescan that finished everything pending ended (Unix time).", totals.lastRescanSuccessAt)
        timestamp(
            "ingest_rescan_last_run_timestamp_seconds", "When the last ingest rescan ended (Unix time).", totals.lastRescanAt)
        if let sweptAt = totals.lastOrphanSweepAt {
            families.append(
                .init(
                    "ingest_orphan_uploads_aborted_total", .counter,
                    help: "Multipart uploads no journal knew, older than [rescan] orphan_upload_age, aborted by ingest rescan.",
                    value: Double(totals.orphansAbortedTotal)))
            families.append(
                .init(
                    "ingest_orphan_uploads_young", .gauge,
                    help: "Multipart uploads no journal knows, younger than [rescan] orphan_upload_age, at the last sweep.",
                    value: Double(totals.lastOrphanSweep.young)))
            families.append(
                .init(
                    "ingest_orphan_sweep_failures", .gauge,
                    help: "Destinations the last orphan sweep could not sweep (the rescan's output says why).",
                    value: Double(totals.lastOrphanSweep.failures)))
            timestamp(
                "ingest_orphan_sweep_last_timestamp_seconds", "When ingest rescan last looked for orphan multipart uploads (Unix time).",
                sweptAt)
        }
        families += lastCard(totals)
        if !totals.recentCards.isEmpty {
            families.append(
                .init(
                    "ingest_card_safe_to_erase", .gauge,
                    help: "1 when every file of the card is verified in the bucket and in its ASC MHL history, nothing of it "
                        + "failed, is quarantined or was left on the card (ingest status says why not); cards seen in the "
                        + "last \(JournalTotals.recentCardDays) days.",
                    samples: totals.recentCards.map {
                        .init($0.safeToErase ? 1 : 0, labels: [.init("card", $0.volumeKey), .init("name", $0.name)])
                    }))
            families.append(
                .init(
                    "ingest_cards_safe_to_erase", .gauge,
                    help: "Cards counted by ingest_card_safe_to_erase that are safe to erase.",
                    value: Double(totals.recentCards.filter(\.safeToErase).count)))
        }
        if let status = totals.lastRescanExitStatus {
            families.append(
                .init(
                    "ingest_rescan_last_exit_status", .gauge,
                    help: "The exit status of the last ingest rescan (0: everything pending finished; see ingest(1)).",
                    value: Double(status)))
        }
        return families
    }

    /// `ingest_cards_total` and the `ingest_last_card_*` gauges, once a card was ingested.
    static func lastCard(_ totals: JournalTotals) -> [MetricFamily] {
        guard let card = totals.lastCard else { return [] }
        func gauge(_ name: String, _ help: String, _ value: Double) -> MetricFamily {
            .init("ingest_last_card_\(name)", .gauge, help: help, value: value)
        }
        return [
            .init(
                "ingest_cards_total", .counter,
                help: "Card ingests that reached their scan (ingest PATH, --device, watch, rescan), whatever their end.",
                value: Double(totals.cardsTotal)),
            gauge("timestamp_seconds", "When the last card's ingest ended (Unix time).", card.endedAt.timeIntervalSince1970.rounded(.down)),
            gauge(
                "exit_status", "The exit status of the last card's ingest (0: all of it is in the bucket; see ingest(1)).",
                Double(card.exitStatus)),
            gauge("duration_seconds", "How long the last card's ingest took, upload and verification included.", card.seconds),
            gauge("files_staged", "Files the last card's ingest copied into staging.", Double(card.staged)),
            gauge("staged_bytes", "Bytes of the files counted in ingest_last_card_files_staged.", Double(card.stagedBytes)),
            gauge("objects_uploaded", "Objects the last card's ingest uploaded and verified.", Double(card.uploaded)),
            gauge("uploaded_bytes", "Bytes of the objects counted in ingest_last_card_objects_uploaded.", Double(card.uploadedBytes)),
            gauge("files_failed", "Files the last card's ingest could not stage or upload (retried on the next run).", Double(card.failed)),
        ]
    }
}
