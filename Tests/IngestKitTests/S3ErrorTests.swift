import Foundation
import Testing

@testable import IngestKit

@Suite struct S3ErrorTests {
    private func data(_ text: String) -> Data { Data(text.utf8) }

    // MARK: parsing error documents

    /// The example of S3's "Error responses" documentation, verbatim.
    @Test func readsEveryFieldOfTheDocumentedErrorExample() throws {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error>
              <Code>NoSuchKey</Code>
              <Message>The resource you requested does not exist</Message>
              <Resource>/mybucket/myfoto.jpg</Resource> 
              <RequestId>4442587FB7D0A2F9</RequestId>
            </Error>
            """
        let error = try #require(S3Error.parse(status: 404, body: data(body)))
        #expect(error.status == 404)
        #expect(error.code == .noSuchKey)
        #expect(error.message == "The resource you requested does not exist")
        #expect(error.resource == "/mybucket/myfoto.jpg")
        #expect(error.requestID == "4442587FB7D0A2F9")
        #expect(error.serverTime == nil)
    }

    /// CompleteMultipartUpload answers 200 at once, sends spaces while it works, and can
    /// then send an `<Error>`: S3's documented example, after the keep-alive whitespace.
    /// Ceph RGW 16 refuses a second `If-None-Match: *` write with 412 and an empty
    /// `<Message>` (which trips aws-cli): judged by its status and code, told without an
    /// empty message.
    @Test func anErrorWithAnEmptyMessageIsReadByItsStatusAndCode() throws {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>PreconditionFailed</Code><Message></Message>"
            + "<BucketName>cards</BucketName><RequestId>tx0000</RequestId><HostId>1-a-b</HostId></Error>"
        let error = try #require(S3Error.parse(status: 412, body: data(body)))
        #expect(error.code == .preconditionFailed)
        #expect(error.message == nil)
        #expect(error.statement == "S3 error PreconditionFailed (HTTP 412) [request ID tx0000]")
        #expect(S3ClientError.server(error, attempts: 1).isPreconditionFailed)
        let bare = try #require(S3Error.parse(status: 412, body: data("<Error><Code></Code><Message/></Error>")))
        #expect(S3ClientError.server(bare, attempts: 1).isPreconditionFailed, "the status alone says it")
    }

    @Test func findsAnErrorInsideA200Response() throws {
        let body = "   \n  \n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\n<Code>InternalError</Code>\n"
            + "<Message>We encountered an internal error. Please try again.</Message>\n"
            + "<RequestId>656c76696e6727732072657175657374</RequestId>\n"
            + "<HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId>\n</Error>"
        let error = try #require(S3Error.parse(status: 200, body: data(body)))
        #expect(error.status == 200)
        #expect(error.code == .internalError)
        #expect(error.requestID == "656c76696e6727732072657175657374")
        #expect(error.hostID == "Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==")
        #expect(error.description.contains("HTTP 200 with an error body"))
    }

    @Test func aSuccessfulCompletionIsNotAnError() {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
              <Location>https://example-bucket.s3.amazonaws.com/Example-Object</Location>
              <Bucket>example-bucket</Bucket><Key>Example-Object</Key>
              <ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag>
            </CompleteMultipartUploadResult>
            """
        #expect(S3Error.parse(status: 200, body: data(body)) == nil)
    }

    @Test(arguments: [200, 204, 206])
    func aSuccessWithAnEmptyOrBlankBodyIsNotAnError(status: Int) {
        #expect(S3Error.parse(status: status, body: Data()) == nil)
        #expect(S3Error.parse(status: status, body: data("  \r\n")) == nil)
    }

    @Test func aSuccessWhoseBodyIsNotXMLIsNotAnError() {
        #expect(S3Error.parse(status: 200, body: data("not xml at all <<<")) == nil)
        #expect(S3Error.parse(status: 200, body: Data([0xFF, 0xFE, 0x00, 0x3C]))  == nil)
    }

    @Test func aNamespacedOrPrefixedErrorRootIsRecognised() throws {
        let plain = "<Error xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Code>SlowDown</Code></Error>"
        #expect(try #require(S3Error.parse(status: 503, body: data(plain))).code == .slowDown)
        let prefixed = "<s3:Error xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + "<s3:Code>SlowDown</s3:Code></s3:Error>"
        #expect(try #require(S3Error.parse(status: 503, body: data(prefixed))).code == .slowDown)
    }

    @Test func entitiesAndCDATAInTextAreDecoded() throws {
        let body = "<Error><Code>AccessDenied</Code><Message>a &amp; b &lt;c&gt; <![CDATA[<d>]]></Message></Error>"
        #expect(try #require(S3Error.parse(status: 403, body: data(body))).message == "a & b <c> <d>")
    }

    @Test func fieldsOfNestedElementsAreNotTakenForTheErrorsOwn() throws {
        let body = "<Error><Code>InvalidPart</Code><Detail><Code>Other</Code><Message>inner</Message></Detail>"
            + "<Message>outer</Message></Error>"
        let error = try #require(S3Error.parse(status: 400, body: data(body)))
        #expect(error.code == .invalidPart)
        #expect(error.message == "outer")
    }

    @Test func theServerTimeOfAClockSkewErrorIsRead() throws {
        let body = """
            <Error><Code>RequestTimeTooSkewed</Code>
            <Message>The difference between the request time and the current time is too large.</Message>
            <RequestTime>20160526T234455Z</RequestTime><ServerTime>2016-05-26T23:50:55Z</ServerTime>
            <MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>
            """
        let error = try #require(S3Error.parse(status: 403, body: data(body)))
        #expect(error.code == .requestTimeTooSkewed)
        // `date -u -d 2016-05-26T23:50:55Z +%s`
        #expect(error.serverTime == Date(timeIntervalSince1970: 1_464_306_655))
    }

    // MARK: responses that are not S3 error documents

    /// A HEAD request's 404 has no body at all.
    @Test func anErrorStatusWithoutABodyIsAnErrorWithoutACode() throws {
        let error = try #require(S3Error.parse(status: 404, body: Data()))
        #expect(error.status == 404)
        #expect(error.code == nil)
        #expect(error.message == nil)
        #expect(error.description.contains("HTTP 404"))
    }

    @Test func aProxysHTMLPageKeepsItsStatusAndTheStartOfItsText() throws {
        let body = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\n<center><h1>502 Bad Gateway</h1>"
            + "</center>\n<hr><center>nginx</center>\n</body>\n</html>\n"
        let error = try #require(S3Error.parse(status: 502, body: data(body)))
        #expect(error.status == 502)
        #expect(error.code == nil)
        let message = try #require(error.message)
        #expect(message.contains("502 Bad Gateway"))
        #expect(!message.contains("\n") && !message.contains("\r"))
    }

    @Test func theKeptTextOfALongBodyIsShortened() throws {
        let body = String(repeating: "x", count: 10_000)
        let message = try #require(S3Error.parse(status: 500, body: data(body))?.message)
        #expect(message.count == S3Error.snippetLength + 1)
        #expect(message.hasSuffix("…"))
    }

    /// Truncated, unbalanced, binary, undeclared entities: each returns an error with the
    /// status and never traps.
    @Test(arguments: [
        "<Error><Code>SlowDown</Co",
        "<Error><Code>SlowDown</Code>",
        "<Error><Code>Slow<Down</Code></Error>",
        "<Error><Code>&undefined;</Code></Error>",
        "<Error></Wrong>",
        "<?xml version=\"1.0\"?>",
        "<",
        "]]>",
        "<Error><Code>\u{0}</Code></Error>",
    ])
    func malformedXMLGivesAnErrorWithTheStatus(body: String) {
        let error = S3Error.parse(status: 503, body: data(body))
        #expect(error?.status == 503)
    }

    @Test func binaryGarbageGivesAnErrorWithTheStatus() {
        var generator = BackoffTestGenerator(state: 99)
        for length in [1, 2, 17, 1_000] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(S3Error.parse(status: 500, body: Data(bytes))?.status == 500)
            _ = S3Error.parse(status: 200, body: Data([0x3C] + bytes))  // must not trap
        }
    }

    /// A truncated `<Error>` after a 200 is still an error: the completion did not report success.
    @Test func aTruncatedErrorAfterA200IsStillAnError() throws {
        let error = try #require(S3Error.parse(status: 200, body: data("   <Error><Code>InternalError</Code><Mess")))
        #expect(error.status == 200)
        #expect(error.code == .internalError)
    }

    /// A server's body must not make us read local files (XML external entities).
    @Test func externalEntitiesAreNotResolved() throws {
        let directory = TemporaryDirectory()
        let secret = "local-secret-\(UInt64.random(in: 0...UInt64.max))"
        let path = try directory.write("secret.txt", Array(secret.utf8))
        let body = "<?xml version=\"1.0\"?><!DOCTYPE Error [<!ENTITY leak SYSTEM \"file://\(path)\">]>"
            + "<Error><Code>AccessDenied</Code><Message>before &leak; after</Message></Error>"
        let error = try #require(S3Error.parse(status: 403, body: data(body)))
        #expect(error.code == .accessDenied)  // the document was read, only the entity was not
        #expect(error.message?.hasPrefix("before") == true)
        #expect(!error.description.contains(secret))
    }

    /// "Billion laughs": nested entities that would expand to gigabytes are refused.
    @Test func anEntityExpansionBombIsRefused() {
        let a = String(repeating: "a", count: 10)
        var entities = "<!ENTITY e0 \"\(a)\">"
        for level in 1...9 {
            entities += "<!ENTITY e\(level) \"" + String(repeating: "&e\(level - 1);", count: 10) + "\">"
        }
        let body = "<?xml version=\"1.0\"?><!DOCTYPE Error [\(entities)]><Error><Code>SlowDown</Code>"
            + "<Message>&e9;</Message></Error>"
        let error = S3Error.parse(status: 503, body: data(body))
        #expect(error?.status == 503)
        #expect((error?.message?.count ?? 0) < 1_000_000)
    }

    // MARK: codes

    /// The codes as S3's error-code list spells them.
    @Test(arguments: [
        "NoSuchUpload", "NoSuchBucket", "NoSuchKey", "AccessDenied", "InvalidAccessKeyId",
        "SignatureDoesNotMatch", "ExpiredToken", "RequestTimeTooSkewed", "SlowDown", "RequestTimeout",
        "InternalError", "ServiceUnavailable", "InvalidPart", "InvalidPartOrder", "EntityTooSmall",
        "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "Throttling", "ThrottlingException",
        "RequestThrottled", "AuthorizationHeaderMalformed", "PermanentRedirect", "EntityTooLarge",
        "InvalidBucketName", "InvalidRequest", "InvalidArgument", "NotImplemented",
    ])
    func everyNamedCodeIsRecognisedAndKeepsItsSpelling(raw: String) {
        let code = S3ErrorCode(rawValue: raw)
        if case .unknown = code { Issue.record("\(raw) is not named") }
        #expect(code.rawValue == raw)
    }

    @Test func anUnknownCodeIsKeptVerbatim() throws {
        let error = try #require(S3Error.parse(status: 400, body: data("<Error><Code>BrandNewCode</Code></Error>")))
        #expect(error.code == .unknown("BrandNewCode"))
        #expect(error.code?.rawValue == "BrandNewCode")
        #expect(error.description.contains("BrandNewCode"))
    }

    @Test func codesAreCaseSensitiveAsS3SendsThem() {
        #expect(S3ErrorCode(rawValue: "nosuchupload") == .unknown("nosuchupload"))
        #expect(S3ErrorCode(rawValue: "nosuchupload") != .noSuchUpload)
    }

    @Test func codesWithTheSameSpellingAreEqualHoweverBuilt() {
        #expect(S3ErrorCode.unknown("NoSuchUpload") == .noSuchUpload)
        #expect(Set([S3ErrorCode.unknown("SlowDown"), .slowDown]).count == 1)
    }

    @Test(arguments: [
        ("SlowDown", true), ("Throttling", true), ("ThrottlingException", true), ("RequestThrottled", true),
        ("TooManyRequestsException", true), ("RequestLimitExceeded", true), ("BandwidthLimitExceeded", true),
        ("InternalError", false), ("RequestTimeout", false), ("AccessDenied", false), ("Whatever", false),
    ])
    func throttlingCodesAreKnownAsSuch(raw: String, throttling: Bool) {
        #expect(S3ErrorCode(rawValue: raw).isThrottling == throttling)
    }

    // MARK: descriptions

    /// Each description names the code, the status and what to do.
    @Test(arguments: [
        ("InvalidAccessKeyId", 403, "AWS_ACCESS_KEY_ID"),
        ("SignatureDoesNotMatch", 403, "secret"),
        ("NoSuchBucket", 404, "--bucket"),
        ("RequestTimeTooSkewed", 403, "corrected automatically"),
        ("ExpiredToken", 400, "refreshed"),
        ("NoSuchUpload", 404, "starts again"),
        ("SlowDown", 503, "slow down"),
        ("AccessDenied", 403, "permission"),
        ("BadDigest", 400, "read again from disk"),
        ("InvalidPart", 400, "report"),
    ])
    func descriptionsNameTheCodeTheStatusAndTheRemedy(raw: String, status: Int, remedy: String) throws {
        let body = "<Error><Code>\(raw)</Code><Message>m</Message><RequestId>R1</RequestId></Error>"
        let text = try #require(S3Error.parse(status: status, body: data(body))).description
        #expect(text.contains(raw))
        #expect(text.contains("HTTP \(status)"))
        #expect(text.contains(remedy))
        #expect(text.contains("R1"))
    }

    // MARK: the server's clock

    /// RFC 9110's example date and its Unix time.
    @Test func readsAnHTTPDateHeader() {
        // Unix times from `date -u -d … +%s`.
        let expected: [(String, TimeInterval)] = [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
            ("Tue, 29 Feb 2000 12:00:00 GMT", 951_825_600),
            ("Tue, 31 Dec 2024 23:59:59 GMT", 1_735_689_599),
            ("Mon, 01 Mar 2100 00:00:00 GMT", 4_107_542_400),
        ]
        for (text, seconds) in expected {
            #expect(ServerClock.parseHTTPDate(text) == Date(timeIntervalSince1970: seconds), "\(text)")
        }
    }

    @Test(arguments: [
        "", "GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
        "Thu, 29 Feb 2001 00:00:00 GMT", "Mon, 29 Feb 2100 00:00:00 GMT", "Thu, 31 Apr 2025 00:00:00 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT extra",
    ])
    func rejectsTextThatIsNotAnRFC1123Date(text: String) {
        #expect(ServerClock.parseHTTPDate(text) == nil)
    }

    @Test func readsISO8601ServerTimesWithOrWithoutFractions() {
        #expect(ServerClock.parseISO8601("2016-05-26T23:50:55Z") == Date(timeIntervalSince1970: 1_464_306_655))
        #expect(
            ServerClock.parseISO8601("2016-05-26T23:50:55.250Z") == Date(timeIntervalSince1970: 1_464_306_655.25))
        #expect(ServerClock.parseISO8601("2016-05-26T23:50:55") == nil)
        #expect(ServerClock.parseISO8601("2016-05-26 23:50:55Z") == nil)
        #expect(ServerClock.parseISO8601("2016-13-26T23:50:55Z") == nil)
        #expect(ServerClock.parseISO8601("2016-05-26T23:50:55.Z") == nil)
    }

    @Test func theOffsetIsHowFarTheServerIsAheadOfUs() throws {
        let server = "Sun, 06 Nov 1994 08:49:37 GMT"
        let behind = Date(timeIntervalSince1970: 784_111_777 - 1_200)  // our clock 20 minutes slow
        #expect(ServerClock.offset(dateHeader: server, local: behind) == .seconds(1_200))
        let ahead = Date(timeIntervalSince1970: 784_111_777 + 3_600.5)
        #expect(ServerClock.offset(dateHeader: server, local: ahead) == .seconds(-3_600.5))
        #expect(ServerClock.offset(dateHeader: "yesterday", local: ahead) == nil)
    }
}

/// What the server said and what to do about it, apart: a message that gives its own advice
/// (a missing bucket's, with the options that set it) does not give the server's twice.
@Suite struct S3ErrorAdviceTests {
    @Test func theStatementIsTheDescriptionWithoutTheRemedy() throws {
        let error = try #require(S3Error.parse(
            status: 404, body: Data("<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>".utf8)))
        #expect(error.statement == "S3 error NoSuchBucket (HTTP 404): The specified bucket does not exist")
        #expect(error.description == error.statement + ". " + error.remedy)
    }

    @Test func aMissingBucketIsAdvisedOnce() throws {
        let error = try #require(S3Error.parse(
            status: 404, body: Data("<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>".utf8)))
        let target = S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "nosuchbucket", region: "us-east-1", addressing: .path)
        let upload = UploadError(.server(error, attempts: 1), what: "listing s3://nosuchbucket", target: target)
        #expect(upload.exitStatus == .config)
        #expect(upload.message.components(separatedBy: "reate the bucket").count == 2, "\(upload.message)")
        #expect(upload.message.hasSuffix(
            "Create the bucket, or correct --bucket (INGEST_BUCKET, [s3] bucket) and check that the endpoint URL is the "
                + "right server; nothing was uploaded there."))
    }

    /// An https:// endpoint whose server speaks plain http is the configuration's fault (78),
    /// said with the URL to use.
    @Test func httpsToAPlainHTTPServerIsAConfigurationError() {
        let target = S3Destination(endpoint: "https://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path)
        let problem = TransportError(
            kind: .plainHTTP(server: "127.0.0.1:8333"), code: 35,
            message: "OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number")
        let upload = UploadError(.transport(problem, attempts: 1), what: "HeadBucket", target: target)
        #expect(upload.exitStatus == .config && upload.scope == .destination)
        #expect(upload.message.hasPrefix(
            "HeadBucket: the server at https://127.0.0.1:8333 speaks plain http, not https: use http://127.0.0.1:8333 "
                + "in the endpoint (curl error 35: OpenSSL/3.0.19"), "\(upload.message)")
        #expect(upload.message.contains("Set it with --endpoint, INGEST_ENDPOINT or [s3] endpoint"))
    }
}
