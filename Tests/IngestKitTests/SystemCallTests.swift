import Foundation
import Glibc
import Testing

@testable import IngestKit

/// The system call layer (Support/System): `EINTR` retried in one place, errno typed and
/// named, and every failure a ``SystemError`` that names the call, the path and the errno.
@Suite struct SystemCallTests {
    /// A stand-in for a system call: fails with each of `failures` in turn (returning -1 with
    /// `errno` set, as the C library does), then returns `result`. Counts its calls.
    final class ScriptedCall {
        var failures: [Errno]
        let result: Int32
        private(set) var calls = 0

        init(failing failures: [Errno], then result: Int32) {
            self.failures = failures
            self.result = result
        }

        func call() -> Int32 {
            calls += 1
            guard !failures.isEmpty else { return result }
            Errno.current = failures.removeFirst()
            return -1
        }
    }

    @Test func aCallInterruptedBySignalsIsMadeAgainUntilItReturns() {
        let call = ScriptedCall(failing: [.interrupted, .interrupted], then: 7)
        let result = retryingOnInterrupt(call.call)
        #expect(result == .success(7))
        #expect(call.calls == 3)
    }

    @Test func aCallThatFailsOtherwiseIsMadeOnceAndGivesItsErrno() {
        let call = ScriptedCall(failing: [.noSpace, .interrupted], then: 0)
        #expect(retryingOnInterrupt(call.call) == .failure(.noSpace))
        #expect(call.calls == 1, "only EINTR is retried")
    }

    @Test func aCallInterruptedThenFailingThrowsTheErrorNamingTheCallAndPath() {
        let call = ScriptedCall(failing: [.interrupted, .permissionDenied], then: 0)
        #expect(throws: SystemError(call: "open", errno: .permissionDenied, path: "/x")) {
            try valueOrErrno("open", path: "/x", call.call)
        }
        #expect(call.calls == 2)
    }

    @Test func aCallThatReturnsZeroOrMoreIsNoFailure() throws {
        let call = ScriptedCall(failing: [], then: 0)
        #expect(try valueOrErrno("close", call.call) == 0)
    }

    @Test func errnoNamesAreTheCLibrarysNumbers() {
        #expect(Errno.interrupted.rawValue == EINTR)
        #expect(Errno.noSuchFileOrDirectory.rawValue == ENOENT)
        #expect(Errno.fileExists.rawValue == EEXIST)
        #expect(Errno.wouldBlock.rawValue == EAGAIN)
        #expect(Errno.wouldBlock.rawValue == EWOULDBLOCK)
        #expect(Errno.noSpace.rawValue == ENOSPC)
        #expect(Errno.notDirectory.rawValue == ENOTDIR)
        #expect(Errno.tooManySymbolicLinkLevels.rawValue == ELOOP)
        #expect(Errno.improperLink.rawValue == EXDEV)
        #expect(Errno.permissionDenied.rawValue == EACCES)
        #expect(Errno.notPermitted.rawValue == EPERM)
        #expect(Errno.resourceBusy.rawValue == EBUSY)
        #expect(Errno.ioError.rawValue == EIO)
        #expect(Errno.noSpace.description == "No space left on device")
    }

    @Test func theErrnoOfAFailedCallIsReadFromTheThread() {
        Errno.current = .success
        #expect(Glibc.access("/nonexistent-ingest-test", F_OK) == -1)
        #expect(Errno.current == .noSuchFileOrDirectory)
        #expect(SystemError.last("access", path: "/p").errno == .noSuchFileOrDirectory)
    }

    @Test func aFailureNamesTheCallThePathAndTheReason() {
        let missing = TemporaryDirectory().path + "/missing"
        let expected = SystemError(call: "stat", errno: .noSuchFileOrDirectory, path: missing)
        #expect(throws: expected) { try System.status(missing) }
        #expect(expected.description == "stat \(missing): No such file or directory")
        #expect(SystemError(call: "fsync", errno: .ioError).description == "fsync: Input/output error")
    }

    @Test func outOfSpaceIsAFullDiskOrQuota() {
        #expect(SystemError(call: "write", errno: .noSpace).isOutOfSpace)
        #expect(SystemError(call: "write", errno: .diskQuotaExceeded).isOutOfSpace)
        #expect(!SystemError(call: "write", errno: .ioError).isOutOfSpace)
    }

    @Test func anExclusiveCreateOfATakenNameFailsWithFileExists() throws {
        let directory = TemporaryDirectory()
        let path = try directory.write("taken", [1, 2, 3])
        #expect(throws: SystemError(call: "open", errno: .fileExists, path: path)) {
            try FileDescriptor(path: path, flags: [.writeOnly, .create, .exclusive], mode: 0o600)
        }
    }

    @Test func aFileWrittenIsReadBackAndItsStatusTellsItsType() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/file"
        let file = try FileDescriptor(path: path, flags: [.readWrite, .create, .exclusive], mode: 0o600)
        try [UInt8]("hello".utf8).withUnsafeBytes { try file.write($0, at: 0, path: path) }
        var read = [UInt8](repeating: 0, count: 16)
        let count = try read.withUnsafeMutableBytes { try file.read(into: $0, at: 0, path: path) }
        #expect(Array(read[..<count]) == Array("hello".utf8))
        #expect(try file.stat().type == .regular)
        #expect(try System.status(directory.path).type == .directory)
        try file.close()
    }

    @Test func aDirectoryListsItsNamesWithTheirTypes() throws {
        let directory = TemporaryDirectory()
        _ = try directory.write("a-file", [])
        try System.makeDirectory(directory.path + "/a-folder", mode: 0o700)
        let reader = try DirectoryReader(path: directory.path)
        var listed: [String: FileType] = [:]
        while let (name, type) = try reader.nextEntry({ (String(decoding: $0, as: UTF8.self), $1) }) {
            listed[name] = type ?? .unknown
        }
        #expect(listed["a-file"] == .regular)
        #expect(listed["a-folder"] == .directory)
        #expect(Set(listed.keys) == [".", "..", "a-file", "a-folder"])
    }

    @Test func removingWhatIsNotThereIsDoneAndAnyOtherFailureIsNot() throws {
        let directory = TemporaryDirectory()
        #expect(System.removeIfPresent(directory.path + "/never-was"))
        #expect(!System.removeIfPresent(directory.path), "a directory cannot be unlinked")
        #expect(throws: SystemError(call: "unlink", errno: .noSuchFileOrDirectory, path: directory.path + "/never-was")) {
            try System.unlink(directory.path + "/never-was")
        }
    }
}
