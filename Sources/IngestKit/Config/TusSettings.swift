// `[tus]`: a tus server as the destination, and the headers file that holds its secrets.

/// A tus server as the destination, from `[tus]` and `INGEST_TUS_HEADERS_FILE`.
///
/// The destination itself travels as ``S3Settings/endpoint`` (`tus+` and ``url``: see
/// ``S3Destination/tusScheme``), so that `--endpoint` and the journal work as for S3;
/// `[tus]`'s `prefix`, `key_template`, `allow_http`, `connect_timeout` and `stall_timeout`
/// set ``S3Settings``'s fields too. What is tus's own is here.
///
/// No value of a header ever reaches this type's description, an error or a log: only the
/// headers file's path is held, and ``headers()`` reads it when asked.
public struct TusSettings: Sendable, Equatable {
    /// The creation URL (`https://HOST/PATH/`) as `[tus] url` gave it; nil when the file
    /// names none (the endpoint may still be a tus one, from `--endpoint tus+https://…`).
    public var url: String?
    /// A file of `Name: value` lines sent with every tus request (`Authorization: Bearer …`),
    /// absolute; nil: none.
    public var headersFile: String?
    /// The size of each `PATCH`: for a tus destination, the upload's part size
    /// (``Config/upload``).
    public var chunkSize: Int64 = TusSettings.defaultChunkSize

    public static let defaultChunkSize: Int64 = 16 << 20
    /// A chunk is a part of the upload (``PartPlan``), so it has a part's bounds: 5 MiB
    /// (smaller chunks spend more in requests and journal writes than in bytes) to 5 GiB (far
    /// more than a resume should ever send twice).
    public static let chunkSizeRange: ClosedRange<Int64> = S3UploadLimits.minPartSize...S3UploadLimits.maxPartSize
    /// The most of a headers file read: a few headers take a few hundred bytes.
    public static let headersFileLimit = 64 << 10

    public init() {}

    /// The headers of ``headersFile``, in the file's order; empty when there is none.
    ///
    /// The file holds secrets and is read as AWS's credentials file is: a regular file (a
    /// link is followed; `/dev/null` reads as empty) of at most 64 KiB, owned by root or the
    /// user running ingest, that neither group nor others may read or write (`chmod 600`).
    /// Each line is `Name: value`; blank lines and lines starting with `#` are skipped. A name
    /// must be an HTTP token and not one ingest sets itself (`Upload-Offset`, `Content-Type`…),
    /// given once; a value one line of text without control characters, not empty.
    ///
    /// Errors name the file, the line and, when it is a valid one, the header's name: never
    /// a value, nor the text of a line that could be one.
    ///
    /// This blocks on the file's disk: call it from a thread that may block.
    public func headers() throws(IngestError) -> [(name: String, value: String)] {
        guard let path = headersFile else { return [] }
        func fail(_ problem: String) -> IngestError { .config(file: path, key: "tus.headers_file", problem: problem) }
        let read: BoundedFile?
        do { read = try BoundedFile.read(path, links: .follow, limit: Self.headersFileLimit) } catch {
            throw fail("\(error); it must be a regular file of at most 64 KiB (check [tus] headers_file or INGEST_TUS_HEADERS_FILE)")
        }
        guard let read else {
            throw fail("no such file (check [tus] headers_file or INGEST_TUS_HEADERS_FILE)")
        }
        guard let info = read.status else { return [] }  // /dev/null: no headers
        if let reason = untrustedReason(info) {
            throw fail("is not trusted: \(reason.replacingOccurrences(of: "FILE", with: path))")
        }
        let mode = UInt32(info.st_mode) & 0o777
        if mode & 0o077 != 0 {
            throw fail(
                "holds secrets but its mode \(String(mode, radix: 8)) lets group or others read it; refusing to use it. "
                    + "Run `chmod 600 \(path)`, and replace the secrets if others may have read them")
        }
        return try Self.parseHeaders(read.bytes, fail: fail)
    }

    /// Headers ingest's tus client sets on its requests itself (or libcurl does), lowercased:
    /// one from the file would clash with them.
    static let reservedHeaders: Set<String> = [
        "tus-resumable", "upload-offset", "upload-length", "upload-metadata", "upload-checksum", "upload-concat",
        "upload-defer-length", "x-http-method-override", "content-type", "content-length", "transfer-encoding",
        "host", "connection", "expect",
    ]

    /// The headers of a file's bytes; `fail` makes the error of a problem.
    static func parseHeaders(
        _ bytes: [UInt8], fail: (String) -> IngestError
    ) throws(IngestError) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        var seen: [String: Int] = [:]
        for (index, rawLine) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            var line = rawLine[...]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            let trimmed = trim(line)
            if trimmed.isEmpty || trimmed.first == UInt8(ascii: "#") { continue }
            guard let colon = trimmed.firstIndex(of: UInt8(ascii: ":")) else {
                throw fail("line \(number) is not a header: write each one as Name: value")
            }
            let name = trimmed[..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else {
                throw fail(
                    "line \(number): the header's name (before the colon) must be an HTTP token: letters, digits, "
                        + "and !#$%&'*+-.^_`|~")
            }
            let nameText = String(decoding: name, as: UTF8.self)
            let value = trim(trimmed[(colon + 1)...])
            guard !reservedHeaders.contains(nameText.lowercased()) else {
                throw fail("line \(number): \(nameText) is set by ingest itself on each tus request; remove that line")
            }
            if let first = seen[nameText.lowercased()] {
                throw fail("line \(number): \(nameText) is given twice (line \(first) too); keep one")
            }
            guard !value.isEmpty else { throw fail("line \(number): \(nameText) has no value") }
            guard !value.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else {
                throw fail(
                    "line \(number): the value of \(nameText) holds a control character (a line break, NUL…), "
                        + "which a header cannot carry; write it on one line")
            }
            guard let valueText = String(validating: value, as: UTF8.self) else {
                throw fail("line \(number): the value of \(nameText) is not UTF-8 text")
            }
            seen[nameText.lowercased()] = number
            headers.append((name: nameText, value: valueText))
        }
        return headers
    }

    /// `bytes` without the spaces and tabs around them.
    private static func trim(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return [] }
        return bytes[first...last]
    }

    /// An HTTP token's bytes (RFC 9110 §5.6.2): letters, digits and ``!#$%&'*+-.^_`|~``.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
