import Foundation

/// The files `make install` puts beside the binary for a person to copy from
/// (`PREFIX/share/doc/ingest`: the example configuration, the cron file), named in fixes
/// where they are on this machine.
enum InstalledDocuments {
    /// Where `make install` puts them, relative to the prefix the binary is under.
    static let directory = "share/doc/ingest"

    /// `name` in the documents of the install that `executable` belongs to, if it is there.
    static func path(_ name: String, executable: String = "/proc/self/exe") -> String? {
        let binary = URL(fileURLWithPath: executable).resolvingSymlinksInPath()
        let prefix = binary.deletingLastPathComponent().deletingLastPathComponent().path
        let path = (prefix == "/" ? "" : prefix) + "/\(directory)/\(name)"
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// The path of `name` when it is installed; otherwise where an install puts it.
    static func named(_ name: String, executable: String = "/proc/self/exe") -> String {
        path(name, executable: executable) ?? "PREFIX/\(directory)/\(name)"
    }
}
