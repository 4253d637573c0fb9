import ArgumentParser
import Foundation
import IngestKit

/// `--metrics-file`, for every command that ingests cards (run, watch, rescan): the file is
/// rewritten after each card, and by rescan at its end.
struct MetricsOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write Prometheus metrics to this file after every card (overrides [rescan] metrics_file).", valueName: "file"),
        completion: .file(extensions: ["prom"]))
    var metricsFile: String?

    func apply(to config: inout Config) {
        if let metricsFile { config.rescan.metricsFile = absolutePath(metricsFile) }
    }
}

/// A relative path from the command line is taken from the working directory: the file is
/// written when a card ends, by then perhaps elsewhere (and a configured one is absolute).
func absolutePath(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}
