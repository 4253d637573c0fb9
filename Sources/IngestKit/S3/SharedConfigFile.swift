
/// One of the two INI files every AWS tool shares, `~/.aws/credentials` and `~/.aws/config`,
/// read the way the AWS SDKs read them, reduced to the profiles it defines.
///
/// The format, as the SDKs' shared parser accepts it:
/// - `[name]` starts a section; in the credentials file the name is the profile, in the config
///   file profiles are `[profile name]` and `[default]` (`[profile default]` wins over
///   `[default]` when both exist). Other config sections (`[sso-session x]`, `[services x]`,
///   a bare `[x]`) are not profiles and are skipped, as are names with whitespace.
/// - `key = value`, with whitespace around `=` dropped; keys are case-insensitive.
/// - Lines starting with `#` or `;` are comments; on a setting line, `#` or `;` after
///   whitespace starts a comment too (a secret or a key never holds whitespace).
/// - An indented line after a setting continues it (the config file's nested settings);
///   repeated sections merge, the later value of a key winning.
///
/// It keeps the values (secrets among them) in memory only: nothing here prints them, and a
/// malformed line is reported by its number, never by its text.
struct SharedConfigFile: Sendable, Equatable {
    enum Kind: Sendable {
        /// `~/.aws/credentials`: sections are bare profile names.
        case credentials
        /// `~/.aws/config`: sections are `[profile name]` or `[default]`.
        case config
    }

    /// The keys whose values are secrets: a file holding one must be private to its owner.
    static let secretKeys: Set<String> = ["aws_secret_access_key", "aws_session_token"]

    /// The largest file we read; real ones are a few kilobytes.
    static let sizeLimit = BoundedFile.defaultLimit

    let path: String
    /// Settings by profile name, then by lower-cased key.
    private(set) var profiles: [String: [String: String]] = [:]
    /// Some section, a profile or not, sets a secret key.
    private(set) var holdsSecret = false

    /// The settings of one profile, or nil when the file does not define it.
    func profile(_ name: String) -> [String: String]? { profiles[name] }

    /// Parses the text of a file; `path` only names it in errors.
    static func parse(_ text: String, kind: Kind, path: String) throws(CredentialsError) -> SharedConfigFile {
        var file = SharedConfigFile(path: path)
        var bareDefault: [String: String]?  // config `[default]`, used unless `[profile default]` exists
        var section: Section?
        var lastKey: String?

        func store(_ key: String, _ value: String) {
            if SharedConfigFile.secretKeys.contains(key) { file.holdsSecret = true }
            switch section {
            case let .profile(name)?: file.profiles[name, default: [:]][key] = value
            case .bareDefault?: bareDefault?[key] = value
            case .ignored?, nil: break
            }
        }
        func value(of key: String) -> String? {
            switch section {
            case let .profile(name)?: file.profiles[name]?[key]
            case .bareDefault?: bareDefault?[key]
            case .ignored?, nil: nil
            }
        }

        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let lineNumber = index + 1
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = line.trimmingWhitespace()
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }

            if let first = line.first, first == " " || first == "\t", let key = lastKey {
                // A continuation of the setting above (or one of its nested settings).
                store(key, (value(of: key) ?? "") + "\n" + String(trimmed))
                continue
            }

            if trimmed.hasPrefix("[") {
                guard let close = trimmed.firstIndex(of: "]") else {
                    throw .malformedFile(path: path, line: lineNumber, problem: "a section header without its closing ']'")
                }
                let rest = trimmed[trimmed.index(after: close)...].trimmingWhitespace()
                guard rest.isEmpty || rest.hasPrefix("#") || rest.hasPrefix(";") else {
                    throw .malformedFile(path: path, line: lineNumber, problem: "text after a section header's ']'")
                }
                let name = trimmed[trimmed.index(after: trimmed.startIndex)..<close].trimmingWhitespace()
                section = Section(String(name), kind: kind)
                if case .profile(let profile)? = section, file.profiles[profile] == nil { file.profiles[profile] = [:] }
                if case .bareDefault? = section, bareDefault == nil { bareDefault = [:] }
                lastKey = nil
                continue
            }

            guard let equals = trimmed.firstIndex(of: "=") else {
                throw .malformedFile(
                    path: path, line: lineNumber,
                    problem: "a line that is neither a [section], a 'key = value' setting nor a comment")
            }
            let key = trimmed[..<equals].trimmingWhitespace().lowercased()
            guard !key.isEmpty else {
                throw .malformedFile(path: path, line: lineNumber, problem: "a setting without a key before '='")
            }
            guard section != nil else {
                throw .malformedFile(path: path, line: lineNumber, problem: "a setting before any [section] header")
            }
            store(key, String(trimmed[trimmed.index(after: equals)...].withoutInlineComment().trimmingWhitespace()))
            lastKey = key
        }
        if kind == .config, file.profiles["default"] == nil, let bareDefault {
            file.profiles["default"] = bareDefault
        }
        return file
    }

    /// Reads and parses the file at `path`, or returns nil when there is none. It is read as
    /// ``BoundedFile`` reads what configures ingest (`/dev/null` reads as empty): a FIFO, a
    /// device, a directory or a file over ``sizeLimit`` is refused before anything of it is
    /// read (``CredentialsError/refusedFile(path:problem:)``). A file that holds a secret and
    /// that group or others may read is refused: every AWS tool writes these files with mode
    /// 0600, and a secret others can read is a leaked secret.
    static func load(path: String, kind: Kind) throws(CredentialsError) -> SharedConfigFile? {
        let read: BoundedFile?
        do { read = try BoundedFile.read(path, links: .follow, limit: sizeLimit) } catch {
            switch error {
            case .failed(let failure): throw .unreadableFile(path: path, reason: failure.reason)
            case .symbolicLink, .notRegular, .tooLarge: throw .refusedFile(path: path, problem: error.description)
            }
        }
        guard let read else { return nil }
        guard let info = read.status else { return SharedConfigFile(path: path) }  // /dev/null: no settings
        if let reason = untrustedReason(info) {
            throw .untrustedFile(path: path, reason: reason.replacingOccurrences(of: "FILE", with: path))
        }
        let file = try parse(String(decoding: read.bytes, as: UTF8.self), kind: kind, path: path)
        let mode = UInt32(info.st_mode) & 0o777
        if file.holdsSecret, mode & 0o077 != 0 {
            throw .fileReadableByOthers(path: path, mode: mode)
        }
        return file
    }

    /// What a section header opens.
    private enum Section: Equatable {
        case profile(String)
        case bareDefault
        case ignored

        init(_ name: String, kind: Kind) {
            switch kind {
            case .credentials:
                self = Self.isValidProfileName(name) ? .profile(name) : .ignored
            case .config:
                if name == "default" {
                    self = .bareDefault
                } else if name.hasPrefix("profile"), let space = name.dropFirst(7).first, space == " " || space == "\t" {
                    let profile = String(name.dropFirst(7).trimmingWhitespace())
                    self = Self.isValidProfileName(profile) ? .profile(profile) : .ignored
                } else {
                    self = .ignored
                }
            }
        }

        static func isValidProfileName(_ name: String) -> Bool {
            !name.isEmpty && !name.contains { $0.isWhitespace }
        }
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        let start = firstIndex { $0 != " " && $0 != "\t" } ?? endIndex
        let end = lastIndex { $0 != " " && $0 != "\t" }.map(index(after:)) ?? start
        return self[start..<Swift.max(start, end)]
    }

    /// The value before a `#` or `;` that follows whitespace.
    fileprivate func withoutInlineComment() -> Substring {
        var previous: Character = " "
        for index in indices {
            let character = self[index]
            if (character == "#" || character == ";"), previous == " " || previous == "\t", index != startIndex {
                return self[..<index]
            }
            previous = character
        }
        return self
    }
}
