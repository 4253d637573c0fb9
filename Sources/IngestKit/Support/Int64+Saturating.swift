/// `seconds × 10⁹ + nanoseconds`, saturated at `Int64.min` and `.max` instead of trapping.
func nanosecondsSinceEpoch(seconds: Int64, nanoseconds: Int64) -> Int64 {
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    return scaled.addingSaturating(nanoseconds)
}

extension Int64 {
    /// The sum, held at `.max` or `.min` instead of trapping. Sizes and times come from the
    /// card, and a damaged or hostile file system can report any value at all.
    public func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other < 0 ? .min : .max }
        return sum
    }
}
