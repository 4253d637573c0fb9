import Foundation

/// One line of `/proc/self/mountinfo` (see proc(5)).
public struct MountEntry: Equatable, Sendable {
    public var major: UInt32
    public var minor: UInt32
    /// The directory of the file system that is mounted here ("/" unless a bind mount).
    public var root: String
    public var mountPoint: String
    public var fsType: String
    /// What was mounted: a device node such as `/dev/sdb1`, or a name like `tmpfs`.
    public var source: String
    public var options: [String]

    public var isReadOnly: Bool { options.contains("ro") }
}

/// The mount table of this process, parsed from `/proc/self/mountinfo`.
public struct MountTable: Sendable {
    public var entries: [MountEntry]

    public init(entries: [MountEntry]) { self.entries = entries }

    /// Reads the table as the kernel shows it now.
    public static func current(path: String = "/proc/self/mountinfo") throws -> MountTable {
        // Mount points are bytes: one that is not UTF-8 must not make the whole table unreadable.
        try MountTable(parsing: readTextFile(path))
    }

    public init(parsing text: String) {
        entries = text.split(separator: "\n").compactMap(Self.parseLine)
    }

    /// The mount that holds `path`: the one with the device `path` lives on and, among bind
    /// mounts of that device, the longest mount point that is a prefix of `path`; of two on
    /// the same mount point, the later, which hides the earlier.
    /// `path` must be absolute and free of symlinks (`realpath`).
    public func mount(containing path: String, major: UInt32, minor: UInt32) -> MountEntry? {
        var best: MountEntry?
        for entry in entries
        where entry.major == major && entry.minor == minor && Self.path(path, isInside: entry.mountPoint) {
            if entry.mountPoint.count >= (best?.mountPoint.count ?? 0) { best = entry }
        }
        return best
    }

    /// Mounts whose source is `devicePath` (e.g. `/dev/sdb1`).
    public func mounts(ofDevice devicePath: String) -> [MountEntry] {
        entries.filter { $0.source == devicePath }
    }

    static func path(_ path: String, isInside directory: String) -> Bool {
        directory == "/" || path == directory || path.hasPrefix(directory + "/")
    }

    /// `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
    static func parseLine(_ line: Substring) -> MountEntry? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard let separator = fields.firstIndex(of: "-"), separator >= 6, fields.count >= separator + 3
        else { return nil }
        let device = fields[2].split(separator: ":")
        guard device.count == 2, let major = UInt32(device[0]), let minor = UInt32(device[1]) else {
            return nil
        }
        return MountEntry(
            major: major, minor: minor,
            root: unescape(fields[3]),
            mountPoint: unescape(fields[4]),
            fsType: String(fields[separator + 1]),
            source: unescape(fields[separator + 2]),
            options: fields[5].split(separator: ",").map(String.init))
    }

    /// The kernel writes space, tab, newline and backslash in paths as `\040`-style octal.
    static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
                let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
