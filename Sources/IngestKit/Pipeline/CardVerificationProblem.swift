/// What a check tells as it goes.
public enum CardVerificationEvent: Sendable {
    /// The card, once identified: first.
    case volume(VolumeIdentity)
    /// A file (or folder) that stands between the card and its erasure.
    case problem(CardVerificationProblem)
    /// `--read-back` was asked for, and this destination cannot read objects back (a tus
    /// server): its objects are proven by what their `HEAD` shows. Once per destination.
    case readBackUnavailable(destination: String)
}

/// One thing that makes a card not safe to erase, with a stable code for scripts.
public struct CardVerificationProblem: Sendable, Equatable {
    public enum Code: String, Sendable, CaseIterable {
        /// The file changed on the card since it was ingested: size or time, or its bytes
        /// (fingerprint) with the same size and time.
        case changed
        /// The journal does not know the file, or knows it but never staged it.
        case notInJournal = "not-in-journal"
        /// Staged, but its upload is not completed (or was given up).
        case pending
        /// The journal says it is in the bucket; there is no object at its key.
        case objectMissing = "object-missing"
        /// The object at its key has another size, or records another fingerprint.
        case objectDiffers = "object-differs"
        /// Read back (`--read-back`), the object's bytes hash to another fingerprint than the
        /// card's file, though its size and its label (metadata) match: other bytes were put
        /// at its key with the label copied, or the object was replaced while it was read.
        case readBackDiffers = "read-back-differs"
        /// The object at its key carries no fingerprint: not the object ingest uploaded.
        case noFingerprint = "no-fingerprint"
        /// The server refused to say (an error about this object alone).
        case objectUnchecked = "object-unchecked"
        /// The card's file could not be read.
        case unreadable
        /// A folder the walk could not enter (too deep, unreadable): its files were never
        /// ingested.
        case lost

        /// The bucket does not hold what the journal says was uploaded and verified.
        public var isIntegrity: Bool {
            switch self {
            case .objectMissing, .objectDiffers, .readBackDiffers, .noFingerprint: true
            default: false
            }
        }

        /// What the check exits with for a problem of this kind (the gravest problem wins).
        public var exitStatus: ExitStatus { isIntegrity ? .integrity : .partial }

        /// One line, for `--help` (at most 60 characters, so that the list keeps its columns).
        public var meaning: String {
            switch self {
            case .changed: "changed on the card since ingested (size, time or bytes)"
            case .notInJournal: "never ingested, or never staged (its copy failed)"
            case .pending: "not uploaded yet (ingest resume), or given up (forget)"
            case .objectMissing: "no object at its key, though the journal says uploaded"
            case .objectDiffers: "its object has another size or another fingerprint"
            case .readBackDiffers: "read back, its object's bytes have another fingerprint"
            case .noFingerprint: "its object carries no xxh128 fingerprint"
            case .objectUnchecked: "the server answered an error about its object"
            case .unreadable: "the card's file could not be read"
            case .lost: "a folder the walk cannot enter (too deep, unreadable)"
            }
        }

        /// The key of its count in the summary's JSON, like `not_in_journal`.
        public var countKey: String { rawValue.replacingOccurrences(of: "-", with: "_") }
    }

    public var code: Code
    public var path: CardPath
    /// What is wrong, and what to do.
    public var message: String
    /// The file's size now, when it was read.
    public var size: Int64?
    /// The file's fingerprint now, when it was read.
    public var fingerprint: Fingerprint?
    /// The object's key and upload, when the journal names them.
    public var key: String?
    public var uploadID: String?

    public init(
        code: Code, path: CardPath, message: String, size: Int64? = nil, fingerprint: Fingerprint? = nil,
        key: String? = nil, uploadID: String? = nil
    ) {
        self.code = code
        self.path = path
        self.message = message
        self.size = size
        self.fingerprint = fingerprint
        self.key = key
        self.uploadID = uploadID
    }

    /// One line for people: `  object-missing DCIM/IMG_0001.JPG: no object at s3://…`.
    public var text: String { "  \(code.rawValue) \(path.display): \(message)" }

    /// The `problem` NDJSON event.
    public var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "event": "problem", "code": .string(code.rawValue), "path": .string(path.display), "message": .string(message),
        ]
        object["size"] = size.map { .int($0) }
        object["xxh128"] = fingerprint.map { .string($0.hex) }
        object["key"] = key.map(JSONValue.string)
        object["upload_id"] = uploadID.map(JSONValue.string)
        return object
    }
}
