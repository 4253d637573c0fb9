/// The life of one upload, as a value: events go in, the actions to perform come out, and
/// nothing here touches the disk or the network. A multipart upload and a single
/// `PutObject` (a plan of one part, ``PartPlan/isSinglePut``) live the same life: planned,
/// sent, verified, journalled at the same points. So does a large file whose parts go out
/// while the card is read (the streaming phase, `UploadStateMachine+Streaming.swift`).
///
/// Its owner performs the actions in the order given and reports what came of them as the
/// next events. The split is async-http-client's `Transaction+StateMachine`: every decision
/// about the upload is here, where a test can drive it step by step — the key found taken
/// and the alternative key, the object found already there, restarts, a staged copy found
/// gone or changed, a stop, every way the upload ends — and every side effect is in the
/// owner.
///
/// ```
/// created ──start──▶ (createUpload) ──uploadCreated──▶ initiated ──first ack──▶ uploading
///    │                                                     │                         │
///    │ resumed with an upload id: start ▶ listParts ▶ partsListed (reconcile) ───────┤
///    │                                                                               ▼
///    │                      completed ◀──verify, objectAlreadyExists── (completing) ◀─ last ack
///    │
///    └─ uploadGone (NoSuchUpload): a new upload, at most `maxRestarts` times, else failed
///       abortRequested: aborting ──abortConfirmed──▶ aborted
///
/// single PUT:
/// created ──start──▶ (putObject) ──objectPut──▶ verify ──▶ completed
///    resumed in any other phase: verify first; the object missing, putObject
///
/// around both (start(.fresh/.resumed/.confirming)):
///    resumed: checkStagedCopy first; gone ▶ lookAtKey (ours, else restage); changed ▶ restage
///    lookAtKey before a write the server would not refuse in time: free ▶ go on,
///    ours ▶ done, taken ▶ startAgain(.alternative) (or failed, on the alternative key already)
///    a write refused as taken (412) ▶ lookAtKey ▶ ours, taken (as above) or failed
///
/// streaming (startStreaming): lookAtKey ▶ createUpload ▶ beginStream ▶ waitForPart /
///    streamParts as the copy grows ▶ waitForCopyEnd ▶ awaitClaim ▶ handOff (the journal
///    adopts it: the upload goes on from `uploading`) or abort
/// ```
///
/// Rules the owner relies on:
/// - **Persist before depending.** Every `persist` comes before the action that relies on
///   it: an acknowledged part is in the journal before the next part or `Complete` is sent;
///   a restart's count is in the journal before the new upload is created. A `kill -9` at
///   any point then resumes from a snapshot that is true, or behind by the parts in flight,
///   which reconciliation finds again. An action that fails (a journal write, a local step)
///   is reported with ``ownerFailed()`` and the actions queued after it are dropped: the
///   machine's answer replaces them.
/// - **Stale answers are ignored, never trapped.** Parts are sent concurrently, so after
///   `NoSuchUpload`, a failure or an abort, answers for requests already on the wire keep
///   arriving. Events that name an upload id other than the current one, and part answers
///   after the machine stopped waiting for them, return no actions.
/// - **Impossible transitions trap.** An event that cannot happen in the current state (an
///   acknowledgement of a part never sent, `uploadCreated` when nothing was created) is a
///   bug in the owner; `preconditionFailure` names the state and the event.
/// - **Retries are the owner's.** The owner runs ``RetryPolicy`` for each request and
///   reports only the decisions that end a request: ``RetryDecision/restartUpload`` and
///   ``RetryDecision/fail(_:)``. A decision to send the same request again does not change
///   the upload, so reporting one traps.
public struct UploadStateMachine: Sendable {
    /// Limits the owner sets from the configuration.
    public struct Configuration: Sendable, Equatable {
        /// How many times one logical upload may start over after the server forgot it
        /// (`NoSuchUpload`: aborted, expired by a lifecycle rule, server data lost). Bounded,
        /// because a server that keeps forgetting would otherwise take the file's bytes again
        /// and again forever.
        public var maxRestarts: Int
        /// Parts sent at once: the owner's memory and connection budget for this file.
        public var partsInFlight: Int
        /// The server honours `If-None-Match: *`, so a write to a taken key is refused (`412`).
        /// A server that ignores it gets a look at the key before every write instead.
        public var conditionalWrites: Bool

        /// A configuration; a negative `maxRestarts` counts as 0 and a `partsInFlight` below
        /// 1 as 1, so a bad configuration value cannot make an upload that never sends.
        public init(maxRestarts: Int = 3, partsInFlight: Int = 4, conditionalWrites: Bool = true) {
            self.maxRestarts = max(0, maxRestarts)
            self.partsInFlight = max(1, partsInFlight)
            self.conditionalWrites = conditionalWrites
        }
    }

    /// The phase the journal records, from which a later run resumes.
    public enum Phase: String, Codable, Sendable, CaseIterable {
        /// Planned; nothing on the server yet (or a restart is creating a new upload).
        case created
        /// The server gave an upload id; no part acknowledged yet.
        case initiated
        /// Some parts are acknowledged.
        case uploading
        /// Every part is acknowledged and `CompleteMultipartUpload` was sent (or is about to
        /// be); for a single PUT, its `PutObject` was sent (or is about to be). The object
        /// may exist already: a resume checks before anything else.
        case completing
        /// The server completed the object. (A resume verifies it once more.)
        case completed
        /// Given up; the snapshot keeps the upload id and the parts, so a later run can try
        /// again or abort it.
        case failed
        /// An abort was sent and not yet confirmed: a resume finishes the abort, it never
        /// uploads what the user gave up.
        case aborting
        /// The server forgot the upload on our request.
        case aborted
    }

    /// A part the server acknowledged, as the journal keeps it.
    public struct AcknowledgedPart: Codable, Sendable, Hashable {
        public var number: Int
        /// Exactly as the server returned it, quotes included: `Complete` sends it back so.
        public var etag: String
        public var size: Int64
        /// The integrity digest sent with the part (``PartDigest``'s journal form): what the
        /// whole-object check after `Complete` is computed from.
        public var digest: String?

        public init(number: Int, etag: String, size: Int64, digest: String? = nil) {
            self.number = number
            self.etag = etag
            self.size = size
            self.digest = digest
        }
    }

    /// A part as `ListParts` reports it.
    public struct RemotePart: Sendable, Hashable {
        public var etag: String
        public var size: Int64

        public init(etag: String, size: Int64) {
            self.etag = etag
            self.size = size
        }
    }

    /// What the journal stores for one upload: enough to resume after `kill -9`.
    public struct Snapshot: Sendable, Equatable {
        /// Our id for the upload, stable across restarts on the server.
        public var logicalUploadID: String
        /// The staged file.
        public var file: String
        public var fingerprint: Fingerprint
        public var plan: PartPlan
        public var phase: Phase
        /// The server's id of the current multipart upload, once known.
        public var uploadID: String?
        /// Acknowledged parts of the current upload, by part number.
        public var parts: [AcknowledgedPart]
        /// Times the upload started over after `NoSuchUpload`.
        public var restartCount: Int
        /// Why it failed, in phase ``Phase/failed``.
        public var failure: UploadFailure?

        public init(
            logicalUploadID: String, file: String, fingerprint: Fingerprint, plan: PartPlan, phase: Phase,
            uploadID: String?, parts: [AcknowledgedPart], restartCount: Int, failure: UploadFailure?
        ) {
            self.logicalUploadID = logicalUploadID
            self.file = file
            self.fingerprint = fingerprint
            self.plan = plan
            self.phase = phase
            self.uploadID = uploadID
            self.parts = parts
            self.restartCount = restartCount
            self.failure = failure
        }
    }

    /// Why the object is being verified.
    enum VerifyPurpose: Sendable {
        /// Resumed in `completing`: did the last run's `Complete` succeed?
        case resumeAfterComplete
        /// `Complete` met `NoSuchUpload`: a first attempt that got no answer may have
        /// succeeded, so look before starting over.
        case completeLostUpload
        /// `Complete` succeeded: check the object is ours. `etag` is the one its answer gave,
        /// nil where it gave none (Ceph RGW 16).
        case confirmCompleted(etag: String?)
    }

    /// What the staged copy is checked for.
    enum CheckPurpose: Sendable {
        /// A resume, before anything is sent.
        case resume
        /// The server refused a part's bytes (or the object's): does the copy still hash right?
        case refused(part: Int?)
    }

    /// A stream's progress while the copy grows.
    struct Stream: Sendable {
        var uploadID: String
        /// Parts the copy holds, with their checksums: 1 through `staged`.
        var staged = 0
        /// The next part to send.
        var next = 1
        var inFlight: Set<Int> = []
        /// A wait (``Action/waitForPart(_:)``, ``Action/waitForCopyEnd``) is outstanding.
        var waiting = false
        /// Parts are still sent: false once a part gave up or the process is stopping.
        var sending = true
        /// How the copy ended, once it did.
        var copyEnded: CopyEnd?
    }

    enum CopyEnd: Sendable {
        case complete
        case failed
    }

    enum State: Sendable {
        /// Before ``start(_:)``: new (`created`) or resumed from a snapshot in `phase`.
        case idle(phase: Phase, uploadID: String?, failure: UploadFailure?)
        /// The staged copy is being re-read; `phase` and `uploadID` as they were.
        case checkingStagedCopy(CheckPurpose, phase: Phase, uploadID: String?)
        /// `HeadObject` of the key sent; `phase` and `uploadID` as they were.
        case lookingAtKey(KeyLook, phase: Phase, uploadID: String?)
        /// The journal is starting the upload again from nothing, on the alternative key or not.
        case startingAgain(alternative: Bool)
        /// The upload is being dropped for its staged copy's trouble.
        case restaging(StagedCopyTrouble)
        /// `CreateMultipartUpload` sent.
        case creating
        /// A single PUT's `PutObject` sent.
        case putting
        /// `ListParts` sent; the journal's parts wait to be compared.
        case reconciling(uploadID: String)
        /// Parts being sent. `queue` holds the parts still to send, the smallest last.
        case uploading(uploadID: String, queue: [Int], inFlight: Set<Int>)
        /// `CompleteMultipartUpload` sent.
        case completing(uploadID: String)
        /// `HeadObject` sent.
        case verifying(uploadID: String?, purpose: VerifyPurpose)
        /// `AbortMultipartUpload` sent.
        case aborting(uploadID: String)
        /// Streaming: `CreateMultipartUpload` sent.
        case streamCreating
        /// Streaming: the stream is being journalled.
        case streamBeginning(uploadID: String)
        /// Streaming: parts go out as the copy grows.
        case streaming(Stream)
        /// Streaming: the copy is complete, every part sent answered; waiting for the claim.
        case streamed(uploadID: String)
        /// Streaming: handed to the claim; only an abort may follow.
        case handedOff(uploadID: String)
        /// Streaming: the stream's upload is being aborted.
        case streamAborting(uploadID: String)
        /// Stopped: left as the journal has it.
        case interrupted(phase: Phase, uploadID: String?)
        /// Ended. A failed upload keeps its upload id, for a later run to reconcile or abort.
        case done(Outcome, uploadID: String?)
    }

    public let logicalUploadID: String
    public let file: String
    public let plan: PartPlan
    public let configuration: Configuration
    public internal(set) var restartCount: Int
    /// The key is the file's alternative key already: taken too, the upload fails.
    public internal(set) var onAlternativeKey: Bool
    /// The content's fingerprint; a stream learns it when the copy completes.
    var knownFingerprint: Fingerprint?
    /// Changed only by the machine's own files.
    var state: State
    /// Acknowledged parts by number (index 0 unused): a snapshot lists them in order in
    /// O(parts), where a dictionary would sort on every acknowledgement.
    var acknowledged: [AcknowledgedPart?]

    /// A new upload: nothing on the server yet. `onAlternativeKey`: the key is the file's
    /// alternative key already.
    public init(
        logicalUploadID: String, file: String, fingerprint: Fingerprint, plan: PartPlan,
        configuration: Configuration = Configuration(), onAlternativeKey: Bool = false
    ) {
        self.init(
            id: logicalUploadID, file: file, fingerprint: fingerprint, plan: plan, configuration: configuration,
            onAlternativeKey: onAlternativeKey)
    }

    /// A new upload, of content known (`fingerprint`) or still being read (nil: a stream).
    init(
        id: String, file: String, fingerprint: Fingerprint?, plan: PartPlan, configuration: Configuration,
        onAlternativeKey: Bool
    ) {
        self.logicalUploadID = id
        self.file = file
        self.knownFingerprint = fingerprint
        self.plan = plan
        self.configuration = configuration
        self.restartCount = 0
        self.onAlternativeKey = onAlternativeKey
        self.state = .idle(phase: .created, uploadID: nil, failure: nil)
        self.acknowledged = Array(repeating: nil, count: plan.partCount + 1)
    }

    /// An upload resumed from its journal snapshot; call ``start(_:)`` to go on. Parts the
    /// snapshot lists outside the plan are dropped (they cannot be ours).
    public init(resuming snapshot: Snapshot, configuration: Configuration = Configuration(), onAlternativeKey: Bool = false) {
        self.init(
            logicalUploadID: snapshot.logicalUploadID, file: snapshot.file, fingerprint: snapshot.fingerprint,
            plan: snapshot.plan, configuration: configuration, onAlternativeKey: onAlternativeKey)
        restartCount = snapshot.restartCount
        for part in snapshot.parts where plan.partNumbers.contains(part.number) {
            acknowledged[part.number] = part
        }
        switch snapshot.phase {
        case .aborted: state = .done(.aborted, uploadID: nil)
        default: state = .idle(phase: snapshot.phase, uploadID: snapshot.uploadID, failure: snapshot.failure)
        }
    }

    // MARK: what the owner may read

    /// The content's fingerprint. A stream knows it only once its copy is complete: asking
    /// before is a bug in the owner.
    public var fingerprint: Fingerprint {
        guard let knownFingerprint else { impossible("fingerprint (the copy is not complete)") }
        return knownFingerprint
    }

    /// The phase the journal would record now.
    public var phase: Phase {
        switch state {
        case let .idle(phase, _, _): phase
        case let .checkingStagedCopy(_, phase, _), let .lookingAtKey(_, phase, _), let .interrupted(phase, _): phase
        case .startingAgain, .restaging, .creating, .putting, .streamCreating: .created
        case .reconciling, .uploading, .streamBeginning, .streaming, .streamed, .handedOff:
            acknowledgedParts.isEmpty ? .initiated : .uploading
        case .completing: .completing
        // Completed only once verified: a kill between the server's Complete and the look that
        // verifies it leaves the upload completing, which the next process takes up (its
        // ListParts finds the upload gone, and the look at the key finds the object ours).
        case .verifying: .completing
        case .aborting, .streamAborting: .aborting
        case let .done(outcome, _):
            switch outcome {
            case .uploaded, .alreadyUploaded, .foundAtKey: .completed
            case .failed, .notStreamed: .failed
            case .aborted, .restaged: .aborted
            case .interrupted: .failed
            }
        }
    }

    /// The object is being looked at right after this machine's own `Complete` (or single
    /// PUT) succeeded: what is at the key was written by it, where the key was free.
    public var isConfirmingCompletion: Bool {
        if case .verifying(_, .confirmCompleted) = state { return true }
        return false
    }

    /// The server's id of the current upload, once known.
    public var uploadID: String? {
        switch state {
        case let .idle(_, id, _), let .checkingStagedCopy(_, _, id), let .lookingAtKey(_, _, id), let .interrupted(_, id): id
        case .creating, .putting, .startingAgain, .restaging, .streamCreating: nil
        case let .done(_, id): id
        case let .reconciling(id), let .uploading(id, _, _), let .completing(id), let .aborting(id): id
        case let .streamBeginning(id), let .streamed(id), let .handedOff(id), let .streamAborting(id): id
        case let .streaming(stream): stream.uploadID
        case let .verifying(id, _): id
        }
    }

    /// The acknowledged parts, by part number.
    public var acknowledgedParts: [AcknowledgedPart] { acknowledged.compactMap { $0 } }

    /// What the journal stores now.
    public var snapshot: Snapshot {
        var failure: UploadFailure?
        switch state {
        case let .idle(_, _, idleFailure): failure = idleFailure
        case let .done(.failed(reason), _): failure = reason
        default: failure = nil
        }
        return Snapshot(
            logicalUploadID: logicalUploadID, file: file, fingerprint: fingerprint, plan: plan, phase: phase,
            uploadID: uploadID, parts: acknowledgedParts, restartCount: restartCount, failure: failure)
    }

    // MARK: shared by the machine's files

    func impossible(_ event: String, file: StaticString = #file, line: UInt = #line) -> Never {
        preconditionFailure(
            "UploadStateMachine: event \(event) is impossible in state \(stateName) "
                + "(logical upload \(logicalUploadID))", file: file, line: line)
    }

    var stateName: String {
        switch state {
        case let .idle(phase, _, _): "idle(\(phase.rawValue))"
        case .checkingStagedCopy: "checkingStagedCopy"
        case let .lookingAtKey(look, _, _): "lookingAtKey(\(look))"
        case .startingAgain: "startingAgain"
        case .restaging: "restaging"
        case .creating: "creating"
        case .putting: "putting"
        case .reconciling: "reconciling"
        case .uploading: "uploading"
        case .completing: "completing"
        case .verifying: "verifying"
        case .aborting: "aborting"
        case .streamCreating: "streamCreating"
        case .streamBeginning: "streamBeginning"
        case .streaming: "streaming"
        case .streamed: "streamed"
        case .handedOff: "handedOff"
        case .streamAborting: "streamAborting"
        case .interrupted: "interrupted"
        case let .done(outcome, _): "done(\(outcome))"
        }
    }

    static func text(_ reason: FailReason) -> String {
        switch reason {
        case .notRetryable: "the server's error is not one that sending again can fix"
        case .recoveryDidNotHelp: "the one recovery allowed (clock, credentials or re-read) did not help"
        case let .attemptsExhausted(attempts): "all \(attempts) attempts failed"
        }
    }
}
