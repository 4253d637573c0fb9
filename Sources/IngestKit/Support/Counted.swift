/// A count and its noun, agreeing: "1 file", "2 files", "0 files"; `plural` for the nouns
/// that do not take an s ("1 entry", "2 entries").
public func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}
