import Synchronization

/// The empty files of a staging area's `.spare/` (``StagingArea/retire(_:size:)``), handed out
/// for new copies to be written into (``StagingArea/createPartial()``).
///
/// The directory is the pool: a spare is taken by renaming it away, so processes sharing the
/// staging area never take the same one, and what one run leaves the next one uses. This
/// process holds a few names at a time, read from the directory as they run out; memory does
/// not grow with the files of a card.
///
/// Before the directory comes a pool of this process's own: up to `heldLimit` copies it let
/// go under partial names of its own (`.partial/<pid>-<n>.partial`, ``StagingArea/retire(_:size:)``).
/// No other process takes from `.partial/`, so such a spare is written again without the
/// rename that takes one from `.spare/`: on ext4 a rename is a visible part of what a small
/// file costs in all. The run gives them back to `.spare/` when its uploads end
/// (``StagingArea/shelveHeldSpares()``); a killed process's go with its other partials.
final class SpareFiles: Sendable {
    /// Names read from the directory at once.
    static let batch = 64

    let directory: String
    /// Spare files kept at most in the directory.
    let limit: Int
    /// Spares held under partial names at most.
    let heldLimit: Int
    private let state = Mutex(State())

    private struct State: ~Copyable {
        /// Names known to be in the directory, not yet handed out.
        var names: [String] = []
        /// The directory being read for more, from where the last batch stopped.
        var reader: DirectoryReader?
        /// Spares kept since the reader last started over, beyond `names`: it may have passed them.
        var keptBehind = 0
        /// The reader found the end, and has nothing behind it to start over for: reading on
        /// would ask the kernel for an empty directory's entries at every copy of a first run.
        var atEnd = false
        /// Files in the directory, as this process knows: counted once, then kept up to date.
        var count: Int?
        /// Spares held under this process's partial names (``SpareFiles/heldLimit`` at most).
        var held: [String] = []
    }

    init(directory: String, limit: Int, heldLimit: Int) {
        self.directory = directory
        self.limit = limit
        self.heldLimit = heldLimit
    }

    /// A spare's path, or nil when there is none.
    func take() -> String? {
        state.withLock { state -> String? in
            if state.names.isEmpty { read(into: &state) }
            guard let name = state.names.popLast() else { return nil }
            state.count = state.count.map { max(0, $0 - 1) }
            return name
        }
    }

    /// A spare held under a partial name of this process's, or nil when none is.
    func takeHeld() -> String? {
        state.withLock { $0.held.popLast() }
    }

    /// Whether a copy let go now may be held under a partial name (``hold(_:)``).
    var mayHold: Bool { state.withLock { $0.held.count < heldLimit } }

    /// Takes note of a spare put in place under a partial name of this process's.
    func hold(_ path: String) {
        state.withLock { $0.held.append(path) }
    }

    /// A new name in the directory for a copy to become a spare, or nil when `limit` are kept.
    func newName() -> String? {
        state.withLock { state -> String? in
            let count = state.count ?? countFiles()
            state.count = count
            return count < limit ? "\(directory)/\(UniqueName.next())" : nil
        }
    }

    /// Takes note of a spare put in place under a name from ``newName()``.
    func keep(_ path: String) {
        state.withLock { state in
            state.count = (state.count ?? 0) + 1
            if state.names.count < Self.batch {
                state.names.append(path)
            } else {
                state.keptBehind += 1
                state.atEnd = false
            }
        }
    }

    /// Reads up to ``batch`` names on from where the last read stopped; at the end of the
    /// directory, starts over once if spares were kept since it last did.
    private func read(into state: inout State) {
        if state.reader == nil { state.reader = try? DirectoryReader(path: directory) }
        guard let reader = state.reader, !state.atEnd else { return }
        var startedOver = false
        while state.names.count < Self.batch {
            // The end of the listing, or a failure to read on: the same to a spare's taker.
            guard let entry = try? reader.nextEntry(Self.spareName) else {
                guard !startedOver, state.keptBehind > 0 else {
                    state.atEnd = true
                    return
                }
                reader.rewind()
                state.keptBehind = 0
                startedOver = true
                continue
            }
            if let name = entry { state.names.append("\(directory)/\(name)") }
        }
    }

    /// The spares in the directory now (once per process: then counted as they come and go).
    private func countFiles() -> Int {
        var count = 0
        forEachInDirectory { _ in count += 1 }
        return count
    }

    /// Calls `body` with the path of every spare: those this process holds, then those in the
    /// directory now.
    func forEachSpare(_ body: (String) -> Void) {
        for path in state.withLock({ $0.held }) { body(path) }
        forEachInDirectory(body)
    }

    private func forEachInDirectory(_ body: (String) -> Void) {
        guard let reader = try? DirectoryReader(path: directory) else { return }
        while let entry = try? reader.nextEntry(Self.spareName) {
            if let name = entry { body("\(directory)/\(name)") }
        }
    }

    /// The name of a directory entry that can be a spare: a file, or an entry whose type the
    /// file system does not tell, and not a hidden one (`.`, `..`).
    private static func spareName(_ name: UnsafeRawBufferPointer, _ type: FileType?) -> String? {
        guard type == .regular || type == nil else { return nil }
        let name = String(decoding: name, as: UTF8.self)
        return name.hasPrefix(".") ? nil : name
    }
}
