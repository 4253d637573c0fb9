import Testing

@testable import IngestKit

/// `[s3] endpoint` as one gateway or a list of them, and `INGEST_ENDPOINT` with several.
@Suite struct GatewayConfigTests {
    func target(_ toml: String) throws -> S3Destination {
        try Config.parse(toml, file: "/etc/ingest/ingest.toml").s3.target()
    }

    func problem(_ toml: String) -> String {
        do {
            _ = try target(toml)
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func aListOfEndpointsIsTheGatewaysInOrderAndTheFirstNamesTheDestination() throws {
        let target = try target("""
            [s3]
            endpoint = ["http://127.0.0.1:8333", "http://127.0.0.1:8334"]
            bucket = "cards"
            """)
        #expect(target.endpoint == "http://127.0.0.1:8333")
        #expect(target.gateways == ["http://127.0.0.1:8333", "http://127.0.0.1:8334"])
        #expect(target == S3Destination(endpoint: "http://127.0.0.1:8333", bucket: "cards", region: "us-east-1", addressing: .path))
    }

    @Test func oneEndpointAsAStringIsOneGateway() throws {
        let target = try target("[s3]\nendpoint = \"http://127.0.0.1:8333\"\nbucket = \"cards\"\n")
        #expect(target.gatewayURLs == ["http://127.0.0.1:8333"])
    }

    @Test func aGatewayListedTwiceIsRefused() {
        let problem = problem("[s3]\nendpoint = [\"http://127.0.0.1:8333\", \"http://127.0.0.1:8333/\"]\nbucket = \"cards\"\n")
        #expect(problem.contains("listed twice"), "\(problem)")
    }

    @Test func aTusEndpointAmongSeveralIsRefused() {
        let problem = problem("[s3]\nendpoint = [\"http://127.0.0.1:8333\", \"tus+http://127.0.0.1:1080/files/\"]\n")
        #expect(problem.contains("stands alone"), "\(problem)")
    }

    @Test func aGatewayThatIsNoURLIsRefusedByName() {
        let problem = problem("[s3]\nendpoint = [\"http://127.0.0.1:8333\", \"gw2:8333\"]\nbucket = \"cards\"\n")
        #expect(problem.contains("gw2:8333"), "\(problem)")
        #expect(problem.contains("s3.endpoint"), "\(problem)")
    }

    @Test func anEmptyListOrANumberIsRefused() {
        #expect(problem("[s3]\nendpoint = []\nbucket = \"cards\"\n").contains("empty list"))
        #expect(problem("[s3]\nendpoint = 8333\nbucket = \"cards\"\n").contains("list of URLs"))
    }

    @Test func theEnvironmentSeparatesGatewaysWithCommas() throws {
        var config = Config()
        try config.applyEnvironment([
            "INGEST_ENDPOINT": "http://127.0.0.1:8333, http://127.0.0.1:8334,", "INGEST_BUCKET": "cards",
        ])
        #expect(config.s3.endpoints == ["http://127.0.0.1:8333", "http://127.0.0.1:8334"])
        #expect(try config.s3.target().gateways == config.s3.endpoints)
    }
}
