import Foundation
import IngestKit
import IngestTestSupport
import Logging
import Testing

/// Several gateways of one bucket: a SeaweedFS S3 gateway, and in front of it a loopback
/// proxy (another gateway of the same bucket) that resets every connection, or a port
/// nothing listens on.
@Suite(.serialized)
struct GatewayFailoverTests {
    static func client(_ server: SeaweedFS, gateways: [String], expecting bucketID: String? = nil) throws -> S3Client {
        let credentials = CredentialsProvider(environment: [
            "AWS_ACCESS_KEY_ID": server.accessKey, "AWS_SECRET_ACCESS_KEY": server.secretKey,
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        ])
        var settings = TransportSettings()
        settings.connectTimeout = .seconds(2)
        let destination = S3Destination(
            endpoint: gateways[0], bucket: server.bucket, region: "us-east-1", addressing: .path, gateways: gateways)
        let client = try S3Client(
            destination: destination, credentials: credentials, transport: CurlTransport(settings: settings),
            logger: Logger(label: "test"))
        if let bucketID { client.gateways.expect(bucketID: Array(bucketID.utf8)) }
        return client
    }

    @Test(.timeLimit(.minutes(3)))
    func uploadsGoThroughTheNextGatewayWhenOneResetsAndOneRefuses() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let resetting = try FaultProxy(upstreamPort: server.s3Port, rules: [FaultRule(.reset)])
        defer { resetting.stop() }
        let closedPort = try #require(try SeaweedFS.freePorts(1).first)
        let refusing = "http://127.0.0.1:\(closedPort)"
        let client = try Self.client(server, gateways: [resetting.endpoint, refusing, server.endpoint])

        let files = TemporaryDirectory()
        let size = (5 << 20) + 7
        let source = try files.write("clip.mp4", randomBytes(size))
        let uploadID = try await client.createMultipartUpload(key: "card/clip.mp4")
        let first = try await client.uploadPart(
            key: "card/clip.mp4", uploadID: uploadID, partNumber: 1,
            body: .file(path: source, offset: 0, length: 5 << 20), payloadHash: .unsigned)
        let second = try await client.uploadPart(
            key: "card/clip.mp4", uploadID: uploadID, partNumber: 2,
            body: .file(path: source, offset: 5 << 20, length: 7), payloadHash: .unsigned)
        _ = try await client.completeMultipartUpload(
            key: "card/clip.mp4", uploadID: uploadID,
            parts: [CompletedPart(number: 1, etag: first), CompletedPart(number: 2, etag: second)])

        #expect(try resetting.stats().injected(.reset) >= 1, "the first gateway reset a request: \(resetting.log)")
        let gateways = client.gateways.all
        #expect(client.gateways.isDown(gateways[0]) || client.gateways.isDown(gateways[1]))
        #expect(client.gateways.pick()?.url == server.endpoint)
        let copy = files.path + "/copy"
        let get = try server.aws(["s3api", "get-object", "--bucket", server.bucket, "--key", "card/clip.mp4", copy])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(try xxh128sum(copy) == (try xxh128sum(source)))
    }

    @Test(.timeLimit(.minutes(3)))
    func aGatewayThatDiesMidRunIsLeftAndTheRequestsGoOnThroughTheOther() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let forwarder = try FaultProxy(upstreamPort: server.s3Port)
        let client = try Self.client(server, gateways: [forwarder.endpoint, server.endpoint])
        let body = Array("hello".utf8)
        _ = try await client.putObject(key: "a.txt", body: .bytes(body), payloadHash: PayloadHash(sha256Of: body))
        #expect(try forwarder.stats().forwarded >= 1, "the first gateway carried the first request")
        forwarder.stop()

        let started = ContinuousClock.now
        for index in 0..<20 {
            _ = try await client.putObject(key: "b\(index).txt", body: .bytes(body), payloadHash: PayloadHash(sha256Of: body))
        }
        // Without failover each request would wait out the retry policy against the dead
        // gateway; with it, one refused connection moves all of them on at once.
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(client.gateways.isDown(client.gateways.all[0]))
        #expect(try await client.headObject(key: "b19.txt")?.size == 5)
    }

    @Test(.timeLimit(.minutes(3)))
    func stationsRacingToWriteTheMarkerEndWithOneIdentityWhichTheirRequestsThenCheck() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let forwarder = try FaultProxy(upstreamPort: server.s3Port)
        defer { forwarder.stop() }
        let gateways = [forwarder.endpoint, server.endpoint]
        let first = try Self.client(server, gateways: gateways)
        let second = try Self.client(server, gateways: gateways.reversed())
        let (one, other) = (forwarder.endpoint, server.endpoint)
        let written = Task { try await first.writeMarker(through: one) }
        let raced = Task { try await second.writeMarker(through: other) }
        let (a, b) = (try await written.value, try await raced.value)
        #expect(a == b, "one write wins (If-None-Match: *); the other reads it back")

        let body = Array("x".utf8)
        for i in 0..<3 {
            _ = try await first.putObject(key: "a\(i)", body: .bytes(body), payloadHash: .unsigned)
            _ = try await second.putObject(key: "b\(i)", body: .bytes(body), payloadHash: .unsigned)
        }
        let marker = try #require(try await first.getDocument(key: S3Gateways.markerKey))
        #expect(marker.bytes == a && first.gateways.bucketID == a && second.gateways.bucketID == a)
        #expect(UUID(uuidString: String(decoding: marker.bytes, as: UTF8.self)) != nil)
        #expect(first.gateways.refusals.isEmpty && second.gateways.refusals.isEmpty)
        #expect(try forwarder.stats().events.isEmpty, "no fault injected")
    }

    @Test(.timeLimit(.minutes(3)))
    func requestsNeverWriteTheMarker() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let forwarder = try FaultProxy(upstreamPort: server.s3Port)
        defer { forwarder.stop() }
        let client = try Self.client(server, gateways: [forwarder.endpoint, server.endpoint])
        let body = Array("x".utf8)
        _ = try await client.putObject(key: "a", body: .bytes(body), payloadHash: .unsigned)
        #expect(try await client.getDocument(key: S3Gateways.markerKey) == nil, "only a run's identification writes it")
        #expect(client.gateways.refusals.isEmpty, "gateways showing none, where none is known, are used")
    }

    @Test(.timeLimit(.minutes(3)))
    func gatewaysShowingAnotherBucketThanTheJournalsAreRefusedWithTheirNames() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let forwarder = try FaultProxy(upstreamPort: server.s3Port)
        defer { forwarder.stop() }
        let marker = Array("the-bucket-of-the-other-cluster".utf8)
        _ = try await Self.client(server, gateways: [server.endpoint]).putDocument(
            key: S3Gateways.markerKey, bytes: marker, headers: [])
        let client = try Self.client(server, gateways: [forwarder.endpoint, server.endpoint], expecting: "journalled-id")
        let body = Array("x".utf8)
        do {
            _ = try await client.putObject(key: "a", body: .bytes(body), payloadHash: .unsigned)
            Issue.record("a put through gateways of another bucket succeeded")
        } catch {
            guard case .foreignBucket(let refusals) = error else { throw error }
            #expect(refusals.contains(forwarder.endpoint) && refusals.contains(server.endpoint), "\(refusals)")
            #expect(refusals.contains("another bucket"))
            #expect(UploadError(error, what: "PutObject a", target: client.destination).exitStatus == .config)
        }
        #expect(try await Self.client(server, gateways: [server.endpoint]).headObject(key: "a") == nil, "nothing written")
    }

    @Test(.timeLimit(.minutes(2)))
    func withEveryGatewayDeadARequestFailsAfterItsRetryBudgetNotInALoop() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let ports = try SeaweedFS.freePorts(2)
        let client = try Self.client(server, gateways: ports.map { "http://127.0.0.1:\($0)" })
        do {
            _ = try await client.headBucket()
            Issue.record("HeadBucket through two dead gateways succeeded")
        } catch {
            guard case .transport(let problem, let attempts) = error else { throw error }
            #expect(problem.kind == .connectionFailed)
            #expect(attempts == RetryPolicy.control.maxAttempts, "the budget paced the attempts, as with one gateway")
        }
        #expect(client.gateways.all.allSatisfy { client.gateways.isDown($0) })
    }
}
