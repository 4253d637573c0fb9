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
}
