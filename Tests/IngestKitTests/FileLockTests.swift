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
        let waiter = Thread {
            let lock = try? FileLock.waiting(path: path)
            taken.flag.store(lock != nil, ordering: .releasing)
        }
        waiter.start()
        try await Task.sleep(for: .milliseconds(200))
        let early = taken.flag.load(ordering: .acquiring)
        #expect(!early, "still waiting while the first holds it")
        first.unlock()
        let deadline = ContinuousClock.now + .seconds(5)
        while !taken.flag.load(ordering: .acquiring), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let late = taken.flag.load(ordering: .acquiring)
        #expect(late)
    }

    @Test func aLockAnotherProcessHoldsIsSeenAndFreedWhenItDies() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        // The shell locks with flock(1) on its descriptor 9, then becomes the sleep that holds it.
        let holder = try ChildProcess("/bin/sh", ["-c", "exec 9>>\(shellQuoted(path)) && flock 9 && exec sleep 30"])
        defer {
            kill(holder.pid, SIGKILL)
            _ = try? holder.wait()
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while try FileLock.ifFree(path: path) != nil, ContinuousClock.now < deadline { usleep(10_000) }
        #expect(try FileLock.ifFree(path: path) == nil, "held by the other process")
        kill(holder.pid, SIGKILL)
        _ = try holder.wait(timeout: 5)
        #expect(try FileLock.ifFree(path: path) != nil, "the kernel released it when the holder died")
    }

    @Test func unlockingRemovesTheFileOnlyIfThePathStillNamesIt() throws {
        let dir = TemporaryDirectory()
        let path = dir.path + "/a.lock"
        let lock = try #require(try FileLock.ifFree(path: path))
        #expect(lock.isStillAtPath)
        lock.unlock(removingFile: true)
        #expect(access(path, F_OK) != 0, "removed while still held")

        let replaced = try #require(try FileLock.ifFree(path: path))
        #expect(rename(path, dir.path + "/moved") == 0)
        try dir.write("a.lock", [])
        #expect(!replaced.isStillAtPath)
        replaced.unlock(removingFile: true)
        #expect(access(path, F_OK) == 0, "another's file at the path stays")
    }

    @Test func aLockFileThatCannotBeOpenedNamesThePath() {
        #expect(throws: SystemError(call: "open", errno: ENOENT, path: "/nonexistent-ingest-test/a.lock")) {
            try FileLock.waiting(path: "/nonexistent-ingest-test/a.lock")
        }
    }
}
