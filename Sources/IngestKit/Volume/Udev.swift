import CUdev
import Glibc
import Synchronization

/// A block device as udev describes it: at one instant, from the database or from an event.
public struct UdevDevice: Sendable, Equatable {
    /// The event's action (`add`, `change`, `remove`…); nil for a device read from the database.
    public var action: String?
    /// The kernel's name, e.g. `sdb1`, `mmcblk0p1`, `loop3`.
    public var kernelName: String
    /// The device node, e.g. `/dev/sdb1`.
    public var node: String?
    public var major: UInt32
    public var minor: UInt32
    public var subsystem: String?
    /// `ID_FS_USAGE`, `ID_FS_TYPE`, `ID_FS_UUID`, `ID_BUS`…
    public var properties: [String: String]
    /// The `type` attribute of the device's `mmc` parent (`SD`, `MMC`, `SDIO`), when it has one.
    public var mmcType: String?
    /// udev has processed the device (its rules ran, its database entry exists).
    public var isInitialized: Bool

    public init(
        action: String? = nil, kernelName: String, node: String? = nil, major: UInt32 = 0, minor: UInt32 = 0,
        subsystem: String? = "block", properties: [String: String] = [:], mmcType: String? = nil,
        isInitialized: Bool = true
    ) {
        self.isInitialized = isInitialized
        self.action = action
        self.kernelName = kernelName
        self.node = node
        self.major = major
        self.minor = minor
        self.subsystem = subsystem
        self.properties = properties
        self.mmcType = mmcType
    }
}

/// Access to udev (libudev): the properties it recorded for a device, the block devices
/// present, and the events it sends as devices come and go.
///
/// The only file that imports `CUdev`. libudev objects are not thread-safe: each function
/// here makes and drops its own, and the monitor's belong to its thread.
public enum Udev {
    /// The udev properties of the block device `major:minor`, or an empty dictionary when
    /// udev knows nothing of it (no udevd has run, or the device has no database entry).
    public static func blockDeviceProperties(major: UInt32, minor: UInt32) -> [String: String] {
        blockDevice(major: major, minor: minor)?.properties ?? [:]
    }

    /// The block device `major:minor` as udev's database describes it; nil when the kernel
    /// has no such device.
    public static func blockDevice(major: UInt32, minor: UInt32) -> UdevDevice? {
        guard let udev = udev_new() else { return nil }
        defer { udev_unref(udev) }
        guard let device = udev_device_new_from_devnum(udev, Int8(UInt8(ascii: "b")), makeDevice(major, minor))
        else { return nil }
        defer { udev_device_unref(device) }
        return snapshot(device)
    }

    /// Every block device present now (`udev_enumerate`), as udev's database describes it.
    public static func blockDevices() -> [UdevDevice] {
        guard let udev = udev_new() else { return [] }
        defer { udev_unref(udev) }
        guard let enumerate = udev_enumerate_new(udev) else { return [] }
        defer { udev_enumerate_unref(enumerate) }
        udev_enumerate_add_match_subsystem(enumerate, "block")
        guard udev_enumerate_scan_devices(enumerate) >= 0 else { return [] }
        var devices: [UdevDevice] = []
        var entry = udev_enumerate_get_list_entry(enumerate)
        while let current = entry {
            if let syspath = udev_list_entry_get_name(current), let device = udev_device_new_from_syspath(udev, syspath) {
                devices.append(snapshot(device))
                udev_device_unref(device)
            }
            entry = udev_list_entry_get_next(current)
        }
        return devices
    }

    /// What libudev says of one device, copied out of its objects.
    fileprivate static func snapshot(_ device: OpaquePointer) -> UdevDevice {
        func string(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
        var properties: [String: String] = [:]
        var entry = udev_device_get_properties_list_entry(device)
        while let current = entry {
            if let name = udev_list_entry_get_name(current), let value = udev_list_entry_get_value(current) {
                properties[String(cString: name)] = String(cString: value)
            }
            entry = udev_list_entry_get_next(current)
        }
        let (major, minor) = split(udev_device_get_devnum(device))
        var mmcType: String?
        // The parent is owned by the child: not unreferenced here.
        if let parent = udev_device_get_parent_with_subsystem_devtype(device, "mmc", nil) {
            mmcType = string(udev_device_get_sysattr_value(parent, "type"))
        }
        return UdevDevice(
            action: string(udev_device_get_action(device)), kernelName: string(udev_device_get_sysname(device)) ?? "",
            node: string(udev_device_get_devnode(device)), major: major, minor: minor,
            subsystem: string(udev_device_get_subsystem(device)), properties: properties, mmcType: mmcType,
            isInitialized: udev_device_get_is_initialized(device) > 0)
    }

    /// glibc's `major` and `minor` (macros Swift cannot call).
    public static func split(_ device: dev_t) -> (major: UInt32, minor: UInt32) {
        let dev = UInt64(device)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000)
        let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00)
        return (UInt32(truncatingIfNeeded: major), UInt32(truncatingIfNeeded: minor))
    }

    /// glibc's `makedev` (a macro Swift cannot call).
    static func makeDevice(_ major: UInt32, _ minor: UInt32) -> dev_t {
        let major = UInt64(major), minor = UInt64(minor)
        return dev_t(
            ((major & 0xffff_f000) << 32) | ((major & 0x0000_0fff) << 8)
                | ((minor & 0xffff_ff00) << 12) | (minor & 0x0000_00ff))
    }
}

/// The events udev sends for block devices, after its rules ran (the `udev` netlink source,
/// not the kernel's raw one), delivered as an `AsyncStream`.
///
/// The monitor's socket is read on a thread of its own, which polls it together with a
/// pipe that ``stop()`` writes to: the Swift concurrency pool never blocks on it.
public final class UdevMonitor: Sendable {
    public let events: AsyncStream<UdevDevice>
    /// The write end of the pipe that wakes the thread to stop; the thread owns the read end.
    private let wakeup: Int32
    private let thread: Mutex<Joinable?>

    /// Starts listening; events from now on are delivered, in order.
    public init() throws(IngestError) {
        // Without a udevd, libudev quietly makes a monitor that never hears anything.
        guard System.exists("/run/udev/control") else {
            throw .udevUnavailable(SystemError(call: "access", errno: .noSuchFileOrDirectory, path: "/run/udev/control"))
        }
        guard let udev = udev_new() else { throw Self.failure("udev_new", errno: .noMemory) }
        guard let monitor = udev_monitor_new_from_netlink(udev, "udev") else {
            udev_unref(udev)
            throw Self.failure("udev_monitor_new_from_netlink", errno: Errno.current == .success ? .notPermitted : .current)
        }
        func fail(_ call: String, _ code: Int32) -> IngestError {
            udev_monitor_unref(monitor)
            udev_unref(udev)
            return Self.failure(call, errno: code < 0 ? Errno(rawValue: -code) : .current)
        }
        var code = udev_monitor_filter_add_match_subsystem_devtype(monitor, "block", nil)
        if code < 0 { throw fail("udev_monitor_filter_add_match_subsystem_devtype", code) }
        code = udev_monitor_enable_receiving(monitor)
        if code < 0 { throw fail("udev_monitor_enable_receiving", code) }
        // Cards arrive in bursts (a reader with four slots): room for them in the socket.
        _ = udev_monitor_set_receive_buffer_size(monitor, 4 << 20)
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else { throw fail("pipe", -Errno.current.rawValue) }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        wakeup = writeEnd
        let (stream, continuation) = AsyncStream.makeStream(of: UdevDevice.self)
        events = stream
        // The monitor and its udev context now belong to the thread alone.
        let handles = MonitorHandles(udev: udev, monitor: monitor)
        thread = Mutex(Joinable("ingest-udev") {
            Self.run(handles, wakeup: readEnd, continuation)
            close(readEnd)
        })
    }

    /// Stops listening and ends ``events``; waits for the monitor's thread. Idempotent.
    public func stop() {
        guard let joinable = thread.withLock({ held -> Joinable? in defer { held = nil }; return held }) else { return }
        var byte: UInt8 = 1
        _ = write(wakeup, &byte, 1)
        joinable.join()
        close(wakeup)
    }

    deinit { stop() }

    private static func run(_ handles: MonitorHandles, wakeup: Int32, _ continuation: AsyncStream<UdevDevice>.Continuation) {
        let monitor = handles.monitor
        defer {
            continuation.finish()
            udev_monitor_unref(monitor)
            udev_unref(handles.udev)
        }
        let socket = udev_monitor_get_fd(monitor)
        var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            guard case .success = retryingOnInterrupt({ poll(&fds, 2, -1) }) else { return }
            if fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else {
                if fds[0].revents != 0 { return }  // the socket failed: no more events will come
                continue
            }
            // The socket is non-blocking: drain what is there.
            while let device = udev_monitor_receive_device(monitor) {
                continuation.yield(Udev.snapshot(device))
                udev_device_unref(device)
            }
        }
    }

    private static func failure(_ call: String, errno code: Errno) -> IngestError {
        .udevUnavailable(SystemError(call: call, errno: code))
    }
}

/// The libudev handles a monitor thread owns; handed to it once, never shared.
private struct MonitorHandles: @unchecked Sendable {
    let udev: OpaquePointer
    let monitor: OpaquePointer
}
