import Foundation

// MARK: - Credentials

/// AWS credentials and where they came from, as the provider resolved them.
///
/// Every textual form (`description`, `debugDescription`, `dump`) shows the access key ID,
/// which AWS itself logs and which tells keys apart, and redacts the secret access key and
/// the session token (through ``AWSCredentials``): these values must never reach a log, a
/// report or an error message.
public struct ResolvedCredentials: Sendable, Equatable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// What signs requests.
    public var credentials: AWSCredentials
    /// When temporary credentials stop working; nil for long-term keys.
    public var expiration: Date?
    /// Where they came from, for messages: "environment", "profile default in
    /// /home/u/.aws/credentials", "credential_process of profile field".
    public var source: String

    public init(
        accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil,
        expiration: Date? = nil, source: String
    ) {
        credentials = AWSCredentials(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: sessionToken)
        self.expiration = expiration
        self.source = source
    }

    public var accessKeyID: String { credentials.accessKeyID }
    public var secretAccessKey: String { credentials.secretAccessKey }
    public var sessionToken: String? { credentials.sessionToken }

    public var description: String {
        var text = "\(credentials) from \(source)"
        if let expiration { text += ", expiring \(expiration.formatted(.iso8601))" }
        return text
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "credentials": credentials,
                "expiration": expiration.map { $0.formatted(.iso8601) } ?? "nil",
                "source": source,
            ],
            displayStyle: .struct)
    }
}

// MARK: - Errors

/// Every way finding credentials can fail. Each message names the place (variable, file and
/// line, profile) and says what to do; none ever holds a secret, a token or the output of a
/// `credential_process`.
public enum CredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// How a `credential_process` ended.
    public typealias Termination = ProcessTermination

    /// One of `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` is set without the other.
    case incompleteEnvironment(missing: String, present: String)
    case unreadableFile(path: String, reason: String)
    /// The file is not one to read: a FIFO, a device, a directory, larger than 1 MiB
    /// (``BoundedFile``); `problem` says which.
    case refusedFile(path: String, problem: String)
    case malformedFile(path: String, line: Int, problem: String)
    /// The file holds a secret and its permission bits (`mode`) let group or others read it.
    case fileReadableByOthers(path: String, mode: UInt32)
    /// Someone other than root or the running user owns the file, or may write it.
    case untrustedFile(path: String, reason: String)
    /// `AWS_PROFILE` names a profile that no file defines.
    case profileNotFound(profile: String, files: [String])
    /// The profile sets one of the access key ID and the secret access key, not both.
    case incompleteProfile(profile: String, missing: String, files: [String])
    /// The profile gets credentials in a way `ingest` does not implement (role_arn, SSO...).
    case unsupportedProfile(profile: String, settings: [String])
    case processNotStarted(profile: String, reason: String)
    case processFailed(profile: String, termination: Termination, stderr: String)
    case processTimedOut(profile: String, seconds: Double)
    case processOutputInvalid(profile: String, problem: String)
    case processCredentialsExpired(profile: String, expiration: Date)
    /// Nothing anywhere; `searched` lists each place looked at and what was found there.
    case noCredentials(searched: [String])

    /// Every one of these is fixed in the environment or the files, not by retrying as is.
    public var exitStatus: ExitStatus { .config }

    public var description: String {
        switch self {
        case let .incompleteEnvironment(missing, present):
            return "\(present) is set but \(missing) is not: AWS credentials in the environment need both. "
                + "Export \(missing) too, or unset \(present) to use the shared credentials files."
        case let .unreadableFile(path, reason):
            return "cannot read \(path): \(reason). Fix the file or its permissions, or point "
                + "AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE at another file."
        case let .refusedFile(path, problem):
            return "refusing to read \(path): it \(problem). AWS credentials and config files are read only from "
                + "regular files (at most 1 MiB): point AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE at the file "
                + "itself, or replace this one with it."
        case let .malformedFile(path, line, problem):
            return "\(path), line \(line): \(problem). Fix that line: the file is INI, with [section] headers "
                + "and 'key = value' settings."
        case let .untrustedFile(path, reason):
            return "refusing to use \(path): \(reason)."
        case let .fileReadableByOthers(path, mode):
            return "\(path) holds a secret but its mode \(String(mode, radix: 8)) lets group or others read it; "
                + "refusing to use it. Run `chmod 600 \(path)`, and rotate the keys if others may have read them."
        case let .profileNotFound(profile, files):
            return "AWS_PROFILE names profile '\(profile)', which is in neither \(files.joined(separator: " nor ")). "
                + "Add [\(profile)] to the credentials file or [profile \(profile)] to the config file, "
                + "or set AWS_PROFILE to an existing profile."
        case let .incompleteProfile(profile, missing, files):
            return "profile '\(profile)' (\(files.joined(separator: ", "))) lacks \(missing): an access key needs "
                + "both aws_access_key_id and aws_secret_access_key. Add \(missing) to the profile."
        case let .unsupportedProfile(profile, settings):
            return "profile '\(profile)' gets its credentials through \(settings.joined(separator: ", ")), which "
                + "ingest does not support. Use a profile with credential_process instead, for example "
                + "`credential_process = aws configure export-credentials --profile \(profile) --format process` "
                + "in another profile that AWS_PROFILE selects."
        case let .processNotStarted(profile, reason):
            return "cannot run the credential_process of profile '\(profile)': \(reason). "
                + "Check the command in the config file."
        case let .processFailed(profile, termination, stderr):
            let detail = stderr.isEmpty ? "" : " (its error output: \(stderr))"
            return "the credential_process of profile '\(profile)' \(termination)\(detail). "
                + "Run the command by hand to see why (a login that expired, for example), fix it, and try again."
        case let .processTimedOut(profile, seconds):
            return "the credential_process of profile '\(profile)' did not finish within \(Self.format(seconds)) s "
                + "and was stopped. Check that it does not wait for input (it gets none) and that what it asks answers."
        case let .processOutputInvalid(profile, problem):
            return "the credential_process of profile '\(profile)' printed unusable output: \(problem). It must print "
                + "JSON such as {\"Version\": 1, \"AccessKeyId\": ..., \"SecretAccessKey\": ..., \"SessionToken\": ..., "
                + "\"Expiration\": \"2030-01-01T00:00:00Z\"} (its output is not shown: it holds secrets)."
        case let .processCredentialsExpired(profile, expiration):
            return "the credential_process of profile '\(profile)' returned credentials that expired at "
                + "\(expiration.formatted(.iso8601)). Check the process, and this machine's clock."
        case let .noCredentials(searched):
            return "no AWS credentials found; looked at: \(searched.joined(separator: "; ")). Provide them with "
                + "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), with aws_access_key_id and "
                + "aws_secret_access_key in the credentials file (mode 600), or with credential_process in the "
                + "config file; AWS_PROFILE selects a profile other than default."
        }
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

// MARK: - Provider

/// Finds AWS credentials the way every AWS tool does, keeps them, and renews temporary ones.
///
/// The order: the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`); then the profile `AWS_PROFILE` names (else `default`) in the shared
/// credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and the config
/// file (`AWS_CONFIG_FILE`, else `~/.aws/config`), the credentials file winning key by key:
/// its access keys, else its `credential_process`.
///
/// Credentials are kept until `expiration - refreshMargin`; after that the next caller
/// resolves again (running the `credential_process` anew), so a long upload never signs with
/// credentials about to lapse. When the server still says `ExpiredToken` (clock skew, revoked
/// session), ``refresh(rejected:now:)`` renews at once. Callers that arrive while a
/// resolution runs wait for it: one run of the process serves them all.
public actor CredentialsProvider {
    /// How long before their expiration temporary credentials are renewed.
    public nonisolated let refreshMargin: TimeInterval
    /// How long a `credential_process` may run before it is killed.
    public nonisolated let processTimeout: TimeInterval
    private let environment: [String: String]
    private let onRenewal: (@Sendable () -> Void)?

    private var cached: (credentials: ResolvedCredentials, renewAt: Date?)?
    private var running: Task<Result<ResolvedCredentials, CredentialsError>, Never>?
    private var obtained = false

    /// - Parameters:
    ///   - environment: the variables to read (and to give a `credential_process`); the
    ///     process's own by default, a dictionary in tests.
    ///   - onRenewal: told each time credentials already obtained are renewed (ahead of
    ///     their expiry, or after the server rejected them), before the renewal runs: the
    ///     `credentials_refreshing` event.
    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        refreshMargin: TimeInterval = 300,
        processTimeout: TimeInterval = 60,
        onRenewal: (@Sendable () -> Void)? = nil
    ) {
        self.environment = environment
        self.refreshMargin = refreshMargin
        self.processTimeout = processTimeout
        self.onRenewal = onRenewal
    }

    /// Credentials valid at `now` for at least the refresh margin (when they expire at all).
    public func credentials(now: Date = Date()) async throws(CredentialsError) -> ResolvedCredentials {
        if let cached, cached.renewAt.map({ now < $0 }) ?? true { return cached.credentials }
        let task: Task<Result<ResolvedCredentials, CredentialsError>, Never>
        if let running {
            task = running
        } else {
            let environment = environment
            let timeout = processTimeout
            task = Task {
                await onDedicatedThread("ingest-creds") { () -> Result<ResolvedCredentials, CredentialsError> in
                    Result { () throws(CredentialsError) -> ResolvedCredentials in
                        try CredentialsResolver(environment: environment, processTimeout: timeout).resolve(now: now)
                    }
                }
            }
            running = task
            if obtained { onRenewal?() }
        }
        let result = await task.value
        if running == task {  // the first waiter to resume files the result
            running = nil
            if case let .success(fresh) = result {
                cached = (fresh, renewalTime(of: fresh, obtainedAt: now))
                obtained = true
            }
        }
        return try result.get()
    }

    /// Forgets the kept credentials so that the next call resolves again. With `rejected`,
    /// only if those are still the kept ones: when many requests fail with the same expired
    /// credentials, the first renews them and the others reuse what it got.
    public func invalidate(rejected: ResolvedCredentials? = nil) {
        guard let current = cached?.credentials else { return }
        if let rejected, rejected != current { return }
        cached = nil
    }

    /// Fresh credentials after the server rejected `rejected` (`ExpiredToken`); nil rejects
    /// whatever is kept.
    public func refresh(
        rejected: ResolvedCredentials? = nil, now: Date = Date()
    ) async throws(CredentialsError) -> ResolvedCredentials {
        invalidate(rejected: rejected)
        return try await credentials(now: now)
    }

    /// When to resolve again: the margin before expiry; credentials that arrive already
    /// inside the margin (a helper that caches its own) serve half their remaining life, at
    /// most a minute, so the helper is not run for every request.
    private func renewalTime(of credentials: ResolvedCredentials, obtainedAt now: Date) -> Date? {
        guard let expiration = credentials.expiration else { return nil }
        let ahead = expiration.addingTimeInterval(-refreshMargin)
        if ahead > now { return ahead }
        return now.addingTimeInterval(min(60, expiration.timeIntervalSince(now) / 2))
    }
}

// MARK: - Resolution

/// One resolution, blocking (it reads files and may run a process): the provider runs it
/// on a thread of its own.
struct CredentialsResolver: Sendable {
    let environment: [String: String]
    let processTimeout: TimeInterval

    /// Profile settings that name ways to get credentials `ingest` does not implement.
    static let unsupportedSettings = [
        "role_arn", "sso_session", "sso_start_url", "web_identity_token_file", "credential_source",
    ]

    func resolve(now: Date) throws(CredentialsError) -> ResolvedCredentials {
        var searched: [String] = []

        let key = value("AWS_ACCESS_KEY_ID")
        let secret = value("AWS_SECRET_ACCESS_KEY")
        switch (key, secret) {
        case let (key?, secret?):
            return ResolvedCredentials(
                accessKeyID: key, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN"),
                source: "environment")
        case (_?, nil):
            throw .incompleteEnvironment(missing: "AWS_SECRET_ACCESS_KEY", present: "AWS_ACCESS_KEY_ID")
        case (nil, _?):
            throw .incompleteEnvironment(missing: "AWS_ACCESS_KEY_ID", present: "AWS_SECRET_ACCESS_KEY")
        case (nil, nil):
            searched.append("environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (not set)")
        }

        let named = value("AWS_PROFILE")
        let profile = named ?? "default"
        let credentialsPath = path(variable: "AWS_SHARED_CREDENTIALS_FILE", default: ".aws/credentials")
        let configPath = path(variable: "AWS_CONFIG_FILE", default: ".aws/config")

        var found: [(file: String, settings: [String: String])] = []  // credentials file first
        for (path, kind) in [(credentialsPath, SharedConfigFile.Kind.credentials), (configPath, .config)] {
            guard let path else {
                searched.append("~/.aws/\(kind == .credentials ? "credentials" : "config") (HOME is not set)")
                continue
            }
            guard let file = try SharedConfigFile.load(path: path, kind: kind) else {
                searched.append("\(path) (no such file)")
                continue
            }
            guard let settings = file.profile(profile) else {
                searched.append("profile '\(profile)' in \(path) (no such profile)")
                continue
            }
            found.append((path, settings))
        }
        guard !found.isEmpty else {
            if let named {
                throw .profileNotFound(profile: named, files: [credentialsPath, configPath].compactMap { $0 })
            }
            throw .noCredentials(searched: searched)
        }

        /// The value of a setting and the file it comes from: the credentials file wins.
        func setting(_ key: String) -> (value: String, file: String)? {
            for (file, settings) in found {
                if let value = settings[key]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty {
                    return (value, file)
                }
            }
            return nil
        }
        let files = found.map(\.file)

        switch (setting("aws_access_key_id"), setting("aws_secret_access_key")) {
        case let (key?, secret?):
            let origins = [key.file, secret.file].reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            return ResolvedCredentials(
                accessKeyID: key.value, secretAccessKey: secret.value,
                sessionToken: setting("aws_session_token")?.value,
                source: "profile \(profile) in \(origins.joined(separator: " and "))")
        case (_?, nil):
            throw .incompleteProfile(profile: profile, missing: "aws_secret_access_key", files: files)
        case (nil, _?):
            throw .incompleteProfile(profile: profile, missing: "aws_access_key_id", files: files)
        case (nil, nil):
            break
        }
        if let command = setting("credential_process") {
            return try CredentialProcess(
                profile: profile, command: command.value, environment: environment, timeout: processTimeout
            ).run(now: now)
        }
        let unsupported = Self.unsupportedSettings.filter { setting($0) != nil }
        if !unsupported.isEmpty { throw .unsupportedProfile(profile: profile, settings: unsupported) }
        for file in files {
            searched.append("profile '\(profile)' in \(file) (no aws_access_key_id or credential_process)")
        }
        throw .noCredentials(searched: searched)
    }

    /// A variable's value; empty counts as unset, as in the AWS tools.
    private func value(_ name: String) -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        return value
    }

    /// The file a variable names (`~/` expanded), else `relative` under the home directory.
    private func path(variable: String, default relative: String) -> String? {
        if let named = value(variable) {
            guard named == "~" || named.hasPrefix("~/") else { return named }
            return home.map { $0 + named.dropFirst() }
        }
        return home.map { ($0.hasSuffix("/") ? $0 : $0 + "/") + relative }
    }

    private var home: String? {
        if let home = value("HOME") { return home }
        return System.homeDirectory
    }
}

// MARK: - credential_process

/// A profile's `credential_process`: a command run through `/bin/sh -c` (so quoting works as
/// in a shell) that prints credentials as JSON on its standard output.
///
/// The output holds secrets: it is parsed and dropped, never shown. Standard error is shown
/// when the command fails, since that is where helpers explain themselves.
struct CredentialProcess: Sendable {
    let profile: String
    let command: String
    let environment: [String: String]
    let timeout: TimeInterval

    /// More output than any credentials JSON needs is a helper gone wrong.
    static let outputLimit = 1 << 20
    /// How much of standard error a failure message quotes (its end, where causes are).
    static let stderrExcerpt = 1000

    func run(now: Date) throws(CredentialsError) -> ResolvedCredentials {
        let result: ShellCommand.Result
        do {
            result = try ShellCommand(command: command, environment: environment)
                .run(timeout: .seconds(timeout), outputLimit: Self.outputLimit)
        } catch {
            switch error {
            case let .notStarted(reason): throw .processNotStarted(profile: profile, reason: reason.description)
            case .timedOut: throw .processTimedOut(profile: profile, seconds: timeout)
            case .outputTooLarge:
                throw .processOutputInvalid(profile: profile, problem: "more than \(Self.outputLimit / 1024) KiB of it")
            }
        }
        guard result.termination == .exited(0) else {
            throw .processFailed(profile: profile, termination: result.termination, stderr: excerpt(result.stderr))
        }
        let credentials = try parse(result.stdout)
        if let expiration = credentials.expiration, expiration <= now {
            throw .processCredentialsExpired(profile: profile, expiration: expiration)
        }
        return credentials
    }

    /// The documented output: `Version` 1, `AccessKeyId`, `SecretAccessKey`, and for
    /// temporary credentials `SessionToken` and an ISO 8601 `Expiration`.
    func parse(_ output: [UInt8]) throws(CredentialsError) -> ResolvedCredentials {
        func invalid(_ problem: String) -> CredentialsError { .processOutputInvalid(profile: profile, problem: problem) }

        guard output.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) else {
            throw invalid("nothing on its standard output")
        }
        let decoder = JSONDecoder()
        let data = Data(output)
        do {
            let version = try decoder.decode(VersionField.self, from: data).version
            guard version == 1 else {
                throw invalid(version.map { "Version \($0), where only 1 is supported" } ?? "no Version (it must be 1)")
            }
            let fields = try decoder.decode(Fields.self, from: data)
            guard !fields.accessKeyID.isEmpty else { throw invalid("an empty AccessKeyId") }
            guard !fields.secretAccessKey.isEmpty else { throw invalid("an empty SecretAccessKey") }
            var expiration: Date?
            if let text = fields.expiration {
                guard let date = Self.iso8601(text) else {
                    throw invalid("an Expiration that is not an ISO 8601 time such as 2030-01-01T00:00:00Z")
                }
                expiration = date
            }
            return ResolvedCredentials(
                accessKeyID: fields.accessKeyID, secretAccessKey: fields.secretAccessKey,
                sessionToken: fields.sessionToken.flatMap { $0.isEmpty ? nil : $0 },
                expiration: expiration, source: "credential_process of profile \(profile)")
        } catch let error as CredentialsError {
            throw error
        } catch let error as DecodingError {
            throw invalid(Self.problem(error))
        } catch {
            throw invalid("output that is not JSON")
        }
    }

    /// What is wrong, from the decoder's error, by field name only: its own text may quote
    /// the output.
    private static func problem(_ error: DecodingError) -> String {
        func name(_ path: [any CodingKey]) -> String { path.map(\.stringValue).joined(separator: ".") }
        switch error {
        case let .keyNotFound(key, _): return "no \(key.stringValue)"
        case let .typeMismatch(type, context):
            return context.codingPath.isEmpty ? "JSON that is not an object" : "a \(name(context.codingPath)) that is not \(type == Int.self ? "a whole number" : "a string")"
        case let .valueNotFound(_, context): return "a null \(name(context.codingPath))"
        case let .dataCorrupted(context):
            return context.codingPath.isEmpty ? "output that is not JSON" : "an unreadable \(name(context.codingPath))"
        @unknown default: return "output that is not the expected JSON"
        }
    }

    static func iso8601(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    private func excerpt(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.count > Self.stderrExcerpt else { return text }
        return "…" + text.suffix(Self.stderrExcerpt)
    }

    /// The JSON's fields, spelled as documented.
    private struct VersionField: Decodable {
        let version: Int?
        enum CodingKeys: String, CodingKey { case version = "Version" }
    }
    private struct Fields: Decodable {
        let accessKeyID: String
        let secretAccessKey: String
        let sessionToken: String?
        let expiration: String?
        enum CodingKeys: String, CodingKey {
            case accessKeyID = "AccessKeyId", secretAccessKey = "SecretAccessKey"
            case sessionToken = "SessionToken", expiration = "Expiration"
        }
    }
}
