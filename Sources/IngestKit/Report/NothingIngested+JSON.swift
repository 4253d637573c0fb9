extension NothingIngested {
    /// The `nothing_ingested` event of `--json`.
    public var json: [String: JSONValue] {
        [
            "event": "nothing_ingested", "state_dir": .string(statePath), "journal": .string(journalPath),
            "message": .string(message),
        ]
    }
}
