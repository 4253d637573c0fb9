import CCurl
import CXXHash

/// The versions of the C libraries this binary runs with, as they report themselves.
public enum LinkedLibraries {
    /// libxxhash's run-time version, e.g. "0.8.1".
    public static var xxhash: String {
        let number = XXH_versionNumber()
        return "\(number / 10000).\(number / 100 % 100).\(number % 100)"
    }

    /// libcurl's run-time version and TLS backend, e.g. "7.88.1 OpenSSL/3.0.17".
    public static var curl: String {
        guard let info = curl_version_info(ingest_curlversion_now) else { return "unknown" }
        let version = info.pointee.version.map { String(cString: $0) } ?? "unknown"
        let tls = info.pointee.ssl_version.map { String(cString: $0) }
        return [version, tls].compactMap { $0 }.joined(separator: " ")
    }

    public static var summary: String { "libxxhash \(xxhash), libcurl \(curl)" }
}
