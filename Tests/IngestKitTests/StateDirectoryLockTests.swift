import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

@Suite struct StateDirectoryLockTests {
    @Test func uploadLocksShareOneFileAndLeaveNoFilePerUpload() throws {
        let dir = TemporaryDirectory()
        let state = try StateDirectory(path: dir.path)
        let lock = try #require(try state.lockUpload("0123456789ab"))
        #expect(try state.lockUpload("0123456789ab") == nil, "held: a second locker is refused")
        #expect(try state.lockUpload("0123456789ac") != nil, "another upload is another lock")
        lock.release()
        lock.release()  // twice is harmless
        #expect(try state.lockUpload("0123456789ab") != nil, "free again once released (and dropped here)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/locks") == ["uploads.lock"])
    }

    @Test func everyTwelveDigitUploadIDHasItsOwnByte() {
        #expect(StateDirectory.lockSlot(ofUpload: "000000000000") == 0)
        #expect(StateDirectory.lockSlot(ofUpload: "ffffffffffff") == 0xffff_ffff_ffff)
        #expect(StateDirectory.lockSlot(ofUpload: "d28f0eddb52a") != StateDirectory.lockSlot(ofUpload: "d28f0eddb52b"))
        #expect(StateDirectory.lockSlot(ofUpload: "not hex at all") >= 0)
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

    /// Lockers on separate open file descriptions, as separate processes are (OFD locks
    /// belong to the open file description, so two opens in one process exclude each other
    /// exactly as two processes do), each holding the lock for a moment and releasing it.
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
    }
}
