import Foundation

/// The checks of `ingest check` that look only at this machine's disk: the state directory
/// and the staging space. They change nothing: a state directory not made yet is judged by
/// the directory that would hold it.
struct LocalReadiness {
    /// The state directory, absolute.
    let statePath: String
    /// `[staging] reserve`.
    let reserve: Int64
    let userID = System.effectiveUserID

    /// The state directory: a directory this user can write, with the journal, staging and
    /// locks in it writable too, that no other user can write (they could plant staged
    /// copies or change the journal) and that others cannot read (it holds the cards' files).
    func stateDirectory() -> ReadinessCheck {
        let info: FileStatus
        do { info = try System.status(statePath) } catch {
            guard error.errno == .noSuchFileOrDirectory else {
                return .failed(
                    .stateDirectory, "\(statePath) cannot be looked at: \(error.reason)",
                    remedy: fixOwnership, status: .cantCreate)
            }
            return missingStateDirectory()
        }
        guard info.isDirectory else {
            return .failed(
                .stateDirectory, "\(statePath) is not a directory",
                remedy: "remove it, or choose another place with state_dir, --state-dir or INGEST_STATE_DIR",
                status: .cantCreate)
        }
        let mode = info.st_mode & 0o7777
        let described = "\(statePath) (owner uid \(info.st_uid), mode \(String(mode, radix: 8)))"
        if mode & 0o022 != 0 {
            return .failed(
                .stateDirectory, "\(described): other users can write it, and so change the journal or plant staged copies",
                remedy: "chmod go-w \(statePath)", status: .cantCreate)
        }
        for path in [statePath] + Self.contents.map({ statePath + "/" + $0 }) where System.exists(path) {
            do { try System.access(path, .write) } catch {
                let reason = error.reason
                return .failed(
                    .stateDirectory, "\(path) is not writable by uid \(userID): \(reason)", remedy: fixOwnership,
                    status: .cantCreate)
            }
        }
        if mode & 0o005 != 0 {
            return .warned(
                .stateDirectory, "\(described): other users can read the staged copies of cards",
                remedy: "chmod o-rwx \(statePath) (make install makes it 0700)")
        }
        return .passed(.stateDirectory, "\(described), writable")
    }

    /// What the state directory holds that a run writes.
    static let contents = ["journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm", "staging", "locks"]

    private var fixOwnership: String {
        "run as the user the service runs as (root), or give that user the directory: "
            + "chown -R \(userID) \(statePath) (make install makes it root's, mode 0700)"
    }

    /// A state directory that does not exist yet is fine if the first run can make it.
    private func missingStateDirectory() -> ReadinessCheck {
        let parent = Self.nearestExisting(statePath)
        guard (try? System.access(parent, [.write, .execute])) != nil else {
            return .failed(
                .stateDirectory, "\(statePath) does not exist, and uid \(userID) cannot create it in \(parent)",
                remedy: "install -d -m 0700 -o \(userID) \(statePath) (make install does, for root)", status: .cantCreate)
        }
        return .passed(.stateDirectory, "\(statePath) does not exist yet; the first run creates it")
    }

    /// Free space on the staging disk against `[staging] reserve`: below it, a run stops
    /// (exit 73) before copying anything.
    func stagingSpace() -> ReadinessCheck {
        let staging = StateDirectory.stagingPath(in: statePath)
        let measured = Self.nearestExisting(staging)
        let available: Int64
        do { available = try StagingArea.availableBytes(onFileSystemOf: measured) } catch {
            return .failed(
                .stagingSpace, "cannot measure the free space at \(measured): \(error.reason)", remedy: fixOwnership,
                status: .cantCreate)
        }
        let found = "\(ByteCount(available)) free at \(measured), reserve \(ByteCount(reserve))"
        guard available > reserve else {
            return .failed(
                .stagingSpace, "\(found): a run stops before copying anything (exit 73)",
                remedy: "free space on that disk (ingest status shows what staging holds; uploads free it), "
                    + "or lower [staging] reserve (--reserve, INGEST_STAGING_RESERVE)",
                status: .cantCreate)
        }
        return .passed(.stagingSpace, "\(found)")
    }

    /// `path` if it exists, else its nearest ancestor that does (`/` at worst).
    static func nearestExisting(_ path: String) -> String {
        var current = path
        while !System.exists(current), current != "/" {
            let parent = (current as NSString).deletingLastPathComponent
            current = parent.isEmpty ? "/" : parent
        }
        return current
    }
}
