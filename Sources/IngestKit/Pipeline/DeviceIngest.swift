import Foundation
import Logging
import Synchronization

/// One card given by its block device, from the device node to the unmount: what
/// `ingest --device` and `ingest watch` share.
///
/// 1. The node must be a block device udev knows, holding a file system.
/// 2. A device mounted at a system place (`/`, `/boot`, `/home`…) is refused before anything
///    else happens: a Raspberry Pi's root is on an SD card too.
/// 3. The device's lock (`locks/device-<kernel name>.lock`) is taken before mounting, so two
///    triggers for one card never both mount it; the volume's lock then covers the ingest.
/// 4. A mount at a place for removable media is used as it is; otherwise the file system is
///    mounted read-only (`ro,nosuid,nodev,noexec`) under the runtime directory.
/// 5. After the ingest, on every path (errors and stop requests included), what was mounted
///    here is unmounted and its directory removed. Another's mount is never touched.
public struct DeviceIngest: Sendable {
    public let state: StateDirectory
    public let policy: MountPolicy
    public let logger: Logger

    public init(state: StateDirectory, policy: MountPolicy, logger: Logger) {
        self.state = state
        self.policy = policy
        self.logger = logger
    }

    /// How long a card waits when another process ingests a card with the same identity (a
    /// cloned card in another reader): long enough for any card to finish, and the card's
    /// removal or a shutdown ends the wait at once.
    public static let cloneWait: Duration = .seconds(12 * 3600)

    /// Steps 1 to 4: the card at `node` checked, its device's lock taken and its file system
    /// found or mounted. What ``run(device:ingestor:sink:stop:)`` ingests, and all that
    /// `ingest mount-card` does (the ingest@ unit's privileged step), so both take a card by
    /// the same checks. The caller releases the lock; the mount is released by whoever owns
    /// it (``CardMount/release()``, or ``unmountPlace(ofDevice:)``).
    public func attach(device node: String) throws(IngestError) -> (mount: CardMount, lock: VolumeLock) {
        let card = try CardDevice.inspect(node: node)
        let table: MountTable
        do { table = try MountTable.current() } catch {
            throw .notACard(device: node, reason: "cannot read /proc/self/mountinfo: \(error)")
        }
        try policy.checkNotSystem(card.mounts(in: table), device: node)
        let lock = try state.lockDevice(kernelName: card.kernelName, node: node)
        do throws(IngestError) {
            return (try CardMount.prepare(card, policy: policy, logger: logger), lock)
        } catch {
            lock.release()
            throw error
        }
    }

    /// `ingest unmount-card`: unmounts whatever is mounted at the place ingest mounts the card
    /// of `node` (``MountPolicy/mountPoint(forKernelName:)``) and removes its directory;
    /// nothing else. The device need not exist any more: a card pulled out is unmounted by
    /// the name it had. Returns the place.
    public static func unmountPlace(ofDevice node: String, policy: MountPolicy) throws(IngestError) -> String {
        let kernelName = try CardDevice.kernelName(ofNode: node)
        let place = policy.mountPoint(forKernelName: kernelName)
        if let problem = CardMount.unmount(at: place) {
            throw .unmountFailed(device: node, mountPoint: place, reason: problem.reason)
        }
        return place
    }

    /// Ingests the card at `node` with `ingestor`. Ends with `.deviceBusy` when another
    /// process has this device: a second trigger, which the caller reports as a notice. A
    /// card whose identity another process is ingesting from another device waits for it.
    public func run(
        device node: String, ingestor: Ingestor, sink: some EventSink, stop: IngestStop = IngestStop()
    ) async -> IngestOutcome {
        let mount: CardMount
        let lock: VolumeLock
        do throws(IngestError) {
            (mount, lock) = try attach(device: node)
        } catch {
            return IngestOutcome(error: error)
        }
        defer { lock.release() }
        if mount.isOurs {
            logger.info("mounted the card read-only", metadata: ["device": "\(node)", "mount_point": "\(mount.path)"])
        }
        var ingestor = ingestor
        ingestor.volumeWait = Self.cloneWait
        let outcome = await ingestor.ingest(path: mount.path, sink: sink, stop: stop)
        if let problem = mount.release() {
            logger.warning(
                "could not unmount the card; unmount it by hand", metadata: ["mount_point": "\(mount.path)", "error": "\(problem)"])
        }
        return outcome
    }
}

/// A sink that drops every event (a daemon's per-file events when not `--json`; problems
/// still reach the log).
public struct DiscardingSink: EventSink {
    public init() {}
    public func emit(_ event: IngestEvent) {}
}
