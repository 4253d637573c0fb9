import Foundation
import Glibc
import IngestTestSupport
import Testing

/// The shipped `udev-rules/99-ingest.rules`, checked with the real udevd and `udevadm test`
/// on loop devices. `TestCardRule` makes a loop device backed by `ingest-card-*.img` look
/// like a card in a USB reader; nothing else qualifies.
@Suite struct UdevRuleTests {
    /// The properties `udevadm test --action=ACTION` prints for a block device.
    static func udevadmTest(_ device: String, action: String = "add") throws -> [String: String] {
        let name = (device as NSString).lastPathComponent
        let result = try run("/usr/bin/udevadm", ["test", "--action=\(action)", "/sys/class/block/\(name)"])
        guard result.status == 0 else { throw CommandFailed(command: "udevadm test \(name)", result: result) }
        return properties(result.stdoutText)
    }

    /// The properties the running udevd recorded for a device (`udevadm info`).
    static func udevDatabase(_ device: String) throws -> [String: String] {
        properties(try sh("udevadm info --query=property --name=\(shellQuoted(device))"))
    }

    static func properties(_ text: String) -> [String: String] {
        var properties: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "="), line[..<equals].allSatisfy({ $0.isUppercase || $0.isNumber || $0 == "_" })
            else { continue }
            properties[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return properties
    }

    static func wants(_ properties: [String: String]) -> [String] {
        (properties["SYSTEMD_WANTS"] ?? "").split(separator: " ").map(String.init)
    }

    @Test(needsRoot) func aCardInAUSBReaderWantsTheIngestServiceOfItsKernelName() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            try ShippedIngestRule.whileInstalled {
                // A label a shell would act on: it must reach neither a shell nor the unit name.
                let card = try LoopCard(sizeMiB: 16, label: "a b;$(id)`", imageName: TestCardRule.imageName("rule"))
                try card.directory.write("mnt/DCIM/100MEDIA/DJI_0001.JPG", randomBytes(4096))
                try card.seal()
                let kernelName = (card.device as NSString).lastPathComponent

                // What the running udevd made of the attach, then what `udevadm test` shows.
                let database = try Self.udevDatabase(card.device)
                #expect(Self.wants(database).contains("ingest@\(kernelName).service"), "udev database: \(database)")
                for action in ["add", "change"] {
                    let properties = try Self.udevadmTest(card.device, action: action)
                    #expect(properties["ID_BUS"] == "usb")
                    #expect(properties["ID_FS_USAGE"] == "filesystem")
                    #expect(Set(Self.wants(properties)) == ["ingest@\(kernelName).service"], "\(action): \(properties)")
                    #expect(properties["TAGS"]?.contains(":systemd:") == true, "\(action): \(properties)")
                    #expect(properties["CURRENT_TAGS"]?.contains(":systemd:") == true, "\(action): \(properties)")
                }
            }
        }
    }

    @Test(needsRoot) func aLoopDeviceThatIsNotOnARemovableBusWantsNothing() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            try ShippedIngestRule.whileInstalled {
                let card = try LoopCard(sizeMiB: 16, label: "NOT_A_CARD", imageName: "disk.img")
                let properties = try Self.udevadmTest(card.device)
                #expect(properties["ID_FS_USAGE"] == "filesystem", "the file system is there: only the bus is missing")
                #expect(properties["ID_BUS"] == nil)
                #expect(!Self.wants(properties).contains { $0.hasPrefix("ingest@") }, "\(properties)")
                #expect(!Self.wants(try Self.udevDatabase(card.device)).contains { $0.hasPrefix("ingest@") })
            }
        }
    }

    @Test(needsRoot) func aCardWithoutAFileSystemWantsNothing() throws {
        let udev = try Udevd()
        defer { udev.stop() }
        try TestCardRule.whileInstalled {
            try ShippedIngestRule.whileInstalled {
                let directory = TemporaryDirectory()
                let image = directory.path + "/" + TestCardRule.imageName("blank")
                try sh("truncate -s 16M \(image)")
                let device = try sh("losetup -f --show \(image)").trimmingCharacters(in: .whitespacesAndNewlines)
                defer { _ = try? sh("losetup -d \(device)") }
                try sh("udevadm settle -t 10 || true")
                let properties = try Self.udevadmTest(device)
                #expect(properties["ID_BUS"] == "usb", "on the bus: only the file system is missing")
                #expect(properties["ID_FS_USAGE"] == nil)
                #expect(!Self.wants(properties).contains { $0.hasPrefix("ingest@") }, "\(properties)")
            }
        }
    }

    /// udev kills long-running RUN programs and forbids mounts and network in their sandbox:
    /// the work belongs to the service the rule pulls in.
    @Test func theShippedRuleRunsNoProgramAndNamesUnitsOnlyByKernelName() throws {
        let text = try String(contentsOfFile: ShippedIngestRule.repositoryPath, encoding: .utf8)
        let rules = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace) }
        #expect(!rules.isEmpty)
        for rule in rules {
            #expect(rule.range(of: #"\b(RUN|PROGRAM|IMPORT\{program\})"#, options: .regularExpression) == nil, "\(rule)")
            if rule.contains("SYSTEMD_WANTS") {
                #expect(rule.contains(#"ENV{SYSTEMD_WANTS}+="ingest@%k.service""#), "\(rule)")
                #expect(!rule.contains("$env") && !rule.contains("$attr"), "\(rule)")
            }
        }
    }
}
