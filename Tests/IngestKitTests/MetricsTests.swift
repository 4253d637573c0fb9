import Foundation
import Glibc
import Testing

@testable import IngestKit

/// The Prometheus text format `ingest rescan` writes for node_exporter's textfile collector.
@Suite struct MetricsTests {
    @Test func aFamilyIsWrittenAsHelpTypeAndOneLinePerSample() {
        let text = PrometheusText.render([
            .init("ingest_files_pending", .gauge, help: "Files not in the bucket yet.", samples: [
                .init(3, labels: [.init("waiting_for", "stage")]),
                .init(0, labels: [.init("waiting_for", "upload")]),
            ]),
            .init("ingest_files_uploaded_total", .counter, help: "Files uploaded.", value: 12),
        ])
        #expect(text == """
            # HELP ingest_files_pending Files not in the bucket yet.
            # TYPE ingest_files_pending gauge
            ingest_files_pending{waiting_for="stage"} 3
            ingest_files_pending{waiting_for="upload"} 0
            # HELP ingest_files_uploaded_total Files uploaded.
            # TYPE ingest_files_uploaded_total counter
            ingest_files_uploaded_total 12

            """)
    }

    @Test func labelValuesEscapeBackslashQuoteAndLineFeed() {
        let text = PrometheusText.render([
            .init("ingest_card_info", .gauge, help: "x", samples: [
                .init(1, labels: [.init("label", "A\\B \"C\"\nD é"), .init("uuid", "1b6e")]),
            ])
        ])
        #expect(text.split(separator: "\n").last == #"ingest_card_info{label="A\\B \"C\"\nD é",uuid="1b6e"} 1"#)
    }

    @Test func helpEscapesBackslashAndLineFeedButNotQuotes() {
        let text = PrometheusText.render([.init("x", .gauge, help: "a \\ b\n\"c\"", value: 1)])
        #expect(text.hasPrefix(#"# HELP x a \\ b\n"c""# + "\n"))
    }

    @Test(arguments: [
        (0.0, "0"), (42, "42"), (-7, "-7"), (1_732_000_000, "1732000000"), (2.5, "2.5"), (1e300, "1e+300"),
        (.infinity, "+Inf"), (-.infinity, "-Inf"), (.nan, "NaN"),
    ])
    func valuesAreWrittenAsTheFormatSpellsThem(value: Double, text: String) {
        #expect(PrometheusText.format(value) == text)
    }

    @Test func metricAndLabelNamesFollowTheFormatsGrammar() {
        for good in ["ingest_files_total", "a:b", "_x", "A9"] { #expect(PrometheusText.isMetricName(good), "\(good)") }
        for bad in ["", "9a", "ingest-files", "ingest files", "é"] { #expect(!PrometheusText.isMetricName(bad), "\(bad)") }
        for good in ["waiting_for", "_x", "A9"] { #expect(PrometheusText.isLabelName(good), "\(good)") }
        for bad in ["", "__name__", "a:b", "9a", "a-b"] { #expect(!PrometheusText.isLabelName(bad), "\(bad)") }
    }

    static let totals: JournalTotals = {
        var totals = JournalTotals()
        totals.files = [.pending: .init(count: 2, bytes: 20), .staged: .init(count: 3, bytes: 300), .uploaded: .init(count: 7, bytes: 7000)]
        totals.failedFiles = .init(count: 1, bytes: 10)
        totals.pendingUploads = .init(count: 3, bytes: 300)
        totals.failedUploads = .init(count: 1, bytes: 100)
        totals.stagedCopies = .init(count: 3, bytes: 300)
        totals.lastUploadAt = Date(timeIntervalSince1970: 1_800_000_000.75)
        totals.lastRescanAt = Date(timeIntervalSince1970: 1_800_000_100)
        totals.lastRescanExitStatus = 69
        totals.lastRescanSuccessAt = Date(timeIntervalSince1970: 1_799_900_000)
        var card = CardRunRecord(endedAt: Date(timeIntervalSince1970: 1_800_000_200.5), exitStatus: 1, seconds: 12.25)
        (card.staged, card.stagedBytes, card.uploaded, card.uploadedBytes, card.failed) = (4, 400, 3, 300, 1)
        totals.lastCard = card
        totals.cardsTotal = 17
        return totals
    }()

    func values(_ families: [MetricFamily]) -> [String: Double] {
        var values: [String: Double] = [:]
        for family in families {
            for sample in family.samples {
                let labels = sample.labels.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
                values[family.name + (labels.isEmpty ? "" : "{\(labels)}")] = sample.value
            }
        }
        return values
    }

    @Test func ingestsMetricsCarryTheJournalsTotals() {
        let values = values(IngestMetrics.families(Self.totals))
        #expect(values["ingest_files_staged_total"] == 10, "staged now or since uploaded")
        #expect(values["ingest_staged_bytes_total"] == 7300)
        #expect(values["ingest_files_uploaded_total"] == 7)
        #expect(values["ingest_uploaded_bytes_total"] == 7000)
        #expect(values["ingest_files_pending{waiting_for=stage}"] == 2)
        #expect(values["ingest_files_pending{waiting_for=upload}"] == 3)
        #expect(values["ingest_pending_bytes{waiting_for=upload}"] == 300)
        #expect(values["ingest_files_failed"] == 1)
        #expect(values["ingest_failed_bytes"] == 10)
        #expect(values["ingest_uploads_pending"] == 3)
        #expect(values["ingest_uploads_failed"] == 1)
        #expect(values["ingest_staging_bytes"] == 300)
        #expect(values["ingest_last_upload_timestamp_seconds"] == 1_800_000_000)
        #expect(values["ingest_rescan_last_success_timestamp_seconds"] == 1_799_900_000)
        #expect(values["ingest_rescan_last_run_timestamp_seconds"] == 1_800_000_100)
        #expect(values["ingest_rescan_last_exit_status"] == 69)
    }

    @Test func theLastCardAndTheCardsIngestedEverAreReported() {
        let values = values(IngestMetrics.families(Self.totals))
        #expect(values["ingest_cards_total"] == 17)
        #expect(values["ingest_last_card_timestamp_seconds"] == 1_800_000_200)
        #expect(values["ingest_last_card_exit_status"] == 1)
        #expect(values["ingest_last_card_duration_seconds"] == 12.25)
        #expect(values["ingest_last_card_files_staged"] == 4)
        #expect(values["ingest_last_card_staged_bytes"] == 400)
        #expect(values["ingest_last_card_objects_uploaded"] == 3)
        #expect(values["ingest_last_card_uploaded_bytes"] == 300)
        #expect(values["ingest_last_card_files_failed"] == 1)
        #expect(!IngestMetrics.families(JournalTotals()).contains { $0.name.contains("card") }, "no card yet: no zeros either")
    }

    @Test func namesFollowPrometheusConventions() {
        let families = IngestMetrics.families(Self.totals)
        #expect(Set(families.map(\.name)).count == families.count, "each family once")
        for family in families {
            #expect(family.name.hasPrefix("ingest_"), "\(family.name)")
            #expect(PrometheusText.isMetricName(family.name))
            #expect((family.kind == .counter) == family.name.hasSuffix("_total"), "counters, and only they, end in _total: \(family.name)")
            if family.name.contains("bytes") { #expect(family.name.hasSuffix("_bytes") || family.name.hasSuffix("_bytes_total")) }
            if family.name.contains("timestamp") { #expect(family.name.hasSuffix("_timestamp_seconds")) }
            #expect(!family.help.isEmpty)
            #expect(!family.samples.isEmpty)
        }
    }

    @Test func timesThatAreNotKnownYetAreLeftOutRatherThanWrittenAsZero() {
        let names = Set(IngestMetrics.families(JournalTotals()).map(\.name))
        #expect(names.contains("ingest_files_uploaded_total"))
        #expect(!names.contains { $0.contains("timestamp") || $0.contains("exit_status") })
    }

    @Test func theOrphanSweepIsReportedOnceOneHasRun() {
        var totals = Self.totals
        #expect(!IngestMetrics.families(totals).contains { $0.name.contains("orphan") }, "no sweep yet: no zeros either")
        totals.lastOrphanSweepAt = Date(timeIntervalSince1970: 1_800_000_050)
        totals.lastOrphanSweep = OrphanSweepRecord(aborted: 2, young: 1, failures: 1)
        totals.orphansAbortedTotal = 9
        let families = IngestMetrics.families(totals)
        let values = values(families)
        #expect(values["ingest_orphan_uploads_aborted_total"] == 9)
        #expect(values["ingest_orphan_uploads_young"] == 1)
        #expect(values["ingest_orphan_sweep_failures"] == 1)
        #expect(values["ingest_orphan_sweep_last_timestamp_seconds"] == 1_800_000_050)
        #expect(Set(families.map(\.name)).count == families.count, "each family once")
    }

    @Test func theFileIsReplacedWholeWithMode0644AndNoTemporaryFileLeft() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/ingest.prom"
        try "old\n".write(toFile: path, atomically: false, encoding: .utf8)
        let previous = umask(0o077)
        defer { umask(previous) }
        try PrometheusText.write("# HELP x y\n# TYPE x gauge\nx 1\n", to: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "# HELP x y\n# TYPE x gauge\nx 1\n")
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o644, "node_exporter runs as another user: \(String(st.st_mode & 0o777, radix: 8))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["ingest.prom"])
    }

    @Test func aFileThatCannotBeWrittenIsAClearErrorNamingIt() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/no-such-directory/ingest.prom"
        let error = try #require(throws: IngestError.self) { try PrometheusText.write("x 1\n", to: path) }
        #expect(error.exitStatus == .cantCreate)
        #expect(error.description.contains(path))
        #expect(error.description.contains("No such file or directory"))
        #expect(error.description.contains("metrics_file"))
    }
}
