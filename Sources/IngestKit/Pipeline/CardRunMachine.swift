/// The life of one card's run (``CardRun``) as a value: what the run learnt goes in as events
/// (the card scanned, its labels read, its copy ended, a stop asked for); the steps to take
/// come out as actions. Nothing here touches a card, the journal or a thread, so every rule
/// is tested step by step (CardRunMachineTests). The split is the one of
/// ``CardWatchMachine``.
///
/// The owner performs the actions in the order given. The last action of each list is a
/// step whose end is the next event (``Action/isStep``); one that throws is ``Event/failed(_:)``
/// instead, and the actions after it in the list are not performed. Before each event, the
/// owner tells a stop asked for since the last (``Event/stopRequested(_:)``).
///
/// ```
/// starting ─a card seen before, or none of its files stream─▶ scanning (copying early
///   │                                                         when the card is new)
///   └─a new card whose large files stream─▶ waitingForLabels(toStream) ─▶ startingUploads
///                                             ─▶ scanning, copying early, with its streams
/// scanning ─scanned─▶ startingUploads ─▶ queueing ─▶ [waitingForLabels(toPlan)] ─▶ copying
///   (no upload: scanning ─scanned─▶ copying)
/// copying ─copied─▶ streaming ─streams ended─▶ endingCopy ─copying noted─▶ uploading
///   ─uploads finished─▶ closing ─synced─▶ judging ─judged─▶ done, or stopped
/// nothing to copy: queueing ─▶ endingCopy; stopped: no endingCopy
/// a failure before the run has its summary: ─▶ [failing: the uploads started end] ─▶ stopped
/// ```
///
/// Rules the owner relies on:
/// - **A new card is copied while it is scanned**, on the core the scan leaves idle. When
///   its large files may stream, their streams are known before its copy starts: its labels
///   are read and its uploads started first (recovery, the runner), so the card reader never
///   waits on the run to know whether a file streams.
/// - **Labels are read only when a file needs an upload planned**: a rescan of an ingested
///   card reads nothing on it. A new card's labels read early count only if it has files to
///   stage. A problem with them lets the card be staged; the run reports it at its end.
/// - **A stop** starts no copy, ends a copy started early at once (the stager is cancelled by
///   ``IngestStop`` itself), leaves the end of copying unnoted and writes no history; the run
///   still waits for its uploads, syncs the journal and judges the card.
/// - **Failures, by when.** Before the scan is journalled and the uploads started (scan,
///   recovery): the run ends without a summary, its early copy and uploads ended. From the
///   pending uploads to the end of copying: the run stops, says why in its summary, and
///   still waits for its uploads. Once the uploads ended (the journal's sync, the verdict):
///   the run ends with the error but its summary says it ran, and writes no history.
/// - **Impossible events trap.** An event the owner cannot have seen in this state is a bug
///   in the owner; `preconditionFailure` names the event and the state.
///   ``accepts(_:in:)`` is the table of what each state takes.
struct CardRunMachine: Sendable {
    /// What the run learnt.
    enum Event: Sendable, Equatable {
        /// The volume is identified, locked and noted; `firstSeen`: the journal never saw it.
        case volumeNoted(firstSeen: Bool)
        /// The card's labels are read: nil, the card can be planned; else why not.
        case labelsRead(problem: IngestError?)
        /// Recovery is done and the runner made.
        case uploadsStarted
        /// The card is scanned and the scan journalled.
        case scanned(filesToStage: Bool)
        /// The uploads earlier runs left are queued; `unplanned`: files are staged with none.
        case pendingQueued(unplanned: Bool)
        /// The copy's last outcome is journalled.
        case copied
        /// The claims of streamed files are in, the streams ended, the copy's threads gone.
        case streamsEnded
        /// The journal knows every file the scan found.
        case copyingNoted
        case uploadsFinished
        case synced
        case judged
        /// The step under way threw.
        case failed(IngestError)
        case stopRequested(IngestStop.Reason)

        /// The event without its values, for ``accepts(_:in:)``.
        var kind: Kind {
            switch self {
            case .volumeNoted: .volumeNoted
            case .labelsRead: .labelsRead
            case .uploadsStarted: .uploadsStarted
            case .scanned: .scanned
            case .pendingQueued: .pendingQueued
            case .copied: .copied
            case .streamsEnded: .streamsEnded
            case .copyingNoted: .copyingNoted
            case .uploadsFinished: .uploadsFinished
            case .synced: .synced
            case .judged: .judged
            case .failed: .failed
            case .stopRequested: .stopRequested
            }
        }

        enum Kind: Sendable, CaseIterable {
            case volumeNoted, labelsRead, uploadsStarted, scanned, pendingQueued, copied, streamsEnded, copyingNoted
            case uploadsFinished, synced, judged, failed, stopRequested
        }
    }

    /// What the owner does next. Perform them in order.
    enum Action: Sendable, Equatable {
        /// Read the card's scene file and make its planner; answer ``Event/labelsRead(problem:)``.
        case readLabels
        /// Take up what a process that stopped uncleanly left, make the runner and follow the
        /// card; answer ``Event/uploadsStarted``.
        case startUploads
        /// Start copying the card's files as a second walk finds them, their outcomes waiting
        /// for ``journalCopies``. `forUpload`: read as for an upload (direct, the parts'
        /// CRC32Cs taken); `streams`: large files stream while copied.
        case startCopying(forUpload: Bool, streams: Bool)
        /// Scan the card, tell what it found and journal it; answer ``Event/scanned(filesToStage:)``.
        case scan
        /// Queue the uploads earlier runs left; answer ``Event/pendingQueued(unplanned:)``.
        case queuePending
        /// Plan and queue the uploads of files staged without one.
        case queueUnplanned
        /// Journal the copy's outcomes as they come and queue their uploads; answer ``Event/copied``.
        case journalCopies
        /// Wait for the streamed files' claims, end the streams, then the copy; answer
        /// ``Event/streamsEnded``.
        case awaitStreams
        /// Stop the copy, drop what it did not report, end its streams.
        case abandonCopy
        /// Note that every file the scan found is journalled; answer ``Event/copyingNoted``.
        case noteCopyingEnded
        /// Wait for the uploads; answer ``Event/uploadsFinished``.
        case finishUploads
        /// Sync the journal, count the card's quarantined files; answer ``Event/synced``.
        case sync
        /// Write the card's history to the bucket.
        case writeHistory
        /// Judge whether the card is safe to erase; answer ``Event/judged``.
        case judge
        /// The run ended: tell its summary, `stoppedBy` in it; then throw `error`, if any.
        case report(error: IngestError?, stoppedBy: String?)
        /// The run ended before it had a summary: throw `error`.
        case fail(IngestError)

        /// Whether its end is the next event (or, for the last two, the end of the run).
        var isStep: Bool {
            switch self {
            case .startCopying, .queueUnplanned, .abandonCopy, .writeHistory: false
            default: true
            }
        }
    }

    /// Why the run waits for the card's labels.
    enum Need: Sendable, Equatable {
        /// A new card's large files stream while copied: the planner must be known first.
        case toStream
        /// Files need an upload planned.
        case toPlan
    }

    /// Where the run is.
    enum State: Sendable, Equatable {
        /// Until the volume is noted.
        case starting
        case waitingForLabels(Need)
        /// Recovery and the runner.
        case startingUploads
        /// A copy started early may run meanwhile (``isCopyingEarly``).
        case scanning
        /// The uploads earlier runs left are queued.
        case queueing
        /// Its outcomes journalled as they come.
        case copying
        /// The copy's last outcome is in: the streamed files' claims wait for their streams.
        case streaming
        /// The journal notes that copying ended (every file the scan found is journalled).
        case endingCopy
        case uploading
        /// The journal synced.
        case closing
        /// The card judged.
        case judging
        /// The run failed before its summary: its uploads end, then it stops.
        case failing(IngestError)
        /// Ended, with its summary.
        case done
        /// Ended early: asked to, or an error stopped it.
        case stopped
    }

    /// Where the run's uploads are: `off` for a run that uploads nothing (`--no-upload`).
    private enum Uploads: Sendable, Equatable { case off, notStarted, started, finished }
    /// What is known of the card's labels (its scene file, its device's).
    private enum Labels: Sendable, Equatable { case unread, known, problem(IngestError) }
    /// Where the card's copy is; `running` before the scan ends is a copy started early.
    private enum Copy: Sendable, Equatable { case none, running, ended }

    private(set) var state = State.starting
    private var uploads: Uploads
    /// Whether large files stream while copied once the card's labels are known.
    let streamsLargeFiles: Bool
    private var labels = Labels.unread
    private var copy = Copy.none
    /// nil until the scan is journalled.
    private var filesToStage: Bool?
    private var unplanned = false
    private(set) var stop: IngestStop.Reason?
    /// The first error; `stops`: it stopped the run (said in the summary).
    private var failure: (error: IngestError, stops: Bool)?

    /// `uploading`: the run uploads (not `--no-upload`); `streaming`: it may stream large
    /// files while they are copied (``UploadSettings/streamParts``, with the card's CRC32Cs).
    init(uploading: Bool, streaming: Bool) {
        uploads = uploading ? .notStarted : .off
        streamsLargeFiles = uploading && streaming
    }

    /// Whether a copy started before the scan ended runs.
    var isCopyingEarly: Bool { copy == .running && filesToStage == nil }

    /// What each state takes; any other event there is impossible.
    static func accepts(_ event: Event.Kind, in state: State) -> Bool {
        switch (state, event) {
        case (.done, _), (.stopped, _): false
        case (_, .stopRequested): true
        case (.starting, .volumeNoted): true
        case (.waitingForLabels, .labelsRead): true
        case (.startingUploads, .uploadsStarted), (.startingUploads, .failed): true
        case (.scanning, .scanned), (.scanning, .failed): true
        case (.queueing, .pendingQueued), (.queueing, .failed): true
        case (.copying, .copied), (.copying, .failed): true
        case (.streaming, .streamsEnded), (.streaming, .failed): true
        case (.endingCopy, .copyingNoted), (.endingCopy, .failed): true
        case (.uploading, .uploadsFinished), (.failing, .uploadsFinished): true
        case (.closing, .synced), (.closing, .failed): true
        case (.judging, .judged), (.judging, .failed): true
        default: false
        }
    }

    // MARK: events

    mutating func handle(_ event: Event) -> [Action] {
        guard Self.accepts(event.kind, in: state) else { impossible(event) }
        switch event {
        case .stopRequested(let reason):
            return stopRequested(reason)
        case .volumeNoted(let firstSeen):
            guard firstSeen, stop == nil else { return scan() }
            if streamsLargeFiles {
                state = .waitingForLabels(.toStream)
                return [.readLabels]
            }
            copy = .running
            return [.startCopying(forUpload: uploads != .off, streams: false)] + scan()
        case .labelsRead(let problem):
            labels = problem.map { .problem($0) } ?? .known
            guard state == .waitingForLabels(.toStream) else { return planned() }
            // Stopped meanwhile: nothing is copied early, the uploads start after the scan.
            guard stop == nil else { return scan() }
            state = .startingUploads
            return [.startUploads]
        case .uploadsStarted:
            uploads = .started
            guard filesToStage != nil else {
                guard stop == nil else { return scan() }
                copy = .running
                return [.startCopying(forUpload: true, streams: labels == .known)] + scan()
            }
            state = .queueing
            return [.queuePending]
        case .scanned(let filesToStage):
            self.filesToStage = filesToStage
            switch uploads {
            case .notStarted:
                state = .startingUploads
                return [.startUploads]
            case .started:
                state = .queueing
                return [.queuePending]
            case .off:
                return planned()
            case .finished:
                impossible(event)
            }
        case .pendingQueued(let unplanned):
            self.unplanned = unplanned
            return planned()
        case .copied:
            state = .streaming
            return [.awaitStreams]
        case .streamsEnded:
            copy = .ended
            return copyEnded()
        case .copyingNoted:
            return finishUploads()
        case .uploadsFinished:
            uploads = .finished
            if case .failing(let error) = state {
                state = .stopped
                return [.fail(error)]
            }
            state = .closing
            return [.sync]
        case .synced:
            state = .judging
            let history = uploads != .off && failure == nil && stop == nil
            return (history ? [.writeHistory] : []) + [.judge]
        case .judged:
            return report()
        case .failed(let error):
            return failed(error)
        }
    }

    // MARK: transitions

    private mutating func scan() -> [Action] {
        state = .scanning
        return [.scan]
    }

    /// The pending uploads are queued (or none is run): read the labels if a file needs an
    /// upload planned, then copy what is to copy.
    private mutating func planned() -> [Action] {
        let needsLabels = uploads != .off && (filesToStage == true || unplanned)
        if needsLabels, labels == .unread {
            state = .waitingForLabels(.toPlan)
            return [.readLabels]
        }
        var actions: [Action] = unplanned && labels == .known ? [.queueUnplanned] : []
        if filesToStage == true, stop == nil {
            state = .copying
            if copy == .none {
                copy = .running
                // A card whose labels fail is staged as one that is not uploaded.
                let forUpload = uploads != .off && labels == .known
                actions.append(.startCopying(forUpload: forUpload, streams: streamsLargeFiles && forUpload))
            }
            return actions + [.journalCopies]
        }
        if copy == .running {
            copy = .ended
            actions.append(.abandonCopy)
        }
        return actions + copyEnded()
    }

    private mutating func copyEnded() -> [Action] {
        guard stop == nil else { return finishUploads() }
        state = .endingCopy
        return [.noteCopyingEnded]
    }

    private mutating func finishUploads() -> [Action] {
        if uploads == .started {
            state = .uploading
            return [.finishUploads]
        }
        state = .closing
        return [.sync]
    }

    private mutating func report() -> [Action] {
        let needsLabels = filesToStage == true || unplanned
        let labelProblem: IngestError? = if needsLabels, case .problem(let error) = labels { error } else { nil }
        let stoppedBy: String? =
            if let failure { failure.stops ? failure.error.description : nil } else { stop?.rawValue }
        state = failure?.stops == true || stop != nil ? .stopped : .done
        return [.report(error: failure?.error ?? labelProblem, stoppedBy: stoppedBy)]
    }

    private mutating func stopRequested(_ reason: IngestStop.Reason) -> [Action] {
        stop = reason
        // A copy that started early ends now; one whose outcomes are journalled ends with
        // them (the stager is cancelled already).
        guard copy == .running, state != .copying, state != .streaming else { return [] }
        copy = .ended
        return [.abandonCopy]
    }

    private mutating func failed(_ error: IngestError) -> [Action] {
        switch state {
        case .startingUploads, .scanning:
            // Before the run has a summary: what started ends, then the run fails.
            var actions: [Action] = []
            if copy == .running {
                copy = .ended
                actions.append(.abandonCopy)
            }
            guard uploads == .started else {
                state = .stopped
                return actions + [.fail(error)]
            }
            state = .failing(error)
            return actions + [.finishUploads]
        case .queueing, .copying, .streaming, .endingCopy:
            failure = (error, true)
            var actions: [Action] = []
            if copy == .running {
                copy = .ended
                actions.append(.abandonCopy)
            }
            return actions + finishUploads()
        case .closing:
            failure = failure ?? (error, false)
            state = .judging
            return [.judge]
        case .judging:
            failure = failure ?? (error, false)
            return report()
        default:
            impossible(.failed(error))
        }
    }

    private func impossible(_ event: Event, file: StaticString = #file, line: UInt = #line) -> Never {
        preconditionFailure("CardRunMachine: event \(event) is impossible in state \(stateName)", file: file, line: line)
    }

    /// E.g. `scanning, copying early, uploads started, labels known, stop: nil`.
    var stateName: String {
        var parts = ["\(state)"]
        if isCopyingEarly { parts.append("copying early") }
        parts.append("uploads \(uploads)")
        parts.append("labels \(labels)")
        if let stop { parts.append("stop: \(stop.rawValue)") }
        return parts.joined(separator: ", ")
    }
}
