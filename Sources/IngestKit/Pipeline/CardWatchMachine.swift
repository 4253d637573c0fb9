/// The life of `ingest watch` as a value: udev's events, the ends of card ingests and the
/// request to stop go in; the actions to perform come out. Nothing here touches udev, a
/// card or a thread, so every rule is tested step by step (CardWatchMachineTests).
///
/// Its owner, ``CardWatcher``, performs the actions in the order given and reports what
/// came of them as the next events. The split is the one of ``UploadStateMachine``.
///
/// ```
/// the watcher:
///   watching ──shutdownRequested, or the monitor failed──▶ draining
///   draining ──no ingest left and the monitor's events ended──▶ stopped
///
/// a card, by kernel name:
///   (none) ──a card──▶ waiting ──a free slot──▶ ingesting ──ended──▶ (none)
///                         │                       │    └─ ended busy while others run ──▶ parked
///                         └─ gone: (none)         └─ gone: stopReading ──▶ removed
///   removed ──ended──▶ (none)
///   removed ──a card again──▶ removed(again) ──ended──▶ waiting (a fresh ingest)
///   parked ──another card ended──▶ rechecking ──still a card in udev's database──▶ waiting
/// ```
///
/// Rules the owner relies on:
/// - **One ingest per card, once.** Cards are told apart by kernel name. An event for a card
///   waiting or being ingested starts nothing (a card present at start and seen again in
///   an event is ingested once).
/// - **At most `maxCards` at once**; the others wait, first come first served.
/// - **A card that goes** (a `remove` event, or a `change` after which it is no card) is
///   dropped while it waits; while it is ingested, its reading stops and the files already
///   staged finish uploading. Inserted again before that ends, it is ingested anew once it
///   ends, as the last event described it.
/// - **A card found busy while other cards of this process run** is the same card under
///   another name (pulled and inserted again) or a copy with its UUID: it is looked up again
///   in udev's database when the next card ends, and taken if it is still there.
/// - **A shutdown** takes no new card, drops the waiting ones, stops every running ingest
///   and closes the monitor; the watcher stops once every ingest ended and the monitor's
///   events ended. The monitor's events ending without a shutdown is the monitor failing:
///   the same drain, then ``Exit/failed(_:)``.
/// - **Stale answers are ignored, impossible events trap.** A look-up answered after its card
///   went, or after a shutdown, returns no actions. An event the owner cannot have seen (an
///   ingest ending that never started, the monitor opening twice) is a bug in the owner;
///   `preconditionFailure` names the event and the state.
struct CardWatchMachine: Sendable {
    /// How the watcher ends: what ``CardWatcher/run()`` returns or throws.
    enum Exit: Sendable, Equatable {
        /// Asked to stop: what is left is pending.
        case stopped
        /// udev could not be listened to, or stopped talking.
        case failed(IngestError)
    }

    /// What the owner does next. Perform them in order.
    enum Action: Sendable, Equatable {
        /// Open the udev monitor (answer ``monitorOpened()`` or ``monitorFailed(_:)``), take
        /// the block devices present, then each event (``deviceEvent(_:)``), until the
        /// monitor's events end (``eventsEnded()``).
        case listen
        /// Ingest the card with a fresh ``IngestStop``; answer ``ingestEnded(_:outcome:)``.
        case startIngest(UdevDevice)
        /// The card went: its ingest stops reading (``IngestStop/cardRemoved()``), what it
        /// staged finishes uploading.
        case stopReading(card: String)
        /// Say that no new card is taken and the running ones stop.
        case announceStop
        /// The card's ingest stops (``IngestStop/shutdown()``).
        case stopIngest(card: String)
        /// Close the monitor, which ends its events.
        case closeMonitor
        /// Read the device `major:minor` from udev's database again; answer
        /// ``rechecked(_:now:)`` with it, or nil when it is gone.
        case recheck(UdevDevice)
        /// Every ingest ended and the monitor is closed.
        case exit(Exit)
    }

    /// Where one card is, by kernel name. A card with none is not known.
    enum Card: Sendable, Equatable {
        /// Waits for a free slot (its turn is its place in the queue).
        case waiting(UdevDevice)
        case ingesting(UdevDevice)
        /// Went while being ingested: its staged files finish uploading. `again` is the card
        /// inserted again meanwhile, to ingest anew once this ingest ends.
        case removed(UdevDevice, again: UdevDevice?)
        /// Found busy while other cards ran: looked up again when the next one ends.
        case parked(UdevDevice)
        /// Being looked up again in udev's database.
        case rechecking

        var isRunning: Bool {
            switch self {
            case .ingesting, .removed: true
            case .waiting, .parked, .rechecking: false
            }
        }
    }

    private enum Phase: Sendable, Equatable {
        /// Taking cards.
        case watching
        /// Taking none; the running ingests end.
        case draining(Exit)
        case stopped(Exit)
    }

    /// Where listening to udev is. Cards can be handed in before it opens (the tests do).
    private enum Monitor: Sendable, Equatable {
        case notOpened
        case opening
        /// Its events are being taken.
        case open
        /// Its events ended, it failed to open, or it never will open.
        case ended
    }

    let maxCards: Int
    private var phase = Phase.watching
    private var monitor = Monitor.notOpened
    private var cards: [String: Card] = [:]
    /// The waiting cards, first come first served.
    private var queue: [String] = []

    /// `maxCards` below 1 counts as 1.
    init(maxCards: Int) {
        self.maxCards = max(1, maxCards)
    }

    // MARK: what the owner may read

    /// The cards being ingested, by kernel name, sorted.
    var running: [String] { cards.filter { $0.value.isRunning }.keys.sorted() }
    /// The cards waiting for a slot, in their order.
    var waiting: [String] { queue }
    /// Where the card `name` is; nil when it is not known.
    func card(_ name: String) -> Card? { cards[name] }
    /// How the watcher ended, once it has.
    var exit: Exit? {
        if case let .stopped(exit) = phase { exit } else { nil }
    }

    /// Is this udev event (or device from the database) a card present now? Not once removed,
    /// nor when it has no device node to open.
    static func isCardPresent(_ device: UdevDevice) -> Bool {
        device.action != "remove" && CardPredicate.isCard(device) && device.node != nil
    }

    // MARK: events

    /// `run()` began: listen to udev. After a shutdown, nothing to listen to: the watcher
    /// stops once the running ingests end (at once when none runs).
    mutating func runStarted() -> [Action] {
        switch (phase, monitor) {
        case let (.stopped(exit), _):
            return [.exit(exit)]
        case (.watching, .notOpened):
            monitor = .opening
            return [.listen]
        case (.draining, .notOpened):
            monitor = .ended
            return exitIfDrained()
        default:
            impossible("runStarted (run twice)")
        }
    }

    /// The monitor listens. A shutdown that came while it opened closes it.
    mutating func monitorOpened() -> [Action] {
        guard monitor == .opening else { impossible("monitorOpened") }
        monitor = .open
        return phase == .watching ? [] : [.closeMonitor]
    }

    /// The monitor could not be opened: the watcher stops, with `error`.
    mutating func monitorFailed(_ error: IngestError) -> [Action] {
        guard monitor == .opening else { impossible("monitorFailed") }
        monitor = .ended
        return phase == .watching ? drain(.failed(error), announce: false) : exitIfDrained()
    }

    /// The monitor's events ended: closed by a shutdown, or it failed.
    mutating func eventsEnded() -> [Action] {
        guard monitor == .open else { impossible("eventsEnded") }
        monitor = .ended
        guard phase == .watching else { return exitIfDrained() }
        let lost = IngestError.udevUnavailable(SystemError(call: "udev_monitor_receive_device", errno: .ioError))
        return drain(.failed(lost), announce: true)
    }

    /// SIGTERM or SIGINT: take no new card, stop the running ones. Any number of times.
    mutating func shutdownRequested() -> [Action] {
        guard phase == .watching else { return [] }
        return drain(.stopped, announce: true)
    }

    /// A udev event, or a device present at start (no action), for any block device.
    mutating func deviceEvent(_ device: UdevDevice) -> [Action] {
        guard phase == .watching, !device.kernelName.isEmpty else { return [] }
        return Self.isCardPresent(device) ? arrived(device) : went(device.kernelName)
    }

    /// The card's ingest ended, `outcome` as its report says.
    mutating func ingestEnded(_ name: String, outcome: CardReport.Outcome) -> [Action] {
        let device: UdevDevice
        let again: UdevDevice?
        switch cards[name] {
        case let .ingesting(ingested)?: (device, again) = (ingested, nil)
        case let .removed(ingested, insertedAgain)?: (device, again) = (ingested, insertedAgain)
        default: impossible("ingestEnded(\(name))")
        }
        cards[name] = nil
        guard phase == .watching else { return exitIfDrained() }
        // A card found busy may have been the one that ended, under another name.
        var actions: [Action] = []
        for (parkedName, card) in cards.sorted(by: { $0.key < $1.key }) {
            guard case let .parked(parked) = card else { continue }
            cards[parkedName] = .rechecking
            actions.append(.recheck(parked))
        }
        if outcome == .busy, again == nil, cards.values.contains(where: \.isRunning) {
            cards[name] = .parked(device)
        }
        if let again { actions += arrived(again) }
        return actions + startWaiting()
    }

    /// What udev's database says now of a parked card: nil when the device is gone.
    mutating func rechecked(_ name: String, now device: UdevDevice?) -> [Action] {
        // Stale: the card went, came back by an event, or a shutdown came meanwhile.
        guard phase == .watching, cards[name] == .rechecking else { return [] }
        cards[name] = nil
        // The device number may be another device's now.
        guard let device, device.kernelName == name else { return [] }
        return deviceEvent(device)
    }

    // MARK: transitions

    private mutating func arrived(_ device: UdevDevice) -> [Action] {
        let name = device.kernelName
        switch cards[name] {
        case .waiting?, .ingesting?:
            return []
        case let .removed(ingested, _)?:
            cards[name] = .removed(ingested, again: device)
            return []
        case nil, .parked?, .rechecking?:
            cards[name] = .waiting(device)
            queue.append(name)
            return startWaiting()
        }
    }

    private mutating func went(_ name: String) -> [Action] {
        switch cards[name] {
        case nil:
            return []
        case .waiting?:
            queue.removeAll { $0 == name }
            cards[name] = nil
            return []
        case .parked?, .rechecking?:
            cards[name] = nil
            return []
        case let .ingesting(device)?:
            cards[name] = .removed(device, again: nil)
            return [.stopReading(card: name)]
        case let .removed(device, _)?:
            cards[name] = .removed(device, again: nil)
            return []
        }
    }

    private mutating func startWaiting() -> [Action] {
        var actions: [Action] = []
        var running = cards.values.count(where: \.isRunning)
        while running < maxCards, !queue.isEmpty {
            let name = queue.removeFirst()
            guard case let .waiting(device)? = cards[name] else { impossible("startWaiting(\(name) queued)") }
            cards[name] = .ingesting(device)
            running += 1
            actions.append(.startIngest(device))
        }
        return actions
    }

    private mutating func drain(_ exit: Exit, announce: Bool) -> [Action] {
        phase = .draining(exit)
        queue.removeAll()
        cards = cards.filter { $0.value.isRunning }
        var actions: [Action] = announce ? [.announceStop] : []
        actions += cards.keys.sorted().map { .stopIngest(card: $0) }
        if monitor == .open { actions.append(.closeMonitor) }
        return actions + exitIfDrained()
    }

    private mutating func exitIfDrained() -> [Action] {
        guard case let .draining(exit) = phase, cards.isEmpty, monitor == .notOpened || monitor == .ended else {
            return []
        }
        phase = .stopped(exit)
        return [.exit(exit)]
    }

    private func impossible(_ event: String, file: StaticString = #file, line: UInt = #line) -> Never {
        preconditionFailure(
            "CardWatchMachine: event \(event) is impossible in state \(stateName)", file: file, line: line)
    }

    /// E.g. `watching, monitor open, cards [sdb1: removed, sdc1: waiting]`.
    private var stateName: String {
        let cards = cards.keys.sorted().map { name -> String in
            switch self.cards[name] {
            case .waiting?: "\(name): waiting"
            case .ingesting?: "\(name): ingesting"
            case .removed(_, let again)?: "\(name): removed\(again == nil ? "" : " (inserted again)")"
            case .parked?: "\(name): parked"
            case .rechecking?, nil: "\(name): rechecking"
            }
        }
        return "\(phase), monitor \(monitor), cards [\(cards.joined(separator: ", "))]"
    }
}
