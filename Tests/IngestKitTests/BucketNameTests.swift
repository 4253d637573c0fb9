import Testing

@testable import IngestKit

@Suite struct BucketNameTests {
    @Test(arguments: ["cards", "abc", "field-cards", "station.7.cards", "0cards9", String(repeating: "a", count: 63), "192.168.5"])
    func namesWithinS3sRulesAreAccepted(name: String) {
        #expect(BucketName.problem(name) == nil)
    }

    @Test(arguments: [
        ("ab", "3 to 63"), (String(repeating: "a", count: 64), "3 to 63"), ("Cards", "uppercase"),
        ("field_cards", "'_'"), ("cards!", "'!'"), ("cärds", "'ä'"), ("-cards", "begins or ends"),
        ("cards.", "begins or ends"), ("field..cards", "'..'"), ("192.168.5.4", "IP address"),
    ])
    func namesOutsideS3sRulesNameTheRuleTheyBreak(name: String, rule: String) throws {
        let problem = try #require(BucketName.problem(name))
        #expect(problem.contains(rule), "\(problem)")
    }

    @Test func theFixNamesWhereToChangeItAndSuggestsAValidName() {
        let fixed = BucketName.fix("Field_Cards", problem: BucketName.problem("Field_Cards")!, origin: "--bucket")
        #expect(fixed.contains("'Field_Cards' is not a valid S3 bucket name"))
        #expect(fixed.contains("--bucket"))
        #expect(fixed.contains("'field-cards'"))
        let noSuggestion = BucketName.fix("ab", problem: BucketName.problem("ab")!, origin: "[s3] bucket")
        #expect(noSuggestion.contains("3 to 63 lowercase letters"))
    }

    @Test func aBadBucketInTheFileTheEnvironmentOrTheTargetIsAConfigurationError() throws {
        let fromFile = try #require(throws: IngestError.self) { try Config.parse("[s3]\nbucket = \"Cards\"\n", file: "/etc/x.toml") }
        #expect(fromFile.exitStatus == .config)
        #expect(fromFile.description.contains("key 's3.bucket'"))
        #expect(fromFile.description.contains("'cards'"))

        let fromEnvironment = try #require(throws: IngestError.self) {
            var config = Config()
            try config.applyEnvironment(["INGEST_BUCKET": "my_cards"])
        }
        #expect(fromEnvironment.exitStatus == .config)
        #expect(fromEnvironment.description.contains("INGEST_BUCKET"))

        var settings = S3Settings()
        settings.endpoint = "http://127.0.0.1:8333"
        settings.bucket = "10.0.0.1"
        let fromFlags = try #require(throws: IngestError.self) { try settings.target() }
        #expect(fromFlags.exitStatus == .config)
        #expect(fromFlags.description.contains("IP address"))
        settings.bucket = "cards"
        #expect(try settings.target().bucket == "cards")
    }
}
