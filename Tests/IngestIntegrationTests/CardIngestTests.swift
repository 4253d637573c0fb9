import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The real binary on real cards: ext4 images on loop devices, udev, strace, xxh128sum.
@Suite(.serialized, needsRoot)
struct CardIngestTests {
    /// A card like a drone's: 500+ files in nested folders, one over 1 GiB, awkward names, an
    /// empty file, and the things a card must not crash us with: a FIFO, a symlink, a file
    /// nobody may read.
    static func populateFieldCard(_ root: String) throws {
        let photos = TemporaryDirectory()
        try sh("""
            cd \(shellQuoted(root))
            for d in 100MEDIA 101MEDIA 102MEDIA 103MEDIA 104MEDIA; do
              mkdir -p DCIM/$d/RAW
              for i in $(seq -w 1 50); do head -c $((RANDOM * 3 + 1)) /dev/urandom > DCIM/$d/DJI_0$i.JPG; done
              for i in $(seq -w 1 50); do head -c $((RANDOM + 1)) /dev/urandom > DCIM/$d/RAW/DJI_0$i.DNG; done
            done
            mkdir -p 'MISC/Flight logs' 'MISC/日志'
            echo "takeoff 12:03" > 'MISC/Flight logs/flight log – été 2026.txt'
            echo "降落" > 'MISC/日志/飞行 记录.txt'
            : > MISC/empty.marker
            head -c 777 /dev/urandom > "MISC/$(printf 'caf\\351 cr\\350me.jpg')"  # a Latin-1 name, not UTF-8
            head -c 1100M /dev/urandom > DCIM/100MEDIA/DJI_0999.MP4
            mkfifo MISC/fifo
            ln -s ../DCIM/100MEDIA/DJI_001.JPG MISC/latest.jpg
            head -c 4096 /dev/urandom > MISC/secret.bin && chmod 000 MISC/secret.bin
            mkdir -p .Trashes/501 && echo x > .Trashes/501/old.jpg && echo y > DCIM/._DJI_001.JPG
            """)
        _ = photos
    }

    @Test func everyStagedCopyMatchesXXH128SumAndSpecialFilesAreReportedNotFatal() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let card = try LoopCard(sizeMiB: 1600, label: "DRONE_CARD")
        try Self.populateFieldCard(card.mountPoint)
        try card.seal()
        let state = TemporaryDirectory()
        try sh("chown nobody:nogroup \(state.path)")

        // As an unprivileged user, so that the mode-000 file really is unreadable.
        let first = try IngestRun.ingest([card.mountPoint, "--state-dir", state.path, "--json", "--no-upload"], asUser: "nobody")

        // The card was known by its udev identity.
        let volume = try #require(first.events("volume").first)
        #expect(volume.string("fs_uuid") == card.uuid)
        #expect(volume.string("fs_label") == "DRONE_CARD")
        #expect(volume.string("key") == "uuid:\(card.uuid)")

        // Every staged fingerprint is what xxh128sum says of the source, and the staged copy
        // under that name has that digest too.
        let oracle = try xxh128sums(under: card.mountPoint)
        let staged = first.events("staged")
        #expect(staged.count == oracle.count - 3, "all readable files but litter (2) and the unreadable one")
        #expect(staged.count >= 500)
        for event in staged {
            let path = try #require(event.string("path"))
            let digest = try #require(event.string("xxh128"))
            if !path.contains("\\x") { #expect(oracle[Array(path.utf8)] == digest, "\(path)") }
            let copy = "\(state.path)/staging/\(digest.prefix(2))/\(digest)"
            #expect(try xxh128sum(copy) == digest, "staged copy of \(path)")
        }
        #expect(staged.contains { $0.int("size")! > 1 << 30 }, "the file over 1 GiB")
        #expect(staged.contains { $0.string("path") == "MISC/empty.marker" && $0.int("size") == 0 })
        #expect(staged.contains { $0.string("path") == "MISC/日志/飞行 记录.txt" })
        let latin1 = try #require(staged.first { $0.string("path") == "MISC/caf\\xE9 cr\\xE8me.jpg" })
        let latin1Path = Array("MISC/caf".utf8) + [0xE9] + Array(" cr".utf8) + [0xE8] + Array("me.jpg".utf8)
        #expect(oracle[latin1Path] == latin1.string("xxh128"), "a name that is not UTF-8 is staged under its raw bytes")
        #expect(first.events("notice").contains { $0.string("code") == "name-not-utf8" })

        // The special cases are reported, never fatal.
        let skipped = Dictionary(first.events("skipped").map { ($0.string("path")!, $0.string("reason")!) }, uniquingKeysWith: { a, _ in a })
        #expect(skipped["MISC/fifo"] == "special-file")
        #expect(skipped["MISC/latest.jpg"] == "symlink")
        let failed = first.events("failed")
        #expect(failed.map { $0.string("path") } == ["MISC/secret.bin"])
        #expect(failed.first?.string("reason") == "unreadable")
        #expect(first.events("notice").contains { $0.string("path") == "MISC/empty.marker" && $0.string("code") == "empty-file" })
        #expect(first.status == 1, "a file could not be read: exit 1 (partial), and it stays pending")
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.partial").isEmpty)

        // What status says agrees: the unreadable file is pending with its reason.
        let status = try IngestRun.ingest(["status", "--state-dir", state.path, "--json"])
        let counts = try #require(status.events("status").first)
        #expect(counts.int("files_staged") == staged.count)
        #expect(counts.int("files_pending") == 1)
    }

    @Test func aSecondIngestOfTheSameCardStagesNothingAndOpensNoCardFile() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let card = try LoopCard(sizeMiB: 64, label: "RESCAN")
        try sh("""
            cd \(card.mountPoint) && mkdir -p DCIM/100 DCIM/101
            for i in $(seq 1 40); do head -c $((RANDOM * 10)) /dev/urandom > DCIM/10$((i % 2))/IMG_$i.JPG; done
            """)
        try card.seal()
        let state = TemporaryDirectory()
        let arguments = [card.mountPoint, "--no-upload", "--state-dir", state.path, "--json"]

        let first = try straced(arguments, card: card.mountPoint, traceDirectory: state.path + "/first.trace")
        #expect(first.run.status == 0)
        #expect(first.run.summary?.int("staged") == 40)
        #expect(first.cardFileOpens == 40, "strace sees one open per file: the counting works")

        let second = try straced(arguments, card: card.mountPoint, traceDirectory: state.path + "/second.trace")
        #expect(second.run.status == 0)
        #expect(second.run.summary?.int("staged") == 0)
        #expect(second.run.summary?.int("known") == 40)
        #expect(second.cardFileOpens == 0, "a rescan of an ingested card only calls stat")
    }

    /// Runs ingest under `strace -f -y -e trace=open,openat,openat2` and counts the opens of
    /// card files that are not directories (relative to the card's root or to any folder
    /// beneath it: files are opened from their folder's descriptor).
    func straced(_ arguments: [String], card: String, traceDirectory: String) throws -> (run: IngestRun, cardFileOpens: Int) {
        let traceFile = traceDirectory
        let result = try run(
            "/usr/bin/strace", ["-f", "-y", "-qq", "-e", "trace=open,openat,openat2", "-o", traceFile, IngestBinary.path] + arguments,
            environment: IngestRun.environment)
        let trace = try String(contentsOfFile: traceFile, encoding: .utf8)
        let opens = trace.split(separator: "\n").filter { line in
            (line.contains("openat(") || line.contains("open("))
                && !line.contains("O_DIRECTORY")
                && (line.contains("<\(card)>") || line.contains("<\(card)/") || line.contains("\"\(card)/"))
        }
        return (IngestRun(result: result), opens.count)
    }

    @Test func aFileTruncatedMidCopyLeavesNoStagedCopyAndTheNextRunFinishesIt() throws {
        let card = TemporaryDirectory()
        let big = card.path + "/DCIM/DJI_0001.MP4"
        try sh("mkdir -p \(card.path)/DCIM && head -c 1G /dev/urandom > \(big) && echo small > \(card.path)/DCIM/note.txt")
        let original = try xxh128sum(big)
        try sh("cp \(big) \(card.path)/../original.mp4.\(getpid())")
        defer { unlink(card.path + "/../original.mp4.\(getpid())") }
        let state = TemporaryDirectory()

        let ingest = try IngestRun.start([card.path, "--no-upload", "--state-dir", state.path, "--json"])
        try stopWhenItHasRead(ingest, atLeast: 64 << 20)
        try sh("truncate -s 1M \(big)")  // the card lost the rest of the file
        kill(ingest.pid, SIGCONT)
        let interrupted = IngestRun(result: try ingest.wait())

        #expect(interrupted.status == 1)
        let failed = try #require(interrupted.events("failed").first)
        #expect(failed.string("path") == "DCIM/DJI_0001.MP4")
        #expect(failed.string("reason") == "changed")
        #expect(!FileManager.default.fileExists(atPath: "\(state.path)/staging/\(original.prefix(2))/\(original)"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.partial").isEmpty)

        // The card comes back whole: the next run copies the file, and only that file.
        try sh("cp \(card.path)/../original.mp4.\(getpid()) \(big)")
        let next = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path, "--json"])
        #expect(next.status == 0)
        #expect(next.events("staged").map { $0.string("path") } == ["DCIM/DJI_0001.MP4"])
        #expect(next.events("staged").first?.string("xxh128") == original)
        #expect(try xxh128sum("\(state.path)/staging/\(original.prefix(2))/\(original)") == original)
    }

    @Test func aCardFailingMidCopyStopsTheRunCleanlyAndFinishesWhenReinserted() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        let card = try LoopCard(sizeMiB: 700, label: "PULLED")
        try sh("""
            cd \(card.mountPoint) && mkdir -p DCIM
            for i in 1 2 3 4 5; do head -c 120M /dev/urandom > DCIM/VID_$i.MP4; done
            """)
        try card.seal()
        let oracle = try xxh128sums(under: card.mountPoint)
        let pristine = card.directory.path + "/pristine.img"
        try sh("cp --sparse=always \(card.image) \(pristine)")
        let state = TemporaryDirectory()

        let ingest = try IngestRun.start([card.mountPoint, "--no-upload", "--state-dir", state.path, "--json"])
        try stopWhenItHasRead(ingest, atLeast: 32 << 20)
        // The card goes: the device shrinks under the file system, so every read past its
        // start fails with EIO, as a reader whose card was pulled does.
        try sh("truncate -s 4M \(card.image) && losetup -c \(card.device) && sync && echo 3 > /proc/sys/vm/drop_caches")
        kill(ingest.pid, SIGCONT)
        let pulled = IngestRun(result: try ingest.wait())

        #expect(pulled.status == 74, "the card failed: exit 74 (\(pulled.stderr))\n\(pulled.result.stdoutText)")
        #expect(pulled.stderr.contains("reinsert the card"))
        #expect(pulled.events("staged").isEmpty)
        #expect(pulled.events("failed").allSatisfy { $0.string("reason") == "io-error" })
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path + "/staging/.partial").isEmpty)
        for digest in oracle.values {
            #expect(!FileManager.default.fileExists(atPath: "\(state.path)/staging/\(digest.prefix(2))/\(digest)"))
        }

        // Reinserted whole, the card is recognised and finished.
        try card.detach()
        try sh("cp --sparse=always \(pristine) \(card.image)")
        try card.attach(readOnly: true)
        let again = try IngestRun.ingest([card.mountPoint, "--no-upload", "--state-dir", state.path, "--json"])
        #expect(again.status == 0, "\(again.stderr)")
        let staged = again.events("staged")
        #expect(staged.count == 5)
        for event in staged {
            #expect(oracle[Array(event.string("path")!.utf8)] == event.string("xxh128"))
        }
    }

    /// Issue 11, defect 6: three files whose paths are longer than PATH_MAX, first in scan
    /// order, were taken for a failing card: exit 74, and the files after them were never
    /// staged, on any later run either.
    @Test func filesWhosePathsAreLongerThanPathMaxAreIngestedAndSoAreTheFilesAfterThem() throws {
        let card = TemporaryDirectory()
        defer { _ = try? sh("rm -rf \(shellQuoted(card.path))/A") }  // beyond PATH_MAX: rm walks it by descriptors
        // 24 folders of 200 bytes (4.8 KB of path) under A/, which sorts before DCIM/.
        let listing = try sh("""
            cd \(shellQuoted(card.path))
            mkdir DCIM && for i in $(seq -w 1 20); do head -c $((RANDOM * 3 + 1)) /dev/urandom > DCIM/IMG_$i.JPG; done
            (cd DCIM && xxh128sum IMG_*.JPG | sed 's|  |  DCIM/|')
            name=$(printf 'd%.0s' $(seq 200)) deep=A
            mkdir A && cd A
            for i in $(seq 24); do mkdir "$name" && cd "$name"; deep="$deep/$name"; done
            for f in 1 2 3; do head -c $((100000 * f)) /dev/urandom > deep$f.bin; xxh128sum deep$f.bin | sed "s|  |  $deep/|"; done
            """)
        let oracle = Dictionary(uniqueKeysWithValues: listing.split(separator: "\n").map { line in
            (String(line.dropFirst(34)), String(line.prefix(32)))
        })
        #expect(oracle.count == 23)
        #expect(oracle.keys.filter { $0.utf8.count > 4096 }.count == 3)
        let state = TemporaryDirectory()
        let arguments = [card.path, "--no-upload", "--state-dir", state.path, "--json"]

        let first = try IngestRun.ingest(arguments)

        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.events("failed").isEmpty)
        let staged = first.events("staged")
        #expect(Dictionary(uniqueKeysWithValues: staged.map { ($0.string("path")!, $0.string("xxh128")!) }) == oracle)
        for digest in oracle.values {
            #expect(try xxh128sum("\(state.path)/staging/\(digest.prefix(2))/\(digest)") == digest)
        }
        let again = try IngestRun.ingest(arguments)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.summary?.int("staged") == 0)
        #expect(again.summary?.int("known") == 23, "the deep files are journalled like any other")
    }

    /// Files that cannot be read on a card that is still there fail alone: three in a row
    /// used to be taken for a pulled card (exit 74), and the files after them were never
    /// read. Here the first three files' blocks lie past the end of the device (the card's
    /// last sectors unreadable since before the run), so reading them fails with EIO.
    @Test func unreadableFilesInARowOnACardStillThereFailAloneAndTheRestIsStaged() throws {
        let card = try LoopCard(sizeMiB: 64, label: "BADSECTORS")
        try sh("""
            cd \(card.mountPoint) && mkdir DCIM
            for i in 1 2 3; do head -c 65536 /dev/urandom > DCIM/A_BAD_$i.JPG; done
            for i in 1 2 3 4 5; do head -c $((RANDOM * 3 + 1)) /dev/urandom > DCIM/IMG_$i.JPG; done
            """)
        let oracle = try xxh128sums(under: card.mountPoint).filter { !String(decoding: $0.key, as: UTF8.self).contains("BAD") }
        try card.detach()
        // Point the three files' extents near the end of the file system (i_block[5] is the
        // first extent's start), then cut the device short of them.
        let geometry = try sh("dumpe2fs -h \(card.image) 2>/dev/null | awk -F: '/^Block count/{c=$2} /^Block size/{s=$2} END{print c, s}'")
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(geometry.count == 2, "dumpe2fs gives the block count and size")
        let (blocks, blockSize) = (geometry[0], geometry[1])
        for i in 1...3 {
            try sh("debugfs -w -R 'sif /DCIM/A_BAD_\(i).JPG block[5] \(blocks - 1000 + i * 100)' \(card.image) 2>&1")
        }
        try card.attach(readOnly: true)
        try sh("truncate -s \((blocks - 1100) * blockSize) \(card.image) && losetup -c \(card.device) && echo 3 > /proc/sys/vm/drop_caches")
        let state = TemporaryDirectory()
        let arguments = [card.mountPoint, "--no-upload", "--state-dir", state.path, "--json"]

        let first = try IngestRun.ingest(arguments)

        #expect(first.status == 1, "some files could not be read: exit 1, not 74: \(first.stderr)")
        let failed = first.events("failed")
        #expect(failed.compactMap { $0.string("path") } == ["DCIM/A_BAD_1.JPG", "DCIM/A_BAD_2.JPG", "DCIM/A_BAD_3.JPG"])
        #expect(failed.allSatisfy { $0.string("reason") == "io-error" })
        let staged = first.events("staged")
        #expect(Dictionary(uniqueKeysWithValues: staged.map { (Array($0.string("path")!.utf8), $0.string("xxh128")!) }) == oracle)
        let again = try IngestRun.ingest(arguments)
        #expect(again.status == 1)
        #expect(again.summary?.int("known") == 5)
        #expect(again.events("failed").count == 3, "the unreadable files stay pending and are tried again")
    }

    /// `Int64(tv_sec) * 1_000_000_000` trapped on a file dated after 2262, which an ext4
    /// card with 256-byte inodes holds: the run died with SIGILL.
    @Test func aFileDatedInTheYear2300OnAnExt4CardIsIngestedWithoutACrash() throws {
        let card = try LoopCard(sizeMiB: 32, label: "FUTURE")
        try sh("""
            cd \(card.mountPoint) && mkdir DCIM
            head -c 300000 /dev/urandom > DCIM/FUTURE.JPG && head -c 1000 /dev/urandom > DCIM/NOW.JPG
            touch -d 2300-01-01 DCIM/FUTURE.JPG
            """)
        try card.seal()
        let seconds = try sh("stat -c %Y \(card.mountPoint)/DCIM/FUTURE.JPG").trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(seconds == "10413792000", "the card holds the year 2300 (256-byte inodes)")
        let oracle = try xxh128sums(under: card.mountPoint)
        let state = TemporaryDirectory()
        let arguments = [card.mountPoint, "--no-upload", "--state-dir", state.path, "--json"]

        let first = try IngestRun.ingest(arguments)

        #expect(first.status == 0, "\(first.stderr)")
        let staged = first.events("staged")
        #expect(staged.count == 2)
        for event in staged { #expect(oracle[Array(event.string("path")!.utf8)] == event.string("xxh128")) }
        let again = try IngestRun.ingest(arguments)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.summary?.int("known") == 2, "the time held at the limit matches the journal's next time")
    }

    @Test func aSecondIngestOfACardBeingIngestedSaysBusyAndTheFirstFinishes() throws {
        let card = TemporaryDirectory()
        try sh("mkdir -p \(card.path)/DCIM && head -c 512M /dev/urandom > \(card.path)/DCIM/VID.MP4")
        let state = TemporaryDirectory()
        let first = try IngestRun.start([card.path, "--no-upload", "--state-dir", state.path, "--json"])
        try stopWhenItHasRead(first, atLeast: 16 << 20)

        let second = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state.path])
        kill(first.pid, SIGCONT)
        let firstRun = IngestRun(result: try first.wait())

        #expect(second.status == 75)
        #expect(second.stderr.contains("being ingested by another ingest process"))
        #expect(firstRun.status == 0)
        #expect(firstRun.summary?.int("staged") == 1)
    }

    @Test func twoCardsIngestAtOnceIntoOneJournal() throws {
        let cards = [TemporaryDirectory(), TemporaryDirectory()]
        for card in cards {
            try sh("mkdir -p \(card.path)/DCIM && for i in $(seq 1 60); do head -c 200000 /dev/urandom > \(card.path)/DCIM/$i.JPG; done")
        }
        let state = TemporaryDirectory()
        let runs = try cards.map { try IngestRun.start([$0.path, "--no-upload", "--state-dir", state.path, "--json"]) }
        let results = try runs.map { IngestRun(result: try $0.wait()) }
        for result in results {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.summary?.int("staged") == 60)
        }
        let status = try IngestRun.ingest(["status", "--state-dir", state.path, "--json"])
        #expect(status.events("status").first?.int("files_staged") == 120)
    }

    /// The video fits the staging disk, not the space left on it: that space comes back (as
    /// uploads finish), so the run stops with 73 rather than failing the file. (A file larger
    /// than the whole disk fails alone: QuarantineTests.)
    @Test func aFullStagingDiskEndsWithAClearErrorAndLosesNothing() throws {
        let stagingDisk = try LoopCard(sizeMiB: 64, label: "STATE")
        try sh("head -c 32M /dev/zero > \(stagingDisk.mountPoint)/filler")
        let card = TemporaryDirectory()
        try sh("mkdir -p \(card.path)/DCIM && head -c 1M /dev/urandom > \(card.path)/DCIM/a.JPG && head -c 40M /dev/urandom > \(card.path)/DCIM/b.MP4")
        let state = stagingDisk.mountPoint + "/state"

        let full = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state, "--reserve", "0", "--json"])

        #expect(full.status == 73, "\(full.stderr)")
        #expect(full.summary?.int("exit_status") == 73, "the summary says the status the run exits with")
        #expect(full.stderr.contains("is full"))
        #expect(full.stderr.contains("Nothing was lost"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: state + "/staging/.partial").isEmpty)
        let oracle = try xxh128sums(under: card.path)
        #expect(oracle.count == 2, "the card is untouched")

        // With room, the same journal finishes the card.
        try sh("cp -a \(state) \(card.path)/../state.\(getpid())")
        let roomy = card.path + "/../state.\(getpid())"
        defer { _ = try? sh("rm -rf \(roomy)") }
        let retry = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", roomy, "--reserve", "0", "--json"])
        #expect(retry.status == 0, "\(retry.stderr)")
        let stagedFirst = full.events("staged").map { $0.string("xxh128")! }
        let stagedRetry = retry.events("staged").map { $0.string("xxh128")! }
        #expect(Set(stagedFirst).isDisjoint(with: stagedRetry), "what was staged before the disk filled is not copied again")
        #expect(Set(stagedFirst + stagedRetry) == Set(oracle.values))
    }

    /// Spare files keep the blocks of small copies for the next copies to be written over: on
    /// a staging disk that is full but for them, they give their blocks back first, and the
    /// card is staged.
    @Test func sparesGiveTheirBlocksBackBeforeTheStagingDiskIsCalledFull() throws {
        let stagingDisk = try LoopCard(sizeMiB: 64, label: "STATE")
        let state = stagingDisk.mountPoint + "/state"
        try sh("mkdir -p \(state)/staging/.spare && for i in $(seq 1 300); do head -c 60000 /dev/urandom > \(state)/staging/.spare/$i; done; sync")
        let free = try #require(Int(try sh("df -B1 --output=avail \(stagingDisk.mountPoint) | tail -1").trimmingCharacters(in: .whitespacesAndNewlines)))
        let card = TemporaryDirectory()
        try sh("mkdir -p \(card.path)/DCIM && head -c \(free + (4 << 20)) /dev/urandom > \(card.path)/DCIM/b.MP4")

        let run = try IngestRun.ingest([card.path, "--no-upload", "--state-dir", state, "--reserve", "0", "--json"])

        #expect(run.status == 0, "\(run.stderr)")
        let oracle = try #require(try xxh128sums(under: card.path).values.first)
        #expect(run.events("staged").map { $0.string("xxh128") } == [oracle])
        #expect(FileManager.default.fileExists(atPath: "\(state)/staging/\(oracle.prefix(2))/\(oracle)"))
        let spares = try FileManager.default.contentsOfDirectory(atPath: state + "/staging/.spare")
        #expect(spares.count == 299, "one spare became the copy")
        for spare in spares {
            #expect(try FileManager.default.attributesOfItem(atPath: state + "/staging/.spare/" + spare)[.size] as? Int == 0)
        }
    }

    /// Waits until the process has read `bytes`, then stops it with SIGSTOP.
    func stopWhenItHasRead(_ child: ChildProcess, atLeast bytes: Int64) throws {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let read = child.bytesRead, read >= bytes {
                kill(child.pid, SIGSTOP)
                return
            }
            if !child.isRunning { break }
            usleep(500)
        }
        throw CommandFailed(command: "ingest (did not read \(bytes) bytes in time)", result: try child.wait(timeout: 5))
    }
}
