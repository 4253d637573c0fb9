import Foundation
import Glibc
import Synchronization
import Testing
import IngestTestSupport

@testable import IngestKit

/// `flock` locks: exclusive, per open file, released on unlock, on drop and when the holder dies.
@Suite struct FileLockTests {
    @Test func aHeldLockIsRefusedToAnotherUntilUnlocked() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        let first = try #require(try FileLock.ifFree(path: path))
        #expect(try FileLock.ifFree(path: path) == nil, "a lock belongs to its open file: refused even in one process")
        first.unlock()
        first.unlock()  // twice is harmless
        #expect(try FileLock.ifFree(path: path) != nil)
    }

    @Test func droppingALockReleasesIt() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        do { _ = try #require(try FileLock.ifFree(path: path)) }
        #expect(try FileLock.ifFree(path: path) != nil)
    }

    @Test func aWaitingLockerGetsTheLockOnceItIsReleased() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        let first = try #require(try FileLock.ifFree(path: path))
        final class Taken: Sendable { let flag = Atomic<Bool>(false) }
        let taken = Taken()
        let waiter = Task {
            await onDedicatedThread("test-flock-wait") {
                let lock = try? FileLock.waiting(path: path)
                taken.flag.store(true, ordering: .releasing)
                return lock != nil
            }
        }
        #expect(await eventually { threadIsAsleep(named: "test-flock-wait") || taken.flag.load(ordering: .acquiring) })
        let early = taken.flag.load(ordering: .acquiring)
        #expect(!early, "still waiting while the first holds it")
        first.unlock()
        #expect(await waiter.value, "the lock, once the first let it go")
    }

    @Test func aLockAnotherProcessHoldsIsSeenAndFreedWhenItDies() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        let held = dir.path + "/held"
        // The shell locks with flock(1) on its descriptor 9, says so, then becomes the sleep
        // that holds it.
        let holder = try ChildProcess(
            "/bin/sh", ["-c", "exec 9>>\(shellQuoted(path)) && flock 9 && : > \(shellQuoted(held)) && exec sleep 30"])
        defer {
            kill(holder.pid, SIGKILL)
            _ = try? holder.wait()
        }
        #expect(whenDirectoryChanges(dir.path) { FileManager.default.fileExists(atPath: held) })
        #expect(try FileLock.ifFree(path: path) == nil, "held by the other process")
        kill(holder.pid, SIGKILL)
        _ = try holder.wait(timeout: 5)
        #expect(try FileLock.ifFree(path: path) != nil, "the kernel released it when the holder died")
    }

    @Test func byteLocksOfOneFileExcludeOnlyAtTheirOwnByte() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/uploads.lock"
        let first = try #require(try ByteLock.ifFree(path: path, slot: 0x0123_4567_89ab))
        #expect(try ByteLock.ifFree(path: path, slot: 0x0123_4567_89ab) == nil, "held, even within one process")
        let other = try ByteLock.ifFree(path: path, slot: 0x0123_4567_89ac)
        #expect(other != nil, "another byte is another lock")
        first.unlock()
        first.unlock()  // twice is harmless
        #expect(try ByteLock.ifFree(path: path, slot: 0x0123_4567_89ab) != nil, "free once released")
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0, "the file holds no byte")
    }

    @Test func aByteLockHeldByAnotherProcessIsRefusedUntilItDies() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/uploads.lock"
        // python's fcntl module speaks F_OFD_SETLK as a plain fcntl call with a packed struct flock.
        let script = """
            import fcntl, os, struct, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
            fcntl.fcntl(fd, 37, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 42, 1, 0))  # F_OFD_SETLK
            open(sys.argv[2], "w").close()
            time.sleep(30)
            """
        let held = dir.path + "/held"
        let holder = try ChildProcess("/usr/bin/python3", ["-c", script, path, held])
        defer {
            kill(holder.pid, SIGKILL)
            _ = try? holder.wait()
        }
        #expect(whenDirectoryChanges(dir.path) { FileManager.default.fileExists(atPath: held) })
        #expect(try ByteLock.ifFree(path: path, slot: 42) == nil, "held by the other process")
        #expect(try ByteLock.ifFree(path: path, slot: 43) != nil)
        kill(holder.pid, SIGKILL)
        _ = try holder.wait(timeout: 5)
        #expect(try ByteLock.ifFree(path: path, slot: 42) != nil, "the kernel released it when the holder died")
    }

    @Test func aLockFileThatCannotBeOpenedNamesThePath() {
        #expect(throws: SystemError(call: "open", errno: .noSuchFileOrDirectory, path: "/nonexistent-ingest-test/a.lock")) {
            try FileLock.waiting(path: "/nonexistent-ingest-test/a.lock")
        }
    }
}
