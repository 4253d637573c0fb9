import Foundation
import Glibc
import IngestKit
import IngestTestSupport
import Testing

/// A SeaweedFS bucket for card tests, and a configuration with small parts.
final class CardDestination {
    let server: SeaweedFS
    var bucket: String { server.bucket }
    let directory = TemporaryDirectory()
    let config: String

    init(bucket: String = "cards") throws {
        server = try SeaweedFS(bucket: bucket)
        config = try directory.write("ingest.toml", Array("""
            [upload]
            part_size = "5MiB"
            single_put_threshold = "5MiB"
            [s3]
            stall_timeout = "10s"
            [device]
            id = "station-9"
            """.utf8))
    }

    var arguments: [String] { ["--endpoint", server.endpoint, "--bucket", bucket] }

    /// The server's credentials and the test configuration; no systemd runtime directory.
    var environment: [String: String] {
        var environment = server.awsEnvironment
        environment["INGEST_CONFIG"] = config
        environment["RUNTIME_DIRECTORY"] = ""
        return environment
    }

    func keys() throws -> [String] {
        let listed = try server.aws(["s3api", "list-objects-v2", "--bucket", bucket, "--output", "json"])
        guard listed.status == 0 else { throw CommandFailed(command: "list-objects-v2", result: listed) }
        guard !listed.stdout.isEmpty,
            let json = try JSONSerialization.jsonObject(with: listed.stdout) as? [String: Any],
            let contents = json["Contents"] as? [[String: Any]]
        else { return [] }
        // The card's objects; its ASC MHL history and the bucket's marker aside.
        return contents.compactMap { $0["Key"] as? String }.filter { !$0.contains("/ascmhl/") && !$0.hasPrefix(".ingest/") }
    }

    func tags(_ key: String) throws -> [String: String] {
        let result = try server.aws(["s3api", "get-object-tagging", "--bucket", bucket, "--key", key, "--output", "json"])
        guard result.status == 0 else { throw CommandFailed(command: "get-object-tagging \(key)", result: result) }
        let json = try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any]
        return (json?["TagSet"] as? [[String: String]] ?? []).reduce(into: [:]) { $0[$1["Key"]!] = $1["Value"] }
    }

    /// Every object in the bucket is a file of `sums` (its path on the card → its xxh128):
    /// downloaded, it sums the same, and it carries `tags`.
    func expectObjects(
        from sums: [[UInt8]: String], tagged tags: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for key in try keys() {
            if !tags.isEmpty {
                let found = try self.tags(key)
                for (name, value) in tags { #expect(found[name] == value, "\(key): \(found)", sourceLocation: sourceLocation) }
            }
            let relative = try #require(
                sums.keys.first { key.hasSuffix("/" + String(decoding: $0, as: UTF8.self)) }, "no file for \(key)",
                sourceLocation: sourceLocation)
            #expect(try digest(key) == sums[relative], "\(key)", sourceLocation: sourceLocation)
        }
    }

    /// The xxh128 of the object's content, downloaded.
    func digest(_ key: String) throws -> String {
        let path = directory.path + "/download-\(UUID().uuidString)"
        defer { unlink(path) }
        let result = try server.aws(["s3api", "get-object", "--bucket", bucket, "--key", key, path])
        guard result.status == 0 else { throw CommandFailed(command: "get-object \(key)", result: result) }
        return try xxh128sum(path)
    }
}

/// The mount points the kernel shows now.
func mountPoints() throws -> [String] { try MountTable.current().entries.map(\.mountPoint) }

/// The events a running process has printed so far.
func eventsSoFar(_ child: ChildProcess) -> IngestRun {
    IngestRun(result: ProcessResult(status: 0, stdout: Data(child.standardOutputSoFar.utf8), stderr: child.standardErrorSoFar))
}

/// Waits for what a running ingest prints to satisfy `condition`. Not a timed assertion: the
/// limit only keeps a broken build from hanging the suite, and failing it is an error.
@discardableResult
func waitFor(
    _ what: String, in child: ChildProcess, limit: TimeInterval = 300, _ condition: (IngestRun) -> Bool
) throws -> IngestRun {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        let now = eventsSoFar(child)
        if condition(now) { return now }
        guard child.isRunning else { break }
        usleep(1000)
    }
    let now = eventsSoFar(child)
    if condition(now) { return now }
    throw CommandFailed(
        command: "ingest (never printed \(what))",
        result: ProcessResult(status: child.isRunning ? -1 : child.terminationStatus, stdout: Data(), stderr: now.stderr))
}

/// Stops `child` (SIGSTOP) once it has read `bytes`; fails if it ends first.
func stop(_ child: ChildProcess, whenItHasRead bytes: Int64, limit: TimeInterval = 120) throws {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline, child.isRunning {
        if let read = child.bytesRead, read >= bytes {
            kill(child.pid, SIGSTOP)
            return
        }
        usleep(500)
    }
    throw CommandFailed(command: "ingest (did not read \(bytes) bytes)", result: try child.wait(timeout: 5))
}

/// Writes a card's files: `small` photos in DCIM/100MEDIA, `big` videos of `bigMiB` in
/// DCIM/101MEDIA, and `after` more photos in DCIM/102MEDIA (read after the videos).
func populateCard(_ root: String, small: Int, big: Int = 0, bigMiB: Int = 0, after: Int = 0) throws {
    try sh("""
        cd \(shellQuoted(root))
        mkdir -p DCIM/100MEDIA DCIM/101MEDIA DCIM/102MEDIA
        for i in $(seq -w 1 \(small)); do head -c $((RANDOM * 4 + 1)) /dev/urandom > DCIM/100MEDIA/IMG_$i.JPG; done
        for i in $(seq -w 1 \(big)); do head -c \(bigMiB)M /dev/urandom > DCIM/101MEDIA/VID_$i.MP4; done
        for i in $(seq -w 1 \(after)); do head -c $((RANDOM * 4 + 1)) /dev/urandom > DCIM/102MEDIA/IMG_$i.JPG; done
        """)
}

/// A card of `sizeMiB` written by ``populateCard(_:small:big:bigMiB:after:)``, its files'
/// `xxh128sum`s taken, then unmounted and detached: pulled out, ready to be inserted.
func pulledOutCard(
    sizeMiB: Int, label: String, uuid: String = UUID().uuidString.lowercased(), imageName: String = "card.img",
    small: Int, big: Int = 0, bigMiB: Int = 0, after: Int = 0
) throws -> (card: LoopCard, sums: [[UInt8]: String]) {
    let card = try LoopCard(sizeMiB: sizeMiB, label: label, uuid: uuid, imageName: imageName)
    try populateCard(card.mountPoint, small: small, big: big, bigMiB: bigMiB, after: after)
    let sums = try xxh128sums(under: card.mountPoint)
    try card.detach()
    return (card, sums)
}

/// `ingest --device`: a real loop device holding an ext4 card, udev, mount(2), SeaweedFS.
@Suite(.serialized, needsRoot)
final class DeviceIngestTests {
    let destination: CardDestination

    init() throws { destination = try CardDestination() }

    func ingest(_ arguments: [String], state: TemporaryDirectory) throws -> IngestRun {
        try IngestRun.ingest(
            arguments + ["--state-dir", state.path, "--json"] + destination.arguments, environment: destination.environment)
    }

    @Test(.timeLimit(.minutes(5)))
    func anUnmountedCardIsMountedReadOnlyIngestedWithItsIdentityAsTagsAndUnmounted() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let (card, oracle) = try pulledOutCard(sizeMiB: 64, label: "DEV_CARD", small: 12)
        let imageBefore = try xxh128sum(card.image)
        try card.insert()
        let state = TemporaryDirectory()
        let expectedMount = "/run/ingest/cards/\(card.kernelName)"

        let run = try ingest(["--device", card.device], state: state)

        #expect(run.status == 0, "\(run.stderr)")
        let volume = try #require(run.events("volume").first)
        #expect(volume.string("mount_point") == expectedMount, "mounted under the runtime directory")
        #expect(volume.string("fs_uuid") == card.uuid)
        #expect(volume.string("key") == "uuid:\(card.uuid)")
        #expect(run.events("uploaded").count == oracle.count)
        #expect(try destination.keys().count == oracle.count)
        try destination.expectObjects(from: oracle, tagged: ["fs-uuid": card.uuid, "fs-label": "DEV_CARD", "device": "station-9"])
        #expect(try !mountPoints().contains(expectedMount), "what ingest mounted, it unmounted")
        #expect(!FileManager.default.fileExists(atPath: expectedMount), "and removed its directory")
        try card.detach()
        #expect(try xxh128sum(card.image) == imageBefore, "the read-only mount wrote nothing to the card")
    }

    @Test(.timeLimit(.minutes(3)))
    func aDeviceMountedAtASystemPlaceANonBlockPathAndAnEmptyDeviceAreRefusedClearly() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let state = TemporaryDirectory()
        // Mounted where no card belongs (a temporary directory, like / or /home would be).
        let mounted = try LoopCard(sizeMiB: 16, label: "SYSTEM")
        let refused = try IngestRun.ingest(
            ["--device", mounted.device, "--no-upload", "--state-dir", state.path], environment: destination.environment)
        #expect(refused.status == 66, "\(refused.stderr)")
        #expect(refused.stderr.contains("refusing to ingest \(mounted.device)"))
        #expect(refused.stderr.contains("mounted at \(mounted.mountPoint)"))
        #expect(try mountPoints().contains(mounted.mountPoint), "another's mount is left alone")

        let notBlock = try IngestRun.ingest(
            ["--device", mounted.image, "--no-upload", "--state-dir", state.path], environment: destination.environment)
        #expect(notBlock.status == 66)
        #expect(notBlock.stderr.contains("not a block device"))

        let blank = TemporaryDirectory()
        let device = try sh("truncate -s 8M \(blank.path)/blank.img && losetup -f --show \(blank.path)/blank.img && udevadm settle -t 10")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        defer { _ = try? sh("losetup -d \(device)") }
        let empty = try IngestRun.ingest(
            ["--device", device, "--no-upload", "--state-dir", state.path], environment: destination.environment)
        #expect(empty.status == 66)
        #expect(empty.stderr.contains("holds no file system"))

        // A file system outside [device] file_systems is refused before the kernel parses it.
        let ext2 = TemporaryDirectory()
        let other = try sh("""
            truncate -s 8M \(ext2.path)/ext2.img && mkfs.ext2 -q -F -L OTHER \(ext2.path)/ext2.img \
            && losetup -f --show \(ext2.path)/ext2.img && udevadm settle -t 10
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        defer { _ = try? sh("losetup -d \(other)") }
        let refusedType = try IngestRun.ingest(
            ["--device", other, "--no-upload", "--state-dir", state.path], environment: destination.environment)
        #expect(refusedType.status == 66, "\(refusedType.stderr)")
        #expect(refusedType.stderr.contains("claims to be ext2"), "\(refusedType.stderr)")
        #expect(refusedType.stderr.contains("[device] file_systems"))
        let kernelName = String(other.split(separator: "/").last ?? "")
        #expect(!(try mountPoints().contains { $0.hasSuffix("/" + kernelName) }), "nothing was mounted")

        let both = try IngestRun.ingest(["/tmp", "--device", device, "--no-upload"])
        #expect(both.status == 64)
        #expect(both.stderr.contains("either PATH or --device"))
        let neither = try IngestRun.ingest(["run", "--no-upload"])
        #expect(neither.status == 64)
        #expect(neither.stderr.contains("--device"))
    }

    @Test(.timeLimit(.minutes(5)))
    func aSecondDeviceRunOnACardBeingIngestedEndsAtOnceAndTheCardIsIngestedOnce() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let card = try pulledOutCard(sizeMiB: 400, label: "TWICE", small: 5, big: 1, bigMiB: 300).card
        try sh("sync; echo 3 > /proc/sys/vm/drop_caches")
        try card.insert()
        let state = TemporaryDirectory()
        let arguments = ["--device", card.device, "--no-upload", "--state-dir", state.path, "--json"]

        let first = try IngestRun.start(arguments, environment: destination.environment)
        try stop(first, whenItHasRead: 32 << 20)
        let second = try IngestRun.ingest(arguments, environment: destination.environment)
        kill(first.pid, SIGCONT)
        let firstRun = IngestRun(result: try first.wait())

        #expect(second.status == 0, "a second trigger is not a failure: \(second.stderr)")
        #expect(second.stderr.contains("is being ingested by another ingest process"))
        #expect(second.events("notice").first?.string("code") == "busy")
        #expect(second.events("staged").isEmpty)
        #expect(firstRun.status == 0, "\(firstRun.stderr)")
        #expect(firstRun.summary?.int("staged") == 6)
        #expect(try !mountPoints().contains("/run/ingest/cards/\(card.kernelName)"))
    }

    /// Two cards cloned from one image share a file-system UUID. Inserted at once, the
    /// second is no second trigger: it waits for the first and is ingested too.
    @Test(.timeLimit(.minutes(5)))
    func aClonedCardInsertedWhileItsTwinIsIngestedWaitsAndIsIngestedToo() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let uuid = UUID().uuidString.lowercased()
        let first = try pulledOutCard(sizeMiB: 200, label: "CLONE", uuid: uuid, small: 3, big: 1, bigMiB: 120)
        let twin = try LoopCard(sizeMiB: 32, label: "CLONE", uuid: uuid, imageName: "twin.img")
        try sh("cd \(twin.mountPoint) && mkdir -p DCIM/TWIN && for i in 1 2 3 4; do head -c 5000 /dev/urandom > DCIM/TWIN/T_$i.JPG; done")
        let twinSums = try xxh128sums(under: twin.mountPoint)
        try twin.detach()
        try sh("sync; echo 3 > /proc/sys/vm/drop_caches")
        try first.card.insert()
        try twin.insert()
        let state = TemporaryDirectory()
        let arguments = { (device: String) in ["--device", device, "--no-upload", "--state-dir", state.path, "--json"] }

        let one = try IngestRun.start(arguments(first.card.device), environment: destination.environment)
        try stop(one, whenItHasRead: 16 << 20)
        let other = try IngestRun.start(arguments(twin.device), environment: destination.environment)
        sleep(3)
        #expect(other.isRunning, "the twin waits while its clone holds the identity")
        kill(one.pid, SIGCONT)
        let oneRun = IngestRun(result: try one.wait())
        let otherRun = IngestRun(result: try other.wait())
        #expect(oneRun.status == 0, "\(oneRun.stderr)")
        #expect(otherRun.status == 0, "\(otherRun.stderr)")
        #expect(otherRun.events("notice").isEmpty, "not reported busy")
        #expect(oneRun.summary?.int("staged") == first.sums.count)
        #expect(otherRun.summary?.int("staged") == twinSums.count)
        #expect(Set(otherRun.events("staged").compactMap { $0.string("xxh128") }) == Set(twinSums.values))
    }

    @Test(.timeLimit(.minutes(8)))
    func aCardPulledMidRunEndsStagingCleanlyUploadsWhatWasStagedAndFinishesWhenReinserted() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let (card, oracle) = try pulledOutCard(sizeMiB: 900, label: "PULLED", small: 80, big: 4, bigMiB: 150, after: 40)
        let pristine = card.directory.path + "/pristine.img"
        try sh("cp --sparse=always \(card.image) \(pristine); sync; echo 3 > /proc/sys/vm/drop_caches")
        try card.insert()
        let state = TemporaryDirectory()
        let mountPoint = "/run/ingest/cards/\(card.kernelName)"

        let running = try IngestRun.start(
            ["--device", card.device, "--state-dir", state.path, "--json"] + destination.arguments,
            environment: destination.environment)
        let before = try waitFor("its first staged files", in: running) { !$0.events("staged").isEmpty }
        kill(running.pid, SIGSTOP)
        try #require(before.events("staged").count < oracle.count, "the card is pulled while it is still being read")
        // The card goes: the device shrinks to nothing, so every read fails as a pulled card's do.
        try sh("truncate -s 0 \(card.image) && losetup -c \(card.device) && sync && echo 3 > /proc/sys/vm/drop_caches")
        kill(running.pid, SIGCONT)
        let pulled = IngestRun(result: try running.wait())

        #expect(pulled.status == 74, "the card failed: exit 74: \(pulled.stderr)")
        #expect(pulled.stderr.contains("reinsert the card"))
        let staged = Set(pulled.events("staged").compactMap { $0.string("path") })
        let uploaded = Set(pulled.events("uploaded").compactMap { $0.string("path") })
        #expect(!staged.isEmpty)
        #expect(uploaded == staged, "every file staged before the pull was uploaded before ingest exited")
        #expect(pulled.events("failed").allSatisfy { $0.string("reason") == "io-error" })
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.partial").isEmpty)
        let status = try #require(
            try IngestRun.ingest(["status", "--state-dir", state.path, "--json"]).events("status").first)
        #expect(status.int("uploads_pending") == 0)
        #expect(status.int("files_uploaded") == staged.count, "the journal agrees with what was reported")
        #expect(try !mountPoints().contains(mountPoint), "a pulled card is unmounted too")

        // Inserted again, whole: the rest is read and uploaded, nothing twice.
        try card.detach()
        try sh("cp --sparse=always \(pristine) \(card.image)")
        try card.insert()
        let again = try ingest(["--device", card.device], state: state)
        #expect(again.status == 0, "\(again.stderr)")
        let rest = Set(again.events("uploaded").compactMap { $0.string("path") })
        #expect(rest.isDisjoint(with: uploaded), "nothing uploaded twice")
        #expect(rest.count + uploaded.count == oracle.count)
        #expect(again.summary?.int("known") == staged.count, "what was staged is not read again")
        #expect(try destination.keys().count == oracle.count)
    }
}
