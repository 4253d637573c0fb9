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

    @Test(arguments: [
        ("xn--cards", "begins with 'xn--'"), ("sthree-cards", "begins with 'sthree-'"),
        ("sthree-configurator-x", "begins with 'sthree-'"), ("amzn-s3-demo-bucket", "begins with 'amzn-s3-demo-'"),
        ("cards-s3alias", "ends with '-s3alias'"), ("cards--ol-s3", "ends with '--ol-s3'"),
        ("cards.mrap", "ends with '.mrap'"), ("cards--usw2-az1--x-s3", "ends with '--x-s3'"),
        ("cards--table-s3", "ends with '--table-s3'"),
    ])
    func namesS3ReservesAreRefusedAsReserved(name: String, affix: String) throws {
        let problem = try #require(BucketName.problem(name))
        #expect(problem.contains(affix), "\(problem)")
        #expect(problem.contains("S3 reserves"), "\(problem)")
        let fixed = BucketName.fix(name, problem: problem, origin: "--bucket")
        #expect(fixed.contains("'\(name)' is not a valid S3 bucket name"))
        #expect(fixed.contains("--bucket") && fixed.contains("xn--") && fixed.contains("--table-s3"), "\(fixed)")
        #expect(!fixed.contains("3 to 63 lowercase letters"), "the name's characters are fine: \(fixed)")
    }

    @Test(arguments: ["xn-cards", "cards-xn--a", "s3alias-cards", "cards-s3alia", "sthree", "cards-x-s3", "mrap.cards"])
    func namesThatOnlyResembleAReservedOneAreAccepted(name: String) {
        #expect(BucketName.problem(name) == nil)
    }

    @Test func aReservedBucketFromTheFileTheEnvironmentOrTheFlagsIsAConfigurationError() throws {
        let fromFile = try #require(throws: IngestError.self) {
            try Config.parse("[s3]\nbucket = \"cards-s3alias\"\n", file: "/etc/x.toml")
        }
        #expect(fromFile.exitStatus == .config)
        #expect(fromFile.description.contains("key 's3.bucket'") && fromFile.description.contains("S3 reserves"))
        let fromEnvironment = try #require(throws: IngestError.self) {
            var config = Config()
            try config.applyEnvironment(["INGEST_BUCKET": "xn--cards"])
        }
        #expect(fromEnvironment.exitStatus == .config)
        var settings = S3Settings()
        settings.endpoint = "http://127.0.0.1:8333"
        settings.bucket = "amzn-s3-demo-bucket"
        let fromFlags = try #require(throws: IngestError.self) { try settings.target() }
        #expect(fromFlags.exitStatus == .config)
        #expect(fromFlags.description.contains("S3 reserves"))
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
