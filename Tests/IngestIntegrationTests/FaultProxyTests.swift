import Foundation
import IngestKit
import IngestTestSupport
import Testing

/// The S3 client against a real SeaweedFS through the fault proxy (`FaultProxy`): connection
/// resets mid-body, a stall past the low-speed timeout, 503 `SlowDown`, 500s and lost answers
/// cost retries, never a corrupt or missing object. Where the faults never stop, the client
/// gives up with a typed error that names the cause, after the attempts its policy allows
/// and in bounded time.
///
/// Every test asserts from the proxy's counters that its faults were really injected: a
/// fault test that injected nothing would pass without proving anything.
@Suite(.serialized)
struct FaultProxyTests {
    /// The transport's limits, shortened so that a stalled request is abandoned in seconds.
    ///
    /// libcurl judges "too slow" on the average speed over its last five or so one-second
    /// samples, so after a fast upload a stall is noticed about 5 s + `lowSpeedTime` after
    /// the last byte (measured: 7.2 s with 2 s, 11.2 s with 5 s), not `lowSpeedTime` after
    /// it: a stall rule must outlast that.
    static var quickTransport: TransportSettings {
        var settings = TransportSettings()
        settings.connectTimeout = .seconds(2)
        settings.lowSpeedTime = .seconds(2)
        return settings
    }

    /// A file of random bytes (from /dev/urandom: fast even in a debug build).
    static func randomFile(_ directory: TemporaryDirectory, _ name: String, size: Int) throws -> String {
        let path = directory.path + "/" + name
        try sh("head -c \(size) /dev/urandom > \(shellQuoted(path))")
        return path
    }

    @Test(.timeLimit(.minutes(3)))
    func aMultipartUploadThroughResetsAStallAndServerErrorsLandsByteForByte() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }

        // Rules are tried in order and a request goes to the first that picks it: the two
        // rules on Complete give it a 500, then a 503, then let it through.
        let rules = [
            FaultRule(.slowdown, "POST", "?uploads", count: 2),  // CreateMultipartUpload
            FaultRule(.reset, "PUT", "partNumber=1&", count: 2),  // half of part 1 reaches the server, twice
            FaultRule(.stall, "PUT", "partNumber=2&", count: 1, seconds: 60),  // part 2 is never answered
            FaultRule(.truncate, "PUT", "partNumber=3&", count: 1),  // part 3 is stored, its answer lost
            FaultRule(.slowdown, "GET", "uploadId=", count: 1),  // ListParts
            FaultRule(.error500, "POST", "uploadId=", count: 1),  // CompleteMultipartUpload
            FaultRule(.slowdown, "POST", "uploadId=", count: 1),  // CompleteMultipartUpload again
        ]
        let proxy = try FaultProxy(upstreamPort: server.s3Port, rules: rules)
        defer { proxy.stop() }
        let client = try S3ClientTests.client(
            server, bucket: "cards", endpoint: proxy.endpoint, settings: Self.quickTransport)

        let files = TemporaryDirectory()
        let size = (15 << 20) + 7
        let source = try Self.randomFile(files, "DJI_0001.MP4", size: size)
        let key = "drone/2026-11-21/DCIM/DJI_0001.MP4"
        let ranges = [(0, 6 << 20), (6 << 20, 6 << 20), (12 << 20, (3 << 20) + 7)]
        let hashes = try ranges.map { try S3ClientTests.sha256(source, offset: $0.0, length: $0.1) }

        let uploadID = try await client.createMultipartUpload(key: key)
        // The parts go up at once, each on its own connection, as the uploader sends them.
        let etags = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, (offset, length)) in ranges.enumerated() {
                group.addTask {
                    let etag = try await client.uploadPart(
                        key: key, uploadID: uploadID, partNumber: index + 1,
                        body: .file(path: source, offset: Int64(offset), length: Int64(length)),
                        payloadHash: hashes[index])
                    return (index + 1, etag)
                }
            }
            return try await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
        }
        let parts = etags.sorted { $0.key < $1.key }.map { CompletedPart(number: $0.key, etag: $0.value) }

        // The server holds every part whole, with the ETag the client was given, and no
        // trace of the half bodies that the resets let through. SeaweedFS 4.48 lists every
        // upload of a part number rather than the last one (AWS lists the last): part 3,
        // stored once by the attempt whose answer was cut and once by the resend, is
        // listed twice with the same ETag. Complete picks the copy by the ETag it is sent.
        let listed = try await client.listParts(key: key, uploadID: uploadID)
        #expect(Set(listed.map(\.number)) == [1, 2, 3], "\(listed)")
        for part in listed {
            #expect(part.size == Int64(ranges[part.number - 1].1), "\(part)")
            #expect(part.etag == etags[part.number], "\(part)")
        }

        let objectETag = try await client.completeMultipartUpload(key: key, uploadID: uploadID, parts: parts)
        #expect(objectETag?.hasSuffix("-3\"") == true, "a multipart ETag names its part count: \(String(describing: objectETag))")

        // What landed, read past the proxy by the aws CLI: the source's bytes exactly.
        let copy = files.path + "/copy"
        let get = try server.aws(["s3api", "get-object", "--bucket", "cards", "--key", key, copy])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(try xxh128sum(copy) == (try xxh128sum(source)))
        let uploads = try server.aws(["s3api", "list-multipart-uploads", "--bucket", "cards"])
        #expect(uploads.status == 0)
        #expect(!uploads.stdoutText.contains("UploadId"), "no upload left behind: \(uploads.stdoutText)")

        // Every fault happened, as many times as its rule says.
        let stats = try proxy.stats()
        #expect(stats.rules.map(\.fired) == rules.map { $0.count ?? 0 }, "\(stats.rules)\n\(proxy.log)")
        #expect(stats.injected(.reset) == 2)
        #expect(stats.injected(.stall) == 1)
        #expect(stats.stallHangups == 1, "the client's low-speed timeout ended the stall, not the proxy")
        #expect(stats.injected(.truncate) == 1)
        #expect(stats.injected(.slowdown) == 4)
        #expect(stats.injected(.error500) == 1)
        #expect(stats.events.filter { $0.action == "reset" }.allSatisfy { $0.target.contains("partNumber=1&") })
        // Create, the three parts (part 3 resent after its cut answer), list and complete
        // were relayed with their answers.
        #expect(stats.forwarded >= 6, "\(stats)")
    }

    /// The probe that decides whether each write needs a `HEAD` first: SeaweedFS refuses a
    /// second conditional write (412); the same server seen through a proxy that answers
    /// 412s with 200, as one that ignores `If-None-Match` would, is found out.
    @Test(.timeLimit(.minutes(3)))
    func theProbeOfConditionalWritesTellsAServerThatHonoursIfNoneMatchFromOneThatIgnoresIt() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.s3Port)
        defer { proxy.stop() }
        let client = try S3ClientTests.client(server, bucket: "cards", endpoint: proxy.endpoint)

        #expect(await client.probeConditionalWrites(key: "probe") == .honoured)

        try proxy.setRules([FaultRule(.unconditional, "PUT")])
        guard case .notHonoured(let reason) = await client.probeConditionalWrites(key: "probe") else {
            Issue.record("a server answering 200 to a second conditional write passed for one that honours it")
            return
        }
        #expect(reason.contains("wrote over probe"), "\(reason)")
        #expect(try proxy.stats().injected(.unconditional) == 1, "\(proxy.log)")
        let left = try server.json(["s3api", "list-objects-v2", "--bucket", "cards"])["Contents"] as? [[String: Any]]
        #expect(left == nil, "the probe deletes its object")
    }

    @Test(.timeLimit(.minutes(3)))
    func aSlowDownThatNeverEndsIsAServerErrorAfterEveryAttemptThePolicyAllows() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.s3Port, rules: [FaultRule(.slowdown)])
        defer { proxy.stop() }
        let client = try S3ClientTests.client(
            server, bucket: "cards", endpoint: proxy.endpoint, settings: Self.quickTransport)

        // A control request: the short policy.
        do throws(S3ClientError) {
            _ = try await client.createMultipartUpload(key: "a.bin")
            Issue.record("a request answered SlowDown every time succeeded")
        } catch {
            guard case .server(let s3Error, let attempts) = error else {
                Issue.record("expected a server error, got \(error)")
                return
            }
            #expect(s3Error.code == .slowDown, "\(s3Error)")
            #expect(s3Error.status == 503)
            #expect(attempts == RetryPolicy.control.maxAttempts)
            #expect(error.description.contains("slow down"), "the error says what to do: \(error)")
        }
        var stats = try proxy.stats()
        #expect(stats.injected(.slowdown) == RetryPolicy.control.maxAttempts, "\(proxy.log)")
        #expect(stats.forwarded == 0, "nothing reached the server")

        // A part, with a 5 MiB body sent and refused on every attempt: the patient policy.
        try proxy.resetStats()
        let files = TemporaryDirectory()
        let source = try Self.randomFile(files, "part", size: 5 << 20)
        let hash = try S3ClientTests.sha256(source, offset: 0, length: 5 << 20)
        do throws(S3ClientError) {
            _ = try await client.uploadPart(
                key: "a.bin", uploadID: "never-created", partNumber: 1, body: .file(path: source, offset: 0, length: 5 << 20),
                payloadHash: hash)
            Issue.record("a part answered SlowDown every time succeeded")
        } catch {
            guard case .server(let s3Error, let attempts) = error else {
                Issue.record("expected a server error, got \(error)")
                return
            }
            #expect(s3Error.code == .slowDown, "\(s3Error)")
            #expect(attempts == RetryPolicy.part.maxAttempts)
            #expect(error.description.contains("after \(RetryPolicy.part.maxAttempts) attempts"), "\(error)")
        }
        stats = try proxy.stats()
        #expect(stats.injected(.slowdown) == RetryPolicy.part.maxAttempts, "\(proxy.log)")
        #expect(stats.forwarded == 0)
        #expect(stats.bytesToUpstream == 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func aResetOnEveryAttemptOfAPartIsATransportErrorThatNamesTheCauseAndKeepsNoHalfPart() async throws {
        let server = try SeaweedFS()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.s3Port, rules: [FaultRule(.reset, "PUT", "partNumber=")])
        defer { proxy.stop() }
        let client = try S3ClientTests.client(
            server, bucket: "cards", endpoint: proxy.endpoint, settings: Self.quickTransport)
        let files = TemporaryDirectory()
        let length = 5 << 20
        let source = try Self.randomFile(files, "part", size: length)
        let hash = try S3ClientTests.sha256(source, offset: 0, length: length)
        let key = "DCIM/A001.WAV"

        let uploadID = try await client.createMultipartUpload(key: key)
        do throws(S3ClientError) {
            _ = try await client.uploadPart(
                key: key, uploadID: uploadID, partNumber: 1, body: .file(path: source, offset: 0, length: Int64(length)),
                payloadHash: hash)
            Issue.record("a part whose connection was reset every time succeeded")
        } catch {
            guard case .transport(let transportError, let attempts) = error else {
                Issue.record("expected a transport error, got \(error)")
                return
            }
            #expect(transportError.kind == .connectionReset, "\(transportError)")
            #expect(attempts == RetryPolicy.part.maxAttempts)
            #expect(error.description.contains("the connection broke"), "the cause is named: \(error)")
            #expect(error.description.contains("proxy"), "and where to look: \(error)")
            #expect(error.description.contains("after \(RetryPolicy.part.maxAttempts) attempts"), "\(error)")
        }

        // One reset per attempt, and one more when the first attempt went out on the
        // keep-alive connection CreateMultipartUpload left open: libcurl itself sends a
        // request again, once, on a fresh connection when a reused one dies unanswered.
        var stats = try proxy.stats()
        let resets = stats.injected(.reset)
        #expect((RetryPolicy.part.maxAttempts...RetryPolicy.part.maxAttempts + 1).contains(resets), "\(proxy.log)")
        #expect(stats.bytesToUpstream >= resets * length / 2, "half of each attempt reached the server")
        // The server was sent half a part eight times and kept none of them.
        #expect(try await client.listParts(key: key, uploadID: uploadID).isEmpty)

        // The fault ends: the same upload carries on and the object is whole.
        try proxy.setRules([])
        let etag = try await client.uploadPart(
            key: key, uploadID: uploadID, partNumber: 1, body: .file(path: source, offset: 0, length: Int64(length)),
            payloadHash: hash)
        _ = try await client.completeMultipartUpload(key: key, uploadID: uploadID, parts: [CompletedPart(number: 1, etag: etag)])
        let copy = files.path + "/copy"
        #expect(try server.aws(["s3api", "get-object", "--bucket", "cards", "--key", key, copy]).status == 0)
        #expect(try xxh128sum(copy) == (try xxh128sum(source)))
        stats = try proxy.stats()
        #expect(stats.injected(.reset) == resets, "no fault after the rules were cleared")
    }

    /// A keep-alive connection that dies before answering (a server that closed it at its
    /// idle timeout just as the request went out, a middlebox reset) is not the request's
    /// fault: libcurl sends the request again on a fresh connection, rewinding the body
    /// through the transport's seek callback. The echo server behind the proxy proves that
    /// the resent body is the whole range again, byte for byte, for both kinds of body, and
    /// under a send rate too (the turn the body had is spent on the new connection).
    @Test(.timeLimit(.minutes(1)), arguments: [nil, ByteRate(bytesPerSecond: 8 << 20)])
    func aResetOnAReusedConnectionIsResentOnAFreshOneWithTheWholeBody(sendRate: ByteRate?) async throws {
        let echo = try EchoServer()
        // Each reset comes once the whole body is through, while libcurl waits for the answer.
        // (A reset while it is still sending is a send error, which libcurl does not resend
        // itself, and whether a body is all sent by then depends on timing: the uploader's
        // retries cover that case, in the tests above.)
        let proxy = try FaultProxy(upstreamPort: echo.port, rules: [
            FaultRule(.reset, "PUT", "/second-bytes", count: 1, fraction: 1),
            FaultRule(.reset, "PUT", "/second-file", count: 1, fraction: 1),
        ])
        defer { proxy.stop() }
        var settings = Self.quickTransport
        settings.maxSendRate = sendRate
        let transport = CurlTransport(settings: settings)

        let bytes = randomBytes(300_000)
        _ = try await transport.send(HTTPRequest(method: "PUT", url: proxy.endpoint + "/first", body: .bytes(bytes)))
        let fromBytes = try await transport.send(HTTPRequest(method: "PUT", url: proxy.endpoint + "/second-bytes", body: .bytes(bytes)))
        #expect(fromBytes.status == 200)
        #expect(try CurlTransportTests.echo(fromBytes)["length"] as? Int == bytes.count)
        #expect(try CurlTransportTests.echo(fromBytes)["sha256"] as? String == PayloadHash(sha256Of: bytes).value)

        let files = TemporaryDirectory()
        let path = try Self.randomFile(files, "part.bin", size: 3 << 20)
        let (offset, length) = (1000, (2 << 20) + 7)
        let oracle = try sh("dd if=\(path) iflag=skip_bytes,count_bytes skip=\(offset) count=\(length) bs=64K status=none | sha256sum").prefix(64)
        let body = HTTPBody.file(path: path, offset: Int64(offset), length: Int64(length))
        _ = try await transport.send(HTTPRequest(method: "PUT", url: proxy.endpoint + "/first-file", body: body))
        let fromFile = try await transport.send(HTTPRequest(method: "PUT", url: proxy.endpoint + "/second-file", body: body))
        #expect(fromFile.status == 200)
        #expect(try CurlTransportTests.echo(fromFile)["length"] as? Int == length)
        #expect(try CurlTransportTests.echo(fromFile)["sha256"] as? String == String(oracle))

        // Both resets happened, each on a reused connection, and each request was sent
        // again on a new one: three connections in all.
        let stats = try proxy.stats()
        #expect(stats.injected(.reset) == 2, "\(proxy.log)")
        #expect(stats.connections == 3, "\(stats)")
    }
}
