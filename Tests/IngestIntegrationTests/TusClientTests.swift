import Foundation
import IngestKit
import IngestTestSupport
import Logging
import Testing

/// The tus client against a real tus 1.0 server (tuspyserver under uvicorn on 127.0.0.1),
/// with what the server stored on disk as the oracle: its copy of the bytes compared by
/// `xxh128sum`, its `.info` for the metadata it decoded.
@Suite(.serialized)
struct TusClientTests {
    /// A client of `server`, with its bearer token if it wants one; through `proxy` when given.
    static func client(
        _ server: TusServer, headers: [(name: String, value: String)]? = nil, through proxy: FaultProxy? = nil
    ) throws -> TusClient {
        var settings = TransportSettings()
        settings.connectTimeout = .seconds(2)
        settings.lowSpeedTime = .seconds(5)
        return try TusClient(
            creationURL: proxy.map { $0.endpoint + "/files/" } ?? server.creationURL,
            headers: headers ?? server.bearer.map { [(name: "Authorization", value: "Bearer \($0)")] } ?? [],
            transport: CurlTransport(settings: settings), logger: Logger(label: "test"))
    }

    /// tuspyserver answers HEAD only for uploads whose metadata names a file and its type.
    static func metadata(_ name: String = "DJI_0001.MP4") throws -> TusMetadata {
        try TusMetadata(text: ["filename": name, "filetype": "video/mp4"])
    }

    @Test(.timeLimit(.minutes(2)))
    func theServerListsTheExtensionsAnUploadNeeds() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let info = try await Self.client(server).serverInfo()
        #expect(info.speaksVersion1)
        #expect(info.extensions.isSuperset(of: ["creation", "termination", "expiration"]), "\(info.extensions)")
        #expect(info.maxSize == 128_849_018_880)
        #expect(info.checksumAlgorithms.isEmpty, "tuspyserver has no checksum extension")
    }

    @Test(.timeLimit(.minutes(3)))
    func aFileSentInTwoChunksLandsByteForByteWithItsMetadata() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let client = try Self.client(server)
        let files = TemporaryDirectory()
        let length = Int64(12 << 20)
        let source = try files.write("DJI_0001.MP4", randomBytes(Int(length)))
        let split = Int64(7 << 20) + 3
        let name = "DCIM/100MEDIA/DJI 0001 é+$,x.MP4"
        var metadata = try Self.metadata(name)
        try metadata.set("card", Array("A001".utf8))
        try metadata.set("empty", [])

        let upload = try await client.create(length: length, metadata: metadata)
        #expect(upload.url.hasPrefix(server.creationURL), "\(upload.url)")
        let expires = try #require(upload.expires, "tuspyserver sends Upload-Expires")
        #expect(expires > Date().addingTimeInterval(86_400))
        // tuspyserver sends Upload-Expires with POST and PATCH answers, not with HEAD's.
        #expect(try await client.status(of: upload.url).position == .init(offset: 0, length: length))

        let first = try await client.append(to: upload.url, offset: 0, body: .file(path: source, offset: 0, length: split))
        #expect(first == split)
        #expect(try await client.status(of: upload.url).position == .init(offset: split, length: length))
        let second = try await client.append(
            to: upload.url, offset: split, body: .file(path: source, offset: split, length: length - split))
        #expect(second == length)
        #expect(try await client.status(of: upload.url).position == .init(offset: length, length: length))

        #expect(try xxh128sum(server.storedFile(uploadURL: upload.url)) == xxh128sum(source))
        let info = try #require(try server.storedInfo(uploadURL: upload.url))
        let stored = try #require(info["metadata"] as? [String: String])
        #expect(stored == ["filename": name, "filetype": "video/mp4", "card": "A001", "empty": ""])
        #expect((info["size"] as? NSNumber)?.int64Value == length)
        #expect((info["offset"] as? NSNumber)?.int64Value == length)
    }

    @Test(.timeLimit(.minutes(2)))
    func aChunkAtAWrongOffsetIsAnOffsetMismatchAndStoresNothing() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let client = try Self.client(server)
        let files = TemporaryDirectory()
        let source = try files.write("clip.mov", randomBytes(1 << 20))
        let upload = try await client.create(length: 1 << 20, metadata: try Self.metadata())

        await #expect(throws: TusError.offsetMismatch(sent: 4096)) {
            try await client.append(to: upload.url, offset: 4096, body: .file(path: source, offset: 4096, length: 4096))
        }
        #expect(try await client.status(of: upload.url).position == .init(offset: 0, length: 1 << 20))
        let attributes = try FileManager.default.attributesOfItem(atPath: server.storedFile(uploadURL: upload.url))
        #expect(attributes[.size] as? Int == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func aTerminatedUploadIsGone() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let client = try Self.client(server)
        let files = TemporaryDirectory()
        let source = try files.write("clip.mov", randomBytes(64 << 10))
        let upload = try await client.create(length: 64 << 10, metadata: try Self.metadata())
        #expect(try await client.append(to: upload.url, offset: 0, body: .file(path: source, offset: 0, length: 1000)) == 1000)

        try await client.terminate(upload.url)
        #expect(try await client.status(of: upload.url) == .gone)
        #expect(!FileManager.default.fileExists(atPath: server.storedFile(uploadURL: upload.url)))
        try await client.terminate(upload.url)  // gone already: counts as done
        await #expect(throws: TusError.uploadGone(status: 404)) {
            try await client.append(to: upload.url, offset: 1000, body: .file(path: source, offset: 1000, length: 1000))
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func theBearerTokenReachesTheServerAndNoErrorRepeatsIt() async throws {
        let token = "tus-test-token-\(UInt64.random(in: 1...UInt64.max))"
        let server = try TusServer(bearer: token)
        defer { server.stop() }
        let client = try Self.client(server)
        #expect(!client.description.contains(token), "\(client.description)")
        let upload = try await client.create(length: 10, metadata: try Self.metadata())
        #expect(try await client.status(of: upload.url).position == .init(offset: 0, length: 10))

        let wrong = "wrong-token-\(UInt64.random(in: 1...UInt64.max))"
        let refused = try Self.client(server, headers: [(name: "Authorization", value: "Bearer \(wrong)")])
        var texts: [String] = [refused.description]
        let other = try Self.metadata("other.MP4")
        do {
            _ = try await refused.create(length: 10, metadata: other)
            Issue.record("a create with the wrong token was accepted")
        } catch {
            #expect(error == .server(status: 401, detail: "missing or wrong bearer token", attempts: 1))
            texts.append("\(error)")
        }
        do {
            _ = try await refused.status(of: upload.url)
            Issue.record("a HEAD with the wrong token was answered")
        } catch {
            texts.append("\(error)")
        }
        for text in texts {
            #expect(!text.contains(token) && !text.contains(wrong), "\(text)")
        }
        let infos = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory).filter { $0.hasSuffix(".info") }
        #expect(infos.count == 1, "only the upload with the right token exists: \(infos)")
    }

    @Test(.timeLimit(.minutes(2)))
    func anUploadURLOnAnotherHostIsRefused() async throws {
        let server = try TusServer()
        defer { server.stop() }
        // tuspyserver builds Location from X-Forwarded-Host, as a server behind a proxy
        // does: here it names another host, as a hostile or misconfigured server might.
        let client = try Self.client(server, headers: [(name: "X-Forwarded-Host", value: "elsewhere.example.net")])
        await #expect(throws: TusError.foreignServer(origin: "http://elsewhere.example.net:80")) {
            try await client.create(length: 10, metadata: try Self.metadata())
        }
        await #expect(throws: TusError.foreignServer(origin: "http://elsewhere.example.net:80")) {
            try await client.status(of: "http://elsewhere.example.net/files/abc")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func serverErrorsAreRetriedAndTheFileLandsWhole() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let proxy = try FaultProxy(
            upstreamPort: server.port,
            rules: [FaultRule(.slowdown, "PATCH", count: 1), FaultRule(.error500, "HEAD,POST", count: 2)])
        defer { proxy.stop() }
        let client = try Self.client(server, through: proxy)
        let files = TemporaryDirectory()
        let length = Int64(3 << 20)
        let source = try files.write("clip.mov", randomBytes(Int(length)))

        let upload = try await client.create(length: length, metadata: try Self.metadata())
        #expect(try await client.status(of: upload.url).position == .init(offset: 0, length: length))
        let half = length / 2
        #expect(try await client.append(to: upload.url, offset: 0, body: .file(path: source, offset: 0, length: half)) == half)
        #expect(
            try await client.append(to: upload.url, offset: half, body: .file(path: source, offset: half, length: length - half))
                == length)

        let stats = try proxy.stats()
        #expect(stats.injected(.slowdown) == 1 && stats.injected(.error500) == 2, "\(proxy.log)")
        #expect(try xxh128sum(server.storedFile(uploadURL: upload.url)) == xxh128sum(source))
        let uploads = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory).filter { $0.hasSuffix(".info") }
        #expect(uploads.count == 1, "the POST that failed created nothing: \(uploads)")
    }

    @Test(.timeLimit(.minutes(3)))
    func aChunkCutMidwayGoesOnFromTheOffsetTheServerKept() async throws {
        let server = try TusServer()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port, rules: [FaultRule(.reset, "PATCH", count: 1, fraction: 0.5)])
        defer { proxy.stop() }
        let client = try Self.client(server, through: proxy)
        let files = TemporaryDirectory()
        let length = Int64(4 << 20)
        let source = try files.write("clip.mov", randomBytes(Int(length)))
        let upload = try await client.create(length: length, metadata: try Self.metadata())

        // What the next step's uploader does: a PATCH that meets another offset than the one
        // sent (the server kept what arrived of the cut attempt before the retry) asks HEAD
        // and goes on from there. Whether the server kept any of it depends on timing.
        var offset: Int64 = 0
        var mismatches = 0
        while offset < length {
            do {
                offset = try await client.append(
                    to: upload.url, offset: offset, body: .file(path: source, offset: offset, length: length - offset))
            } catch .offsetMismatch {
                mismatches += 1
                guard case .found(let kept, _, _, _) = try await client.status(of: upload.url), kept > offset, mismatches <= 1 else {
                    Issue.record("after a 409 the server's offset must be past \(offset), once")
                    return
                }
                offset = kept
            }
        }
        #expect(offset == length)
        #expect(try proxy.stats().injected(.reset) == 1, "\(proxy.log)")
        #expect(try xxh128sum(server.storedFile(uploadURL: upload.url)) == xxh128sum(source))
    }
}

extension TusUploadStatus {
    struct Position: Equatable {
        var offset: Int64
        var length: Int64?
    }

    /// Where the upload stands, without the expiry and metadata the server adds.
    var position: Position? {
        if case let .found(offset, length, _, _) = self { return Position(offset: offset, length: length) }
        return nil
    }
}
