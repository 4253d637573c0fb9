import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

@Suite struct StateDirectoryLockTests {
    func lockFiles(_ state: StateDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: state.path + "/locks").filter { $0.hasPrefix("upload-") }
    }

    @Test func anUploadsLockFileExistsWhileItIsHeldAndGoesWhenReleased() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let lock = try #require(try state.lockUpload("0123456789ab"))
        #expect(try lockFiles(state) == ["upload-0123456789ab.lock"])
        #expect(try state.lockUpload("0123456789ab") == nil, "held: a second locker is refused")
        lock.release()
        #expect(try lockFiles(state).isEmpty)
        lock.release()  // twice is harmless

        #expect(try state.lockUpload("0123456789ab") != nil, "free again once released (and dropped here)")
        #expect(try lockFiles(state).isEmpty, "dropping the lock releases it too")
    }

    @Test func aVolumesLockFileStays() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let volume = VolumeIdentity(
            key: "path:/srv/card", rootPath: "/srv/card", mountPoint: "/", pathInFileSystem: "/srv/card", fsType: "ext4",
            device: nil)
        try state.lockVolume(volume).release()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/locks").count == 1)
    }

    /// Lockers on separate open file descriptions, as separate processes are (`flock` locks
    /// belong to the open file description, so two opens in one process exclude each other
    /// exactly as two processes do). Each holds the lock for a moment and releases it, which
    /// removes the file, while the others open, lock and check the same path: without the
    /// inode check, one that opened the old file and another that created the new one would
    /// both hold "the" lock.
    @Test(.timeLimit(.minutes(1)))
    func lockersRacingForOneUploadNeverBothHoldIt() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let holders = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let acquired = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                guard let lock = try? state.lockUpload("feedfacecafe") else { continue }
                if holders.add(1, ordering: .sequentiallyConsistent).newValue > 1 {
                    overlaps.add(1, ordering: .sequentiallyConsistent)
                }
                acquired.add(1, ordering: .relaxed)
                sched_yield()
                holders.subtract(1, ordering: .sequentiallyConsistent)
                lock.release()
            }
        }
        #expect(overlaps.load(ordering: .sequentiallyConsistent) == 0, "two lockers held one upload's lock at once")
        #expect(acquired.load(ordering: .relaxed) > 100, "the race was run: \(acquired.load(ordering: .relaxed)) acquisitions")
        #expect(try lockFiles(state).isEmpty)
    }
}
