extension Duration {
    /// The duration in seconds, for APIs that take a `TimeInterval`.
    var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds, for APIs that take them (libcurl's timeouts).
    var inMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    /// The duration as the configuration writes it: "7d", "12h", "15m", "30s" or "250ms",
    /// in the largest unit that holds it whole.
    public var configText: String {
        let (seconds, attoseconds) = components
        if attoseconds != 0 || seconds == 0 { return seconds == 0 && attoseconds == 0 ? "0s" : "\(inMilliseconds)ms" }
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}
