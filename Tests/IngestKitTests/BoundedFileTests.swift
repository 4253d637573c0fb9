import Foundation
import Glibc
import IngestTestSupport
import Testing

@testable import IngestKit

/// What configures ingest is read whole, bounded, and only from a regular file: a FIFO, a
/// device, a directory or a file over the limit is refused before anything of it is read.
@Suite struct BoundedFileTests {
    /// The problem reading `path` gives, after checking it came within two seconds.
    private func problem(
        _ path: String, in directory: FileDescriptor? = nil, links: BoundedFile.Links, limit: Int = BoundedFile.defaultLimit
    ) throws -> BoundedFile.Problem {
        let started = ContinuousClock.now
        let problem = try #require(throws: BoundedFile.Problem.self) {
            try BoundedFile.read(path, in: directory, links: links, limit: limit)
        }
        #expect(ContinuousClock.now - started < .seconds(2), "refused at once, not after waiting")
        return problem
    }

    @Test func aRegularFileIsReadWholeWithItsStatus() throws {
        let dir = TemporaryDirectory()
        let path = try dir.write("ingest.toml", Array("state_dir = \"/srv/ingest\"\n".utf8))
        let file = try #require(try BoundedFile.read(path, links: .follow))
        #expect(file.bytes == Array("state_dir = \"/srv/ingest\"\n".utf8))
        #expect(file.status?.isRegularFile == true)
    }

    @Test func nothingThereIsNoFileNotAnError() throws {
        let dir = TemporaryDirectory()
        let plain = try dir.write("plain", [1])
        #expect(try BoundedFile.read(dir.path + "/absent.toml", links: .follow) == nil)
        #expect(try BoundedFile.read(plain + "/below-a-file.toml", links: .follow) == nil, "ENOTDIR")
        #expect(try BoundedFile.read(dir.path + "/absent.toml", links: .refuse) == nil)
    }

    @Test(arguments: [BoundedFile.Links.follow, .refuse])
    func aFIFOIsRefusedAtOnceWithoutWaitingForAWriter(links: BoundedFile.Links) throws {
        let dir = TemporaryDirectory()
        let fifo = dir.path + "/ingest.toml"
        #expect(mkfifo(fifo, 0o600) == 0)
        let problem = try problem(fifo, links: links)
        #expect(problem == .notRegular(type: .fifo))
        #expect(problem.description == "is a FIFO (named pipe), not a regular file")
    }

    @Test(arguments: ["/dev/zero", "/dev/urandom"])
    func anEndlessDeviceIsRefusedWithoutReadingIt(device: String) throws {
        let problem = try problem(device, links: .follow)
        #expect(problem == .notRegular(type: .characterDevice))
        #expect(problem.description.contains("device node"))
    }

    @Test func aDirectoryIsRefused() throws {
        let dir = TemporaryDirectory()
        #expect(try problem(dir.path, links: .follow).description == "is a directory, not a regular file")
    }

    @Test func aFileAtTheLimitIsReadAndOneByteMoreIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = try dir.write("at-limit", [UInt8](repeating: UInt8(ascii: "#"), count: 4096))
        #expect(try BoundedFile.read(path, links: .follow, limit: 4096)?.bytes.count == 4096)
        try dir.write("at-limit", [UInt8](repeating: UInt8(ascii: "#"), count: 4097))
        let problem = try problem(path, links: .follow, limit: 4096)
        #expect(problem == .tooLarge(limit: 4096))
        #expect(problem.description == "is larger than 4 KiB, the most read of it")
        #expect(BoundedFile.Problem.tooLarge(limit: BoundedFile.defaultLimit).description.contains("larger than 1 MiB"))
    }

    @Test func aLinkIsFollowedForTheOperatorsFilesAndRefusedForTheCards() throws {
        let dir = TemporaryDirectory()
        let target = try dir.write("real.toml", Array("scene = \"x\"\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/link.toml", withDestinationPath: target)
        #expect(try BoundedFile.read(dir.path + "/link.toml", links: .follow)?.bytes == Array("scene = \"x\"\n".utf8))
        #expect(try problem(dir.path + "/link.toml", links: .refuse) == .symbolicLink)
        // Relative to a directory, as a card's root is read.
        let root = try FileDescriptor(path: dir.path, flags: [.readOnly, .directory])
        #expect(try problem("link.toml", in: root, links: .refuse) == .symbolicLink)
        #expect(try BoundedFile.read("real.toml", in: root, links: .refuse)?.bytes.count == 12)
    }

    @Test func devNullIsAnEmptyFileWhereLinksAreFollowedAndADeviceOnACard() throws {
        let empty = try #require(try BoundedFile.read("/dev/null", links: .follow))
        #expect(empty.bytes.isEmpty)
        #expect(empty.status == nil, "no owner or mode to judge")
        let dir = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/null.toml", withDestinationPath: "/dev/null")
        #expect(try BoundedFile.read(dir.path + "/null.toml", links: .follow)?.bytes == [])
        #expect(try problem("/dev/null", links: .refuse) == .notRegular(type: .characterDevice))
    }

    @Test func aSocketIsRefusedAndAFailedCallIsNamedInWords() throws {
        // A socket is neither text nor a file to open; and what a failed call says, in words.
        let dir = TemporaryDirectory()
        let path = dir.path + "/socket"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        #expect(try problem(path, links: .follow).description == "is a socket, not a regular file")
        #expect(
            BoundedFile.Problem.failed(SystemError(call: "open", errno: .permissionDenied, path: path)).description
                == "cannot be opened (Permission denied)")
    }
}
