/// Bytes per second, as the configuration and the command line write them: `2MiB/s`,
/// `500 KiB/s`, `10MB/s` — a ``ByteCount`` and its units, per second.
public struct ByteRate: Sendable, Equatable, Comparable, CustomStringConvertible {
    public let bytesPerSecond: Int64

    public init(bytesPerSecond: Int64) { self.bytesPerSecond = bytesPerSecond }

    /// The slowest cap `[upload] max_rate` holds. Below it a transfer's share of the cap
    /// would look like a dead connection to the stall detection, and a bare number (`"2"`,
    /// two bytes a second) is surely a missing unit.
    public static let slowestCap = ByteRate(bytesPerSecond: 16 << 10)

    /// `2.0 MiB/s`.
    public var description: String { "\(ByteCount(bytesPerSecond))/s" }

    /// Parses a size with an optional `/s`: `2MiB/s`, `2 MiB/s`, `2MiB`; nil when it is not
    /// one. Zero parses: whether it makes sense is the caller's to say.
    public static func parse(_ text: String) -> ByteRate? {
        var size = text.trimmingSpaces
        if size.lowercased().hasSuffix("/s") { size.removeLast(2) }
        return ByteCount.parse(size).map(ByteRate.init(bytesPerSecond:))
    }

    public static func < (left: ByteRate, right: ByteRate) -> Bool { left.bytesPerSecond < right.bytesPerSecond }
}
