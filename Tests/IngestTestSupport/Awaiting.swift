import Foundation
import Glibc

// How a test waits for what another task, thread or process does: it looks again when
// something happens (a task yields, a directory changes), never after a sleep, and gives up
// at a deadline so that a bug fails the test instead of hanging it.

/// Yields to other tasks until `condition` holds, at most `timeout`; true when it held. For
/// a state another task or thread of this process brings about.
public func eventually(within timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        if ContinuousClock.now >= deadline { return false }
        await Task.yield()
    }
    return true
}

/// Whether the thread of this process named `name` (a name given to one thread only, at its
/// start) is asleep in the kernel: blocked on a lock, a condition or a `flock`, as a test
/// waits for before it lets it go. False while no thread has that name.
public func threadIsAsleep(named name: String) -> Bool {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
    for task in tasks {
        let directory = "/proc/self/task/" + task
        guard (try? String(contentsOfFile: directory + "/comm", encoding: .utf8)) == name + "\n",
              let stat = try? String(contentsOfFile: directory + "/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { continue }
        return stat[stat.index(close, offsetBy: 2)] == "S"
    }
    return false
}

/// Checks `condition` each time something in `directory` changes (inotify: a name made,
/// removed or renamed, a file written and closed), at most `timeout`; true when it held. For
/// what another process does to the file system.
public func whenDirectoryChanges(
    _ directory: String, within timeout: Duration = .seconds(10), until condition: () throws -> Bool
) rethrows -> Bool {
    let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
    precondition(fd >= 0, "inotify_init1: errno \(errno)")
    defer { close(fd) }
    let events = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE
    precondition(inotify_add_watch(fd, directory, UInt32(events)) >= 0, "inotify_add_watch \(directory): errno \(errno)")
    let deadline = ContinuousClock.now + timeout
    var buffer = [UInt8](repeating: 0, count: 4096)
    while try !condition() {
        let left = deadline - .now
        if left <= .zero { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, Int32(min(left.components.seconds * 1000 + 1, 60_000)))
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
    return true
}
