import CUdev
import Glibc

/// Read-only access to the udev database (libudev): the properties udev recorded for a device.
///
/// The only file that imports `CUdev` for device properties.
public enum Udev {
    /// The udev properties of the block device `major:minor`, or an empty dictionary when
    /// udev knows nothing of it (no udevd has run, or the device has no database entry).
    public static func blockDeviceProperties(major: UInt32, minor: UInt32) -> [String: String] {
        guard let udev = udev_new() else { return [:] }
        defer { udev_unref(udev) }
        guard let device = udev_device_new_from_devnum(udev, Int8(UInt8(ascii: "b")), makeDevice(major, minor))
        else { return [:] }
        defer { udev_device_unref(device) }
        var properties: [String: String] = [:]
        var entry = udev_device_get_properties_list_entry(device)
        while let current = entry {
            if let name = udev_list_entry_get_name(current), let value = udev_list_entry_get_value(current) {
                properties[String(cString: name)] = String(cString: value)
            }
            entry = udev_list_entry_get_next(current)
        }
        return properties
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
