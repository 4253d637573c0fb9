import Foundation
import IngestTestSupport
import Testing

/// A metrics file as node_exporter would read it, through prometheus-client's own parser
/// (the external oracle): every sample by name and labels (`name{k=v,…}`). Fails when a
/// family has no HELP or is neither a counter nor a gauge.
func parsePrometheus(_ path: String) throws -> [String: Double] {
    let script = """
        import json, sys
        from prometheus_client.parser import text_string_to_metric_families
        out = {}
        for family in text_string_to_metric_families(open(sys.argv[1]).read()):
            assert family.documentation, family.name + " has no HELP"
            assert family.type in ("counter", "gauge"), family.name + " is " + family.type
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[sample.name + ("{" + labels + "}" if labels else "")] = sample.value
        print(json.dumps(out))
        """
    let result = try run(try TestVenv.tool("python3"), ["-c", script, path])
    guard result.status == 0 else { throw CommandFailed(command: "prometheus_client parser", result: result) }
    let parsed = try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: NSNumber])
    return parsed.mapValues(\.doubleValue)
}
