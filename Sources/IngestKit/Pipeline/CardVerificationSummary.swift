/// How a check ended: what it verified, its problems by code, and the card's verdict.
public struct CardVerificationSummary: Sendable {
    public var volume: VolumeIdentity
    /// Regular files on the card the check reached (those the scan rules leave out are not
    /// counted), and their bytes.
    public var files = 0
    public var bytes: Int64 = 0
    /// Of them, those in the bucket with the same size and fingerprint.
    public var verified = 0
    public var verifiedBytes: Int64 = 0
    /// Whether objects were to be read back (`--read-back`); of the verified files, those
    /// whose objects' bytes were read back and hashed to the card's fingerprint, and their
    /// bytes.
    public var readBack = false
    public var readBackFiles = 0
    public var readBackBytes: Int64 = 0
    /// Destinations that cannot read objects back (a tus server): their objects are proven
    /// by their `HEAD` alone.
    public var readBackUnavailable: [String] = []
    public var counts: [CardVerificationProblem.Code: Int] = [:]
    /// What ended the check before its end (the card gone, the journal or the destination
    /// unusable); the verdict is then "not safe".
    public var failure: IngestError?
    /// A stop was asked for (a signal) before the end.
    public var stopped = false
    public var seconds: Double = 0

    public init(volume: VolumeIdentity) { self.volume = volume }

    public var problems: Int { counts.values.reduce(0, +) }

    /// Every file on the card has a verified object with the same fingerprint, and the walk
    /// lost nothing.
    public var safeToErase: Bool { failure == nil && !stopped && problems == 0 }

    /// 0 safe to erase; the failure's status when the check could not finish; 76 when an
    /// object is missing or differs; 1 for other problems.
    public var exitStatus: ExitStatus {
        if let failure { return failure.exitStatus }
        if counts.contains(where: { $0.key.isIntegrity && $0.value > 0 }) { return .integrity }
        return problems > 0 || stopped ? .partial : .success
    }

    /// The problems by code, like `1 changed, 2 pending`.
    var breakdown: String {
        CardVerificationProblem.Code.allCases.compactMap { code in
            counts[code].flatMap { $0 > 0 ? "\($0) \(code.rawValue)" : nil }
        }.joined(separator: ", ")
    }

    /// The last line, for people.
    public var text: String {
        let card = volume.displayName
        let problemWords = counted(problems, "problem")
        if failure != nil || stopped {
            return "Verification of \(card) stopped after \(counted(files, "file")) (\(ByteCount(bytes))), "
                + (problems > 0 ? "\(problemWords) (\(breakdown))" : "no problem") + " so far: not safe to erase"
        }
        let checked = "Verified \(counted(files, "file")) (\(ByteCount(bytes))) of \(card): "
        if problems == 0 {
            var proof = "all in the bucket with the same fingerprint"
            if readBack {
                proof += readBackFiles == verified
                    ? ", every byte read back (\(ByteCount(readBackBytes)))"
                    : ", \(counted(readBackFiles, "file")) read back (\(ByteCount(readBackBytes))), "
                        + "\(counted(verified - readBackFiles, "file")) by their labels alone"
            }
            return checked + proof + " — safe to erase"
        }
        return checked + "\(problemWords) (\(breakdown)): not safe to erase"
    }

    /// The `verify_summary` NDJSON event.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "verify_summary", "card": .string(volume.displayName), "volume": .string(volume.key),
            "path": .string(volume.rootPath), "files": .int(Int64(files)), "bytes": .int(bytes),
            "verified": .int(Int64(verified)), "verified_bytes": .int(verifiedBytes), "problems": .int(Int64(problems)),
            "safe_to_erase": .bool(safeToErase), "exit_status": .int(Int64(exitStatus.rawValue)),
            "seconds": .double(seconds), "stopped": .bool(stopped), "read_back": .bool(readBack),
            "read_back_files": .int(Int64(readBackFiles)), "read_back_bytes": .int(readBackBytes),
        ]
        if !readBackUnavailable.isEmpty {
            object["read_back_unavailable"] = .array(readBackUnavailable.map(JSONValue.string))
        }
        for code in CardVerificationProblem.Code.allCases { object[code.countKey] = .int(Int64(counts[code] ?? 0)) }
        object["error"] = failure.map { .string($0.description) }
        return object
    }
}
