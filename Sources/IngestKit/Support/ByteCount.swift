/// A number of bytes shown the way people read them: `512 B`, `3.4 MiB`, `1.2 GiB`.
public struct ByteCount: CustomStringConvertible, Sendable {
    public let bytes: Int64
    public init(_ bytes: Int64) { self.bytes = bytes }
    public init(_ bytes: Int) { self.bytes = Int64(bytes) }

    public var description: String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(bytes)
        var unit = 0
        // Round before choosing the unit, so 1048575 bytes reads "1.0 MiB", not "1024.0 KiB".
        while (abs(value) * 10).rounded() / 10 >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        return "\(rounded) \(units[unit])"
    }

    /// Parses `512`, `64KiB`, `1.5 GiB`, `2G`, `10MB` (decimal) and the like.
    public static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingSpaces
        let digits = trimmed.prefix { $0.isNumber || $0 == "." }
        guard let number = Double(digits), number >= 0 else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingSpaces.lowercased()
        let multipliers: [String: Double] = [
            "": 1, "b": 1,
            "k": 1024, "kib": 1024, "kb": 1e3,
            "m": 0x1p20, "mib": 0x1p20, "mb": 1e6,
            "g": 0x1p30, "gib": 0x1p30, "gb": 1e9,
            "t": 0x1p40, "tib": 0x1p40, "tb": 1e12,
        ]
        guard let multiplier = multipliers[unit] else { return nil }
        let bytes = (number * multiplier).rounded()  // "4.1MB" is 4100000, not 4099999
        guard bytes < 9e18 else { return nil }
        return Int64(bytes)
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
