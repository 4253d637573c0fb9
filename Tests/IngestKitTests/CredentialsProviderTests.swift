import Foundation
import Glibc
import Synchronization
import Testing

@testable import IngestKit

// The example keys of the AWS documentation; the token and the process's secret are ours.
private let accessKey = "AKIAIOSFODNN7EXAMPLE"
private let secretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
private let sessionToken = "FwoGZXIvYXdzEXAMPLESESSIONTOKENzZXNzaW9u"
private let processSecret = "processSecretKEYxxxxxxxxxxxxxxxxEXAMPLE"
private let processToken = "IQoJb3JpZ2luX2VjEXAMPLEPROCESSTOKEN"
private let allSecrets = [secretKey, sessionToken, processSecret, processToken]

/// Fails the test when `text` contains any of the secrets the tests use.
private func expectNoSecrets(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    for secret in allSecrets {
        #expect(!text.contains(secret), "a secret leaked into: \(text)", sourceLocation: sourceLocation)
    }
}

/// A fake home directory, files in it, helper scripts, and the environment to pass.
private final class Fixture {
    let directory = TemporaryDirectory()
    var environment: [String: String]

    init(_ extra: [String: String] = [:]) {
        environment = ["HOME": directory.path + "/home", "PATH": "/usr/bin:/bin"].merging(extra) { $1 }
    }

    var home: String { directory.path + "/home" }
    var credentialsPath: String { home + "/.aws/credentials" }
    var configPath: String { home + "/.aws/config" }
    var runsPath: String { directory.path + "/runs" }

    /// Writes a file (relative to the temporary directory) with the given permission bits.
    @discardableResult
    func write(_ relative: String, _ text: String, mode: mode_t = 0o600) throws -> String {
        let path = try directory.write(relative, Array(text.utf8))
        #expect(chmod(path, mode) == 0)
        return path
    }

    @discardableResult
    func credentials(_ text: String, mode: mode_t = 0o600) throws -> String {
        try write("home/.aws/credentials", text, mode: mode)
    }

    @discardableResult
    func config(_ text: String, mode: mode_t = 0o600) throws -> String {
        try write("home/.aws/config", text, mode: mode)
    }

    /// An executable `/bin/sh` script that first records its run in `runs`.
    func script(_ body: String, named name: String = "helper.sh") throws -> String {
        let text = "#!/bin/sh\necho run >> \(shellQuoted(runsPath))\n" + body + "\n"
        return try write(name, text, mode: 0o700)
    }

    /// A `credential_process` printing temporary credentials whose access key ID ends with the
    /// run's number, so that each run's credentials differ.
    func countingHelper(expiration: String? = "2030-01-01T00:00:00Z", delay: String? = nil) throws -> String {
        let expiry = expiration.map { ", \"Expiration\": \"\($0)\"" } ?? ""
        return try script(
            """
            \(delay.map { "sleep \($0)" } ?? "")
            n=$(wc -l < \(shellQuoted(runsPath)) | tr -d ' ')
            printf '{"Version": 1, "AccessKeyId": "ASIARUN%s", "SecretAccessKey": "\(processSecret)", "SessionToken": "\(processToken)"\(expiry)}' "$n"
            """)
    }

    /// How many times the helper scripts ran.
    var runs: Int {
        guard let text = try? String(contentsOfFile: runsPath, encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").count
    }

    func provider(margin: TimeInterval = 300, timeout: TimeInterval = 10) -> CredentialsProvider {
        CredentialsProvider(environment: environment, refreshMargin: margin, processTimeout: timeout)
    }
}

/// The error a resolution throws, with the check that its message keeps every secret out.
private func failure(
    _ fixture: Fixture, now: Date = Date(), timeout: TimeInterval = 10,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> CredentialsError {
    let provider = fixture.provider(timeout: timeout)
    let error: CredentialsError
    do {
        let credentials = try await provider.credentials(now: now)
        Issue.record("expected an error, got \(credentials)", sourceLocation: sourceLocation)
        throw CancellationError()
    } catch let thrown as CredentialsError {
        error = thrown
    }
    expectNoSecrets(error.description, sourceLocation: sourceLocation)
    expectNoSecrets(String(reflecting: error), sourceLocation: sourceLocation)
    #expect(error.exitStatus == .config, sourceLocation: sourceLocation)
    return error
}

/// A time from its ISO 8601 text, through GNU date (an oracle outside Foundation).
private func utc(_ text: String) throws -> Date {
    let seconds = try #require(TimeInterval(try sh("date -u -d \(shellQuoted(text)) +%s").trimmingCharacters(in: .whitespacesAndNewlines)))
    return Date(timeIntervalSince1970: seconds)
}

@Suite struct CredentialsProviderTests {
    // MARK: environment

    @Test func environmentCredentialsWinOverTheFiles() async throws {
        let fixture = Fixture([
            "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey, "AWS_SESSION_TOKEN": sessionToken,
        ])
        try fixture.credentials("[default]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = other\n")
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == accessKey)
        #expect(credentials.secretAccessKey == secretKey)
        #expect(credentials.sessionToken == sessionToken)
        #expect(credentials.expiration == nil)
        #expect(credentials.source == "environment")
    }

    @Test func environmentWithoutSessionTokenGivesLongTermCredentials() async throws {
        let fixture = Fixture(["AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey, "AWS_SESSION_TOKEN": ""])
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.sessionToken == nil)
    }

    @Test(arguments: [
        ("AWS_ACCESS_KEY_ID", accessKey, "AWS_SECRET_ACCESS_KEY"),
        ("AWS_SECRET_ACCESS_KEY", secretKey, "AWS_ACCESS_KEY_ID"),
    ])
    func halfOfTheKeyPairInTheEnvironmentNamesTheMissingVariable(present: String, value: String, missing: String) async throws {
        let fixture = Fixture([present: value])
        // Files that would work must not hide the mistake.
        try fixture.credentials("[default]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = other\n")
        let error = try await failure(fixture)
        #expect(error == .incompleteEnvironment(missing: missing, present: present))
        #expect(error.description.contains("\(missing) is not"))
    }

    // MARK: shared files

    @Test func defaultProfileOfTheCredentialsFile() async throws {
        let fixture = Fixture()
        let path = try fixture.credentials(
            "[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\naws_session_token = \(sessionToken)\n")
        let credentials = try await fixture.provider().credentials()
        #expect(credentials == ResolvedCredentials(
            accessKeyID: accessKey, secretAccessKey: secretKey, sessionToken: sessionToken,
            source: "profile default in \(path)"))
    }

    @Test func awsProfileSelectsTheProfile() async throws {
        let fixture = Fixture(["AWS_PROFILE": "work"])
        try fixture.credentials(
            """
            [default]
            aws_access_key_id = AKIDDEFAULT
            aws_secret_access_key = defaultsecret
            [work]
            aws_access_key_id = \(accessKey)
            aws_secret_access_key = \(secretKey)
            """)
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == accessKey)
        #expect(credentials.source.hasPrefix("profile work in "))
    }

    @Test func configFileProfilesAreSectionsNamedProfileSpaceName() async throws {
        let fixture = Fixture(["AWS_PROFILE": "work"])
        let path = try fixture.config(
            """
            [work]
            aws_access_key_id = AKIDBARESECTION
            aws_secret_access_key = bare
            [profile work]
            aws_access_key_id = \(accessKey)
            aws_secret_access_key = \(secretKey)
            """)
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == accessKey)
        #expect(credentials.source == "profile work in \(path)")
    }

    @Test func bareSectionInTheConfigFileIsNotAProfile() async throws {
        let fixture = Fixture(["AWS_PROFILE": "work"])
        try fixture.config("[work]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n")
        let error = try await failure(fixture)
        #expect(error == .profileNotFound(profile: "work", files: [fixture.credentialsPath, fixture.configPath]))
        #expect(error.description.contains("[profile work]"))
    }

    @Test func configDefaultSectionIsTheDefaultProfile() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n")
        #expect(try await fixture.provider().credentials().accessKeyID == accessKey)
    }

    @Test func credentialsFileWinsOverTheConfigFileKeyByKey() async throws {
        let fixture = Fixture(["AWS_PROFILE": "work"])
        let credentialsPath = try fixture.credentials("[work]\naws_access_key_id = \(accessKey)\n")
        let configPath = try fixture.config(
            "[profile work]\naws_access_key_id = AKIDFROMCONFIG\naws_secret_access_key = \(secretKey)\nregion = eu-west-1\n")
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == accessKey)
        #expect(credentials.secretAccessKey == secretKey)
        #expect(credentials.source == "profile work in \(credentialsPath) and \(configPath)")
    }

    @Test func staticKeysWinOverACredentialProcess() async throws {
        let fixture = Fixture()
        let helper = try fixture.countingHelper()
        try fixture.credentials("[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n")
        try fixture.config("[default]\ncredential_process = \(helper)\n")
        #expect(try await fixture.provider().credentials().accessKeyID == accessKey)
        #expect(fixture.runs == 0)
    }

    @Test func variablesNameOtherFilesAndTildeMeansHome() async throws {
        let fixture = Fixture([
            "AWS_SHARED_CREDENTIALS_FILE": "~/elsewhere/creds", "AWS_CONFIG_FILE": "/nonexistent/config",
        ])
        try fixture.credentials("[default]\naws_access_key_id = AKIDIGNORED\naws_secret_access_key = ignored\n")
        let path = try fixture.write(
            "home/elsewhere/creds", "[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n")
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == accessKey)
        #expect(credentials.source == "profile default in \(path)")
    }

    @Test func parserTakesCommentsWhitespaceAndAnyCaseOfKeys() throws {
        let text = """
            # written by hand
            ; another comment style
            [default]   # the default profile
            AWS_Access_Key_ID=\(accessKey)
            aws_secret_access_key   =   \(secretKey)  ; inline comment after whitespace
            region = us-east-1
            s3 =
              max_concurrent_requests = 4
            unknown_setting = whatever

            [profile with space]
            aws_access_key_id = AKIDNOTAPROFILE
            """
        let file = try SharedConfigFile.parse(text, kind: .credentials, path: "/x/credentials")
        let profile = try #require(file.profile("default"))
        #expect(profile["aws_access_key_id"] == accessKey)
        #expect(profile["aws_secret_access_key"] == secretKey)
        #expect(profile["region"] == "us-east-1")
        #expect(profile["s3"]?.contains("max_concurrent_requests = 4") == true)
        #expect(file.holdsSecret)
        #expect(file.profiles.keys.sorted() == ["default"])
    }

    @Test func profileDefaultSectionWinsOverDefaultInTheConfigFile() throws {
        let file = try SharedConfigFile.parse(
            "[profile default]\nregion = eu-west-1\n[default]\nregion = us-east-1\n", kind: .config, path: "/x/config")
        #expect(file.profile("default") == ["region": "eu-west-1"])
    }

    @Test func hashInsideAValueIsKept() throws {
        let file = try SharedConfigFile.parse("[a]\ncredential_process = helper --tag=a#b\n", kind: .config, path: "/x")
        #expect(file.profile("a") == nil)  // a bare section in the config file is no profile
        let credentials = try SharedConfigFile.parse("[a]\nkey = helper --tag=a#b\n", kind: .credentials, path: "/x")
        #expect(credentials.profile("a")?["key"] == "helper --tag=a#b")
    }

    @Test func malformedLineIsReportedByNumberNeverByItsText() async throws {
        let fixture = Fixture()
        let path = try fixture.credentials("[default]\naws_access_key_id = \(accessKey)\n\(secretKey)\n")
        let error = try await failure(fixture)
        guard case let .malformedFile(file, line, _) = error else {
            Issue.record("expected malformedFile, got \(error)")
            return
        }
        #expect(file == path)
        #expect(line == 3)
        #expect(error.description.contains("\(path), line 3"))
    }

    @Test func settingBeforeAnySectionIsMalformed() {
        #expect(throws: CredentialsError.malformedFile(path: "/x", line: 2, problem: "a setting before any [section] header")) {
            try SharedConfigFile.parse("# comment\naws_access_key_id = x\n", kind: .credentials, path: "/x")
        }
    }

    @Test func profileWithOnlyAnAccessKeySaysWhatIsMissing() async throws {
        let fixture = Fixture()
        let path = try fixture.credentials("[default]\naws_access_key_id = \(accessKey)\n")
        let error = try await failure(fixture)
        #expect(error == .incompleteProfile(profile: "default", missing: "aws_secret_access_key", files: [path]))
    }

    @Test func roleProfileIsReportedAsUnsupported() async throws {
        let fixture = Fixture(["AWS_PROFILE": "admin"])
        try fixture.config("[profile admin]\nrole_arn = arn:aws:iam::123456789012:role/admin\nsource_profile = default\n")
        let error = try await failure(fixture)
        #expect(error == .unsupportedProfile(profile: "admin", settings: ["role_arn"]))
        #expect(error.description.contains("credential_process"))
    }

    // MARK: files that are no files

    /// A FIFO would block the open until a writer came, `/dev/zero` would never end: each is
    /// refused before anything of it is read, as the station's configuration (78), not as a
    /// credential the server refused (77). The time limit catches a hang; a bound in seconds
    /// measured here failed under load (a hundred tests at once, beside a build).
    @Test(.timeLimit(.minutes(1)), arguments: ["fifo", "/dev/zero", "directory", "over 1 MiB"])
    func aSharedFileThatIsNoRegularFileIsRefusedAtOnceAsConfiguration(kind: String) async throws {
        let fixture = Fixture()
        let path: String
        switch kind {
        case "fifo":
            path = fixture.directory.path + "/credentials.fifo"
            #expect(mkfifo(path, 0o600) == 0)
        case "directory":
            path = fixture.directory.path
        case "over 1 MiB":
            path = try fixture.write("big", "[default]\n" + String(repeating: "#", count: 1 << 20))
        default:
            path = kind
        }
        fixture.environment["AWS_SHARED_CREDENTIALS_FILE"] = path
        let error = try await failure(fixture)
        guard case .refusedFile(let refused, let problem) = error else {
            Issue.record("expected refusedFile, got \(error)")
            return
        }
        #expect(refused == path)
        #expect(problem.contains(kind == "over 1 MiB" ? "larger than 1 MiB" : "not a regular file"), "\(problem)")
        #expect(error.description.contains("AWS_SHARED_CREDENTIALS_FILE"), "the fix: \(error)")
        let target = S3Destination(endpoint: "http://127.0.0.1:9", bucket: "cards", region: "us-east-1", addressing: .path)
        #expect(UploadError(.credentials(error), what: "PutObject a", target: target).exitStatus == .config)
        #expect(
            UploadError(.credentials(.noCredentials(searched: [])), what: "PutObject a", target: target).exitStatus
                == .noPermission, "a credential missing is still 77")
    }

    /// `/dev/null` is how one tells any AWS tool that there is no such file.
    @Test func devNullAsASharedFileHoldsNoProfile() async throws {
        let fixture = Fixture(["AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_CONFIG_FILE": "/dev/null"])
        let error = try await failure(fixture)
        #expect(error == .noCredentials(searched: [
            "environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (not set)",
            "profile 'default' in /dev/null (no such profile)", "profile 'default' in /dev/null (no such profile)",
        ]))
    }

    // MARK: permissions

    @Test(arguments: [0o644, 0o640, 0o604] as [mode_t])
    func credentialsFileOthersCanReadIsRefused(mode: mode_t) async throws {
        let fixture = Fixture()
        let path = try fixture.credentials(
            "[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n", mode: mode)
        let error = try await failure(fixture)
        #expect(error == .fileReadableByOthers(path: path, mode: UInt32(mode)))
        #expect(error.description.contains("chmod 600 \(path)"))
    }

    /// A config file can name a credential_process, which ingest runs as root: whoever may
    /// write the file may run commands.
    @Test(arguments: [0o666, 0o620, 0o602] as [mode_t])
    func aConfigFileOthersCanWriteIsRefused(mode: mode_t) async throws {
        let fixture = Fixture()
        let path = try fixture.config("[default]\ncredential_process = /bin/true\n", mode: mode)
        let error = try await failure(fixture)
        guard case .untrustedFile(let refused, let reason) = error else {
            Issue.record("expected untrustedFile, got \(error)")
            return
        }
        #expect(refused == path)
        #expect(reason.contains("chmod go-w \(path)"))
    }

    @Test func aConfigFileOwnedBySomeoneElseIsRefused() async throws {
        let fixture = Fixture()
        let path = try fixture.config("[default]\ncredential_process = /bin/true\n", mode: 0o600)
        #expect(chown(path, 65534, 65534) == 0)
        let error = try await failure(fixture)
        guard case .untrustedFile(_, let reason) = error else {
            Issue.record("expected untrustedFile, got \(error)")
            return
        }
        #expect(reason.contains("belongs to user 65534"))
    }

    @Test func configFileHoldingASessionTokenInAnotherProfileIsRefusedToo() async throws {
        let fixture = Fixture()
        let path = try fixture.config(
            "[default]\nregion = us-east-1\n[profile other]\naws_session_token = \(sessionToken)\n", mode: 0o644)
        let error = try await failure(fixture)
        #expect(error == .fileReadableByOthers(path: path, mode: 0o644))
    }

    @Test func privateCredentialsFileIsAccepted() async throws {
        let fixture = Fixture()
        try fixture.credentials("[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n", mode: 0o600)
        #expect(try await fixture.provider().credentials().secretAccessKey == secretKey)
    }

    @Test func configFileWithoutSecretsMayBeReadableByAll() async throws {
        let fixture = Fixture()
        let helper = try fixture.countingHelper()
        try fixture.config("[default]\nregion = us-east-1\ncredential_process = \(helper)\n", mode: 0o644)
        #expect(try await fixture.provider().credentials().secretAccessKey == processSecret)
    }

    // MARK: nothing found

    @Test func noCredentialsAnywhereListsWhereItLookedAndHowToProvideThem() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\nregion = us-east-1\n")
        let error = try await failure(fixture)
        guard case let .noCredentials(searched) = error else {
            Issue.record("expected noCredentials, got \(error)")
            return
        }
        #expect(searched.count == 3)
        for place in ["AWS_ACCESS_KEY_ID", fixture.credentialsPath, fixture.configPath] {
            #expect(error.description.contains(place))
        }
        #expect(error.description.contains("credential_process"))
    }

    @Test func profileNamedByAwsProfileThatNoFileHasIsAnError() async throws {
        let fixture = Fixture(["AWS_PROFILE": "ghost"])
        try fixture.credentials("[default]\naws_access_key_id = \(accessKey)\naws_secret_access_key = \(secretKey)\n")
        let error = try await failure(fixture)
        #expect(error == .profileNotFound(profile: "ghost", files: [fixture.credentialsPath, fixture.configPath]))
    }

    // MARK: credential_process

    @Test func credentialProcessOutputIsParsed() async throws {
        let fixture = Fixture(["AWS_PROFILE": "field"])
        let helper = try fixture.countingHelper(expiration: "2030-01-01T00:00:00Z")
        try fixture.config("[profile field]\ncredential_process = \(helper)\n")
        let credentials = try await fixture.provider().credentials(now: try utc("2029-12-31T00:00:00Z"))
        #expect(credentials == ResolvedCredentials(
            accessKeyID: "ASIARUN1", secretAccessKey: processSecret, sessionToken: processToken,
            expiration: try utc("2030-01-01T00:00:00Z"), source: "credential_process of profile field"))
    }

    @Test func expirationWithFractionalSecondsAndOffsetIsRead() throws {
        let process = CredentialProcess(profile: "p", command: "", environment: [:], timeout: 1)
        let json = #"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2030-01-01T01:00:00.250+01:00"}"#
        let credentials = try process.parse(Array(json.utf8))
        let expected = try utc("2030-01-01T00:00:00Z").addingTimeInterval(0.25)
        #expect(abs(try #require(credentials.expiration).timeIntervalSince(expected)) < 0.001)
    }

    @Test func commandIsSplitLikeAShellSplitsIt() async throws {
        let fixture = Fixture()
        let helper = try fixture.script(
            #"printf '{"Version":1,"AccessKeyId":"%s","SecretAccessKey":"\#(processSecret)"}' "$1""#,
            named: "dir with space/helper.sh")
        try fixture.config("[default]\ncredential_process = \"\(helper)\" 'AKID WITH SPACE'\n")
        let credentials = try await fixture.provider().credentials()
        #expect(credentials.accessKeyID == "AKID WITH SPACE")
        #expect(credentials.sessionToken == nil)
        #expect(credentials.expiration == nil)
    }

    @Test func temporaryCredentialsAreKeptUntilTheMarginBeforeExpiry() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(expiration: "2030-01-01T00:00:00Z"))\n")
        let provider = fixture.provider(margin: 300)
        let expiry = try utc("2030-01-01T00:00:00Z")

        let first = try await provider.credentials(now: expiry.addingTimeInterval(-3600))
        let again = try await provider.credentials(now: expiry.addingTimeInterval(-1800))
        let lastKept = try await provider.credentials(now: expiry.addingTimeInterval(-301))
        #expect(fixture.runs == 1)
        #expect(first.accessKeyID == "ASIARUN1")
        #expect(again == first && lastKept == first)

        let renewed = try await provider.credentials(now: expiry.addingTimeInterval(-300))
        #expect(fixture.runs == 2)
        #expect(renewed.accessKeyID == "ASIARUN2")
    }

    @Test func eachRenewalIsAnnouncedButNotTheFirstResolution() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(expiration: "2030-01-01T00:00:00Z"))\n")
        let renewals = Mutex(0)
        let provider = CredentialsProvider(environment: fixture.environment, refreshMargin: 300) {
            renewals.withLock { $0 += 1 }
        }
        let expiry = try utc("2030-01-01T00:00:00Z")
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-3600))
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-1800))
        #expect(renewals.withLock { $0 } == 0)
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-300))
        #expect(renewals.withLock { $0 } == 1)
        _ = try await provider.refresh(now: expiry.addingTimeInterval(-290))
        #expect(renewals.withLock { $0 } == 2)
        #expect(fixture.runs == 3)
    }

    @Test func credentialsArrivingInsideTheMarginAreNotFetchedForEveryRequest() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(expiration: "2030-01-01T00:00:00Z"))\n")
        let provider = fixture.provider(margin: 300)
        let expiry = try utc("2030-01-01T00:00:00Z")
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-120))
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-119))
        #expect(fixture.runs == 1)
        _ = try await provider.credentials(now: expiry.addingTimeInterval(-60))
        #expect(fixture.runs == 2)
    }

    @Test func invalidateMakesTheNextCallRunTheProcessAgain() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(expiration: nil))\n")
        let provider = fixture.provider()
        let first = try await provider.credentials()
        _ = try await provider.credentials()
        #expect(fixture.runs == 1)
        await provider.invalidate()
        let second = try await provider.credentials()
        #expect(fixture.runs == 2)
        #expect(first.accessKeyID == "ASIARUN1" && second.accessKeyID == "ASIARUN2")
    }

    @Test func refreshAfterExpiredTokenRenewsOnceForAllTheRequestsThatFailed() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper())\n")
        let provider = fixture.provider()
        let now = try utc("2029-06-01T00:00:00Z")
        let rejected = try await provider.credentials(now: now)
        let renewed = try await provider.refresh(rejected: rejected, now: now)
        let alsoRenewed = try await provider.refresh(rejected: rejected, now: now)  // a second part failed too
        #expect(fixture.runs == 2)
        #expect(renewed.accessKeyID == "ASIARUN2")
        #expect(alsoRenewed == renewed)
        _ = try await provider.refresh(now: now)  // no rejected credentials given: always renews
        #expect(fixture.runs == 3)
    }

    @Test func concurrentCallersShareOneRunOfTheProcess() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(delay: "0.5"))\n")
        let provider = fixture.provider()
        let now = try utc("2029-06-01T00:00:00Z")
        let all = try await withThrowingTaskGroup(of: ResolvedCredentials.self) { group in
            for _ in 0..<8 { group.addTask { try await provider.credentials(now: now) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(all.count == 8)
        #expect(Set(all.map(\.accessKeyID)) == ["ASIARUN1"])
        #expect(fixture.runs == 1)
    }

    @Test func failingProcessNamesTheProfileAndStatusButNotItsOutput() async throws {
        let fixture = Fixture(["AWS_PROFILE": "field"])
        let helper = try fixture.script(
            """
            echo "session expired: run sso login" >&2
            printf '{"Version":1,"AccessKeyId":"A","SecretAccessKey":"\(processSecret)"}'
            exit 3
            """)
        try fixture.config("[profile field]\ncredential_process = \(helper)\n")
        let error = try await failure(fixture)
        #expect(error == .processFailed(profile: "field", termination: .exited(3), stderr: "session expired: run sso login"))
        #expect(error.description.contains("profile 'field'"))
        #expect(error.description.contains("exited with status 3"))
        #expect(error.description.contains("session expired: run sso login"))
    }

    @Test func failureIsNotKeptAndTheNextCallTriesAgain() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.script("exit 1"))\n")
        let provider = fixture.provider()
        for _ in 0..<2 { _ = try? await provider.credentials() }
        #expect(fixture.runs == 2)
    }

    @Test(arguments: [
        (#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"\#(processSecret)""#, "output that is not JSON"),
        (#"{"Version":2,"AccessKeyId":"A","SecretAccessKey":"\#(processSecret)"}"#, "Version 2, where only 1 is supported"),
        (#"{"AccessKeyId":"A","SecretAccessKey":"\#(processSecret)"}"#, "no Version (it must be 1)"),
        (#"{"Version":1,"AccessKeyId":"A"}"#, "no SecretAccessKey"),
        (#"{"Version":1,"AccessKeyId":7,"SecretAccessKey":"\#(processSecret)"}"#, "a AccessKeyId that is not a string"),
        (#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"\#(processSecret)","Expiration":"tomorrow"}"#,
         "an Expiration that is not an ISO 8601 time such as 2030-01-01T00:00:00Z"),
        ("", "nothing on its standard output"),
    ])
    func unusableOutputIsRejectedWithoutBeingShown(output: String, problem: String) async throws {
        let fixture = Fixture(["AWS_PROFILE": "field"])
        let helper = try fixture.script("printf '%s' \(shellQuoted(output))")
        try fixture.config("[profile field]\ncredential_process = \(helper)\n")
        let error = try await failure(fixture)
        #expect(error == .processOutputInvalid(profile: "field", problem: problem))
    }

    @Test func credentialsThatAlreadyExpiredAreAnError() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = \(try fixture.countingHelper(expiration: "2020-01-01T00:00:00Z"))\n")
        let error = try await failure(fixture, now: try utc("2025-01-01T00:00:00Z"))
        #expect(error == .processCredentialsExpired(profile: "default", expiration: try utc("2020-01-01T00:00:00Z")))
    }

    @Test func processThatHangsIsKilledAfterTheTimeout() async throws {
        let fixture = Fixture()
        let pids = fixture.runsPath + ".pids"
        let holders = try HolderPipe(in: fixture.directory)
        try fixture.config(
            "[default]\ncredential_process = \(try fixture.script("\(holders.holdCommand); echo $$ > \(pids); sleep 300 & echo $! >> \(pids); sleep 300"))\n")
        let started = ContinuousClock.now
        let error = try await failure(fixture, timeout: 0.5)
        #expect(error == .processTimedOut(profile: "default", seconds: 0.5))
        #expect(ContinuousClock.now - started < .seconds(120), "it did not wait for the helper's sleep 300")
        // The helper and what it started in the background are gone, not merely abandoned.
        let helpers = try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
        #expect(helpers.count == 2)
        #expect(holders.holdersGone(), "the helper's processes \(helpers) still run")
    }

    @Test func missingCommandReportsTheShellsComplaint() async throws {
        let fixture = Fixture()
        try fixture.config("[default]\ncredential_process = /nonexistent/helper --flag\n")
        let error = try await failure(fixture)
        guard case let .processFailed(profile, termination, stderr) = error else {
            Issue.record("expected processFailed, got \(error)")
            return
        }
        #expect(profile == "default")
        #expect(termination == .exited(127))  // POSIX: command not found
        #expect(stderr.contains("/nonexistent/helper"))
    }

    // MARK: redaction

    @Test func everyTextualFormOfCredentialsRedactsTheSecretAndToken() {
        let credentials = ResolvedCredentials(
            accessKeyID: accessKey, secretAccessKey: secretKey, sessionToken: sessionToken,
            expiration: Date(timeIntervalSince1970: 1_893_456_000), source: "environment")
        var dumped = ""
        dump(credentials, to: &dumped)
        for text in [
            credentials.description, credentials.debugDescription, String(describing: credentials),
            String(reflecting: credentials), "\(credentials)", dumped, String(describing: [credentials]),
            String(describing: Optional(credentials)),
        ] {
            expectNoSecrets(text)
            #expect(text.contains(accessKey))
        }
        #expect(credentials.description.contains("2030-01-01T00:00:00Z"))
    }
}
