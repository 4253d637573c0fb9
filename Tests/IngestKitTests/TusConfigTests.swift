import Foundation
import Testing

@testable import IngestKit

/// A configuration error's parts, after checking it is one.
private func configError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) throws -> (key: String?, problem: String, description: String) {
    let error = try #require(throws: IngestError.self, sourceLocation: sourceLocation) { try body() }
    #expect(error.exitStatus == .config, sourceLocation: sourceLocation)
    guard case let .config(_, key, problem) = error else {
        Issue.record("expected a configuration error, got another", sourceLocation: sourceLocation)
        throw error
    }
    return (key, problem, error.description)
}

/// A fake bearer token: what a headers file holds, and what no error may show.
private let fakeToken = "FAKE-TOKEN-7d1e0c-not-a-secret"

/// A headers file with `mode`, in a directory of its own.
private func headersFile(_ text: String, mode: mode_t = 0o600, in directory: TemporaryDirectory) throws -> String {
    let path = try directory.write("tus-headers", Array(text.utf8))
    #expect(chmod(path, mode) == 0)
    return path
}

/// The headers of a `[tus] headers_file`, as the uploads will read them.
private func headers(of path: String) throws -> [(name: String, value: String)] {
    var settings = TusSettings()
    settings.headersFile = path
    return try settings.headers()
}

/// Whether an error's text shows the fake token: asserted on as a flag, so that a failure
/// prints no more than "true".
private func showsToken(_ text: String) -> Bool { text.contains(fakeToken) || text.contains("FAKE-TOKEN") }

@Suite struct TusConfigTests {
    // MARK: the destination

    @Test func tusSectionGivesATusDestinationWithoutABucket() throws {
        let config = try Config.parse(
            """
            [tus]
            url = "https://uploads.example.net/files/"
            """)
        #expect(config.tus.url == "https://uploads.example.net/files/")
        #expect(config.s3.endpoint == "tus+https://uploads.example.net/files/")
        #expect(config.s3.isTus)
        let target = try config.s3.target()
        #expect(target == S3Destination(endpoint: "tus+https://uploads.example.net/files/", bucket: "", region: "", addressing: .path))
        #expect(target.isTus)
        #expect(target.tusCreationURL == "https://uploads.example.net/files/")
        #expect(target.displayName == "tus https://uploads.example.net/files/")
    }

    @Test func aTusEndpointIsKnownInAnyCaseAndAnS3OneIsNot() {
        let upper = S3Destination(endpoint: "TUS+https://h/files/", bucket: "", region: "", addressing: .path)
        #expect(upper.isTus)
        #expect(upper.tusCreationURL == "https://h/files/")
        let s3 = S3Destination(endpoint: "https://s3.example.net", bucket: "cards", region: "us-east-1", addressing: .path)
        #expect(!s3.isTus)
        #expect(s3.tusCreationURL == nil)
        #expect(s3.displayName == "s3://cards at https://s3.example.net")
        #expect(S3Destination.tusScheme == "tus+")
    }

    @Test func aTusEndpointFromTheCommandLineNeedsNoBucket() throws {
        var settings = S3Settings()
        settings.endpoint = "tus+http://127.0.0.1:1080/files/"
        let target = try settings.target(alternative: "use --no-upload to stage only")
        #expect(target.endpoint == "tus+http://127.0.0.1:1080/files/")
        #expect(target.bucket.isEmpty && target.region.isEmpty)
    }

    @Test func aBucketWithATusEndpointIsAnErrorNamingBoth() throws {
        var settings = S3Settings()
        settings.endpoint = "tus+https://uploads.example.net/files/"
        settings.bucket = "cards"
        let failure = try configError { _ = try settings.target() }
        #expect(failure.key == "s3.bucket")
        #expect(failure.problem.contains("tus+https://uploads.example.net/files/"))
        #expect(failure.problem.contains("'cards'"))

        let inFile = try configError {
            _ = try Config.parse("[s3]\nbucket = \"cards\"\n[tus]\nurl = \"https://uploads.example.net/files/\"\n")
        }
        #expect(inFile.key == "tus.url")
        #expect(inFile.problem.contains("s3.bucket"))
    }

    @Test func bothEndpointsAreAnErrorNamingBoth() throws {
        let failure = try configError {
            _ = try Config.parse(
                """
                [s3]
                endpoint = "https://s3.example.net"
                [tus]
                url = "https://uploads.example.net/files/"
                """)
        }
        #expect(failure.key == "tus.url")
        #expect(failure.problem.contains("s3.endpoint"))
    }

    @Test(arguments: ["prefix = \"cards/\"", "key_template = \"{card_id}/{path}\"", "allow_http = true",
                      "connect_timeout = \"5s\"", "stall_timeout = \"60s\""])
    func aKeySetInBothSectionsIsAnErrorNamingBoth(line: String) throws {
        let name = String(line.prefix { $0 != " " })
        let failure = try configError { _ = try Config.parse("[s3]\n\(line)\n[tus]\n\(line)\n") }
        #expect(failure.key == "tus.\(name)")
        #expect(failure.problem.contains("s3.\(name)"))
    }

    @Test func theKeysTusSharesWithS3SetTheSameFields() throws {
        let config = try Config.parse(
            """
            [tus]
            url = "http://10.0.0.5:1080/files/"
            prefix = "cards/"
            key_template = "{device}/{card_id}/{path}"
            allow_http = true
            connect_timeout = "5s"
            stall_timeout = "2m"
            """)
        #expect(config.s3.prefix == "cards/")
        #expect(config.s3.keyTemplate == "{device}/{card_id}/{path}")
        #expect(config.s3.allowHTTP)
        #expect(config.s3.connectTimeout == .seconds(5))
        #expect(config.s3.stallTimeout == .seconds(120))
        #expect(try config.s3.target().tusCreationURL == "http://10.0.0.5:1080/files/")
    }

    @Test func aBadKeyTemplateInTusIsNamedThere() throws {
        let failure = try configError { _ = try Config.parse("[tus]\nkey_template = \"{nonsense}\"\n") }
        #expect(failure.key == "tus.key_template")
    }

    @Test func anUnknownKeyInTusIsRefused() throws {
        let failure = try configError { _ = try Config.parse("[tus]\nbucket = \"cards\"\n") }
        #expect(failure.key == "tus.bucket")
        #expect(failure.problem.contains("tus.url"))
    }

    // MARK: plain http

    @Test(arguments: ["tus+http://10.0.0.5:1080/files/", "tus+http://uploads.example.net/files/", "TUS+HTTP://192.168.1.9/f/"])
    func tusOverHTTPToAnotherHostIsRefusedWithoutAllowHTTP(endpoint: String) throws {
        var settings = S3Settings()
        settings.endpoint = endpoint
        let failure = try configError { _ = try settings.target() }
        #expect(failure.key == "tus.allow_http")
        #expect(failure.problem.contains("plain http to another host"))
        #expect(failure.problem.contains("[tus] allow_http = true"))
        settings.allowHTTP = true
        #expect(try settings.target().endpoint == endpoint)
    }

    @Test(arguments: ["tus+http://127.0.0.1:1080/files/", "tus+http://127.4.5.6/files/", "tus+http://localhost:8080/files/",
                      "tus+http://[::1]:1080/files/", "tus+https://uploads.example.net/files/"])
    func tusOverLoopbackOrHTTPSNeedsNoAllowHTTP(endpoint: String) throws {
        var settings = S3Settings()
        settings.endpoint = endpoint
        #expect(try settings.target().endpoint == endpoint)
    }

    @Test(arguments: ["tus+", "tus+ftp://uploads.example.net/files/", "tus+https://user:pw@uploads.example.net/files/",
                      "tus+https:///files/", "tus+https://uploads.example.net/files/#top"])
    func aTusEndpointThatIsNoCreationURLIsRefused(endpoint: String) throws {
        var settings = S3Settings()
        settings.endpoint = endpoint
        let failure = try configError { _ = try settings.target() }
        #expect(failure.key == "s3.endpoint")
        #expect(failure.problem.contains("tus+https://HOST/PATH/"))
    }

    @Test func aTusURLIsCheckedWhenTheFileIsRead() throws {
        let notHTTP = try configError { _ = try Config.parse("[tus]\nurl = \"ftp://uploads.example.net/\"\n") }
        #expect(notHTTP.key == "tus.url")
        let prefixed = try configError { _ = try Config.parse("[tus]\nurl = \"tus+https://uploads.example.net/files/\"\n") }
        #expect(prefixed.key == "tus.url")
        #expect(prefixed.problem.contains("\"https://uploads.example.net/files/\""))
        let empty = try configError { _ = try Config.parse("[tus]\nurl = \"\"\n") }
        #expect(empty.key == "tus.url")
    }

    // MARK: chunk size

    @Test func chunkSizeDefaultsTo16MiB() throws {
        #expect(try Config.parse("[tus]\nurl = \"https://h/files/\"\n").tus.chunkSize == 16 << 20)
    }

    @Test(arguments: [("5MiB", Int64(5 << 20)), ("8MiB", 8 << 20), ("5GiB", 5 << 30)])
    func chunkSizeWithinItsBoundsIsTaken(text: String, bytes: Int64) throws {
        #expect(try Config.parse("[tus]\nchunk_size = \"\(text)\"\n").tus.chunkSize == bytes)
    }

    @Test(arguments: ["4MiB", "64KiB", "0", "6GiB", "lots"])
    func chunkSizeOutsideItsBoundsIsRefused(text: String) throws {
        let failure = try configError { _ = try Config.parse("[tus]\nchunk_size = \"\(text)\"\n") }
        #expect(failure.key == "tus.chunk_size")
    }

    @Test func theChunkSizeIsThePartSizeOfATusDestinationOnly() throws {
        var config = try Config.parse(
            """
            [tus]
            url = "https://uploads.example.net/files/"
            chunk_size = "6MiB"
            """)
        #expect(config.upload.partSize == 6 << 20)
        // Another limit set meanwhile (a flag) leaves both sizes as they were.
        config.upload.maxRate = ByteRate.parse("4MiB/s")
        #expect(config.upload.partSize == 6 << 20)
        // The command line points it at S3: S3's part size again.
        config.s3.endpoint = "https://s3.example.net"
        #expect(config.upload.partSize == PartPlan.defaultPartSize)
        #expect(config.upload.maxRate == ByteRate.parse("4MiB/s"))

        // An S3 configuration pointed at a tus server on the command line.
        var s3 = try Config.parse("[s3]\nendpoint = \"https://s3.example.net\"\n[upload]\npart_size = \"32MiB\"\n")
        #expect(s3.upload.partSize == 32 << 20)
        s3.s3.endpoint = "tus+https://uploads.example.net/files/"
        #expect(s3.upload.partSize == TusSettings.defaultChunkSize)
    }

    @Test func partSizeWithATusDestinationIsAnErrorPointingAtChunkSize() throws {
        let failure = try configError {
            _ = try Config.parse("[tus]\nurl = \"https://h/files/\"\n[upload]\npart_size = \"8MiB\"\n")
        }
        #expect(failure.key == "upload.part_size")
        #expect(failure.problem.contains("[tus] chunk_size"))
    }

    // MARK: headers file

    @Test func noHeadersFileMeansNoHeaders() throws {
        #expect(try TusSettings().headers().isEmpty)
        #expect(try headers(of: "/dev/null").isEmpty)
    }

    @Test func headersAreParsedAndCommentsSkipped() throws {
        let directory = TemporaryDirectory()
        let path = try headersFile(
            "# the portal's upload token\n\nAuthorization: Bearer \(fakeToken)\r\n  # indented comment\n"
                + "\tX-Tenant:north-dock  \n   \n",
            in: directory)
        let read = try headers(of: path)
        #expect(read.map(\.name) == ["Authorization", "X-Tenant"])
        #expect(read.map(\.value) == ["Bearer \(fakeToken)", "north-dock"])
    }

    @Test(arguments: [0o644, 0o640, 0o604, 0o440] as [mode_t])
    func aHeadersFileOthersCanReadIsRefusedWithoutShowingAValue(mode: mode_t) throws {
        let directory = TemporaryDirectory()
        let path = try headersFile("Authorization: Bearer \(fakeToken)\n", mode: mode, in: directory)
        let failure = try configError { _ = try headers(of: path) }
        #expect(failure.key == "tus.headers_file")
        #expect(failure.description.contains("chmod 600 \(path)"))
        #expect(!showsToken(failure.description))
    }

    @Test func aMissingHeadersFileIsAnError() throws {
        let directory = TemporaryDirectory()
        let failure = try configError { _ = try headers(of: directory.path + "/nowhere") }
        #expect(failure.problem.contains("no such file"))
    }

    @Test func aHeadersFileThatIsNotARegularFileIsRefused() throws {
        let directory = TemporaryDirectory()
        let failure = try configError { _ = try headers(of: directory.path) }
        #expect(failure.problem.contains("not a regular file"))
    }

    @Test func aHeadersFileOver64KiBIsRefused() throws {
        let directory = TemporaryDirectory()
        let path = try headersFile("X-Pad: " + String(repeating: "a", count: 64 << 10) + "\n", in: directory)
        let failure = try configError { _ = try headers(of: path) }
        #expect(failure.problem.contains("64 KiB"))
    }

    /// A bad line is named by its number, and by its header's name when that is a valid one;
    /// never by anything that could be a value.
    @Test(arguments: [
        ("Bearer \(fakeToken)\n", "line 3 is not a header"),
        ("Bearer \(fakeToken): x\n", "line 3: the header's name"),
        (": \(fakeToken)\n", "line 3: the header's name"),
        ("X-Token: \(fakeToken)\u{1}\n", "line 3: the value of X-Token holds a control character"),
        ("X-Token: \(fakeToken)\rInjected: yes\n", "line 3: the value of X-Token holds a control character"),
        ("X-Token:   \n", "line 3: X-Token has no value"),
        ("Upload-Offset: 0\n", "line 3: Upload-Offset is set by ingest itself"),
        ("authorization: Bearer \(fakeToken)-2\n", "line 3: authorization is given twice (line 2 too)"),
    ])
    func aBadLineIsNamedByNumberWithoutItsValue(line: String, expected: String) throws {
        let directory = TemporaryDirectory()
        let path = try headersFile("# token\nAuthorization: Bearer \(fakeToken)\n" + line, in: directory)
        let failure = try configError { _ = try headers(of: path) }
        #expect(failure.key == "tus.headers_file")
        #expect(failure.problem.hasPrefix(expected))
        #expect(!showsToken(failure.description))
    }

    @Test func aValueThatIsNotUTF8IsRefused() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("tus-headers", Array("X-Token: ab".utf8) + [0xFF, 0x0A])
        #expect(chmod(path, 0o600) == 0)
        let failure = try configError { _ = try headers(of: path) }
        #expect(failure.problem.hasPrefix("line 1: the value of X-Token is not UTF-8"))
    }

    @Test func headersFileMustBeAnAbsolutePath() throws {
        let failure = try configError { _ = try Config.parse("[tus]\nheaders_file = \"tus-headers\"\n") }
        #expect(failure.key == "tus.headers_file")
        #expect(failure.problem.contains("absolute path"))
        #expect(try Config.parse("[tus]\nheaders_file = \"/etc/ingest/tus-headers\"\n").tus.headersFile == "/etc/ingest/tus-headers")
    }

    // MARK: environment

    @Test func theEnvironmentSetsTheHeadersFile() throws {
        var config = try Config.parse("[tus]\nheaders_file = \"/etc/ingest/tus-headers\"\n")
        try config.applyEnvironment(["INGEST_TUS_HEADERS_FILE": "/run/secrets/tus-headers"])
        #expect(config.tus.headersFile == "/run/secrets/tus-headers")
        #expect(Config.environmentOverrides.contains { $0.variable == "INGEST_TUS_HEADERS_FILE" && $0.key == "tus.headers_file" })

        let failure = try configError { try config.applyEnvironment(["INGEST_TUS_HEADERS_FILE": "secrets/tus"]) }
        #expect(failure.key == "INGEST_TUS_HEADERS_FILE")
    }

    @Test func theEnvironmentsEndpointCanBeATusOne() throws {
        var config = Config()
        try config.applyEnvironment(["INGEST_ENDPOINT": "tus+https://uploads.example.net/files/"])
        #expect(try config.s3.target().isTus)
        #expect(config.upload.partSize == TusSettings.defaultChunkSize)
    }
}
