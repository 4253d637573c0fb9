import Logging

/// `ingest watch`: ingests every card present at start and every card inserted later, a
/// bounded number at once, each through ``DeviceIngest`` (the path of `ingest --device`).
///
/// Which card is taken, stopped, retried or dropped is decided by ``CardWatchMachine``
/// (its documentation has the rules); this actor feeds it udev's events and the ends of
/// ingests, and performs what it asks. udev is only touched on threads of its own (the
/// monitor's, and one per look-up), so the actor never blocks and a shutdown is heard at
/// once. ``shutdown()`` stops taking cards and asks every running one to stop
/// (``IngestStop/shutdown()``); ``run()`` returns when all have ended, unmounted.
public actor CardWatcher {
    /// Ingests one card to its end and says how it went; `stop` carries removal and shutdown.
    public typealias IngestCard = @Sendable (_ device: UdevDevice, _ stop: IngestStop) async -> CardReport
    private typealias Machine = CardWatchMachine

    private let logger: Logger
    private let ingest: IngestCard
    private let report: @Sendable (CardReport) -> Void
    private var machine: Machine
    /// How to stop each card being ingested, by kernel name.
    private var stops: [String: IngestStop] = [:]
    private var monitor: UdevMonitor?
    /// How the watcher ended, once it has, and the ``run()`` waiting for it.
    private var exit: Machine.Exit?
    private var exitWaiter: CheckedContinuation<Machine.Exit, Never>?

    public init(
        maxCards: Int, logger: Logger, ingest: @escaping IngestCard, report: @escaping @Sendable (CardReport) -> Void
    ) {
        self.machine = Machine(maxCards: maxCards)
        self.logger = logger
        self.ingest = ingest
        self.report = report
    }

    /// Listens to udev, takes the cards present, then each new one, until ``shutdown()``;
    /// returns when every card's ingest has ended. Throws when udev cannot be listened to.
    public func run() async throws(IngestError) {
        perform(machine.runStarted())
        let exit: Machine.Exit
        if let ended = self.exit {
            exit = ended
        } else {
            exit = await withCheckedContinuation { exitWaiter = $0 }
        }
        if case let .failed(error) = exit { throw error }
    }

    /// Stops taking cards and asks every running ingest to stop; ``run()`` then returns once
    /// they have ended. Any number of times.
    public func shutdown() {
        perform(machine.shutdownRequested())
    }

    /// Cards being ingested and cards waiting for a slot, by kernel name (for tests and logs).
    var cards: (running: [String], waiting: [String]) { (machine.running, machine.waiting) }

    /// One udev event, or a device present at start.
    func handle(_ device: UdevDevice) {
        perform(machine.deviceEvent(device))
    }

    private func perform(_ actions: [Machine.Action]) {
        for action in actions {
            switch action {
            case .listen:
                Task { await listen() }
            case .startIngest(let device):
                start(device)
            case .stopReading(let name):
                logger.notice("card removed; its staged files finish uploading", metadata: ["card": "\(name)"])
                stop(of: name).cardRemoved()
            case .announceStop:
                logger.notice("stopping: no new cards; running ingests stop after the parts on the wire")
            case .stopIngest(let name):
                stop(of: name).shutdown()
            case .closeMonitor:
                if let monitor { Task { await onDedicatedThread("ingest-udev-off") { monitor.stop() } } }
            case .recheck(let device):
                Task {
                    let now = await onDedicatedThread("ingest-udev-get") {
                        Udev.blockDevice(major: device.major, minor: device.minor)
                    }
                    perform(machine.rechecked(device.kernelName, now: now))
                }
            case .exit(let exit):
                self.exit = exit
                exitWaiter?.resume(returning: exit)
                exitWaiter = nil
            }
        }
    }

    /// The udev side of ``run()``: the monitor, the cards present, then each event.
    private func listen() async {
        let monitor: UdevMonitor
        do throws(IngestError) {
            monitor = try await onDedicatedThread("ingest-udev-on") { () throws(IngestError) in try UdevMonitor() }
        } catch {
            return perform(machine.monitorFailed(error))
        }
        self.monitor = monitor
        perform(machine.monitorOpened())
        // Listening starts before the cards present are listed: none slips between the two
        // (one seen twice is ingested once).
        let present = await onDedicatedThread("ingest-udev-ls") { Udev.blockDevices() }
        for device in present { handle(device) }
        for await device in monitor.events { handle(device) }
        // Closed by a shutdown, or failed: either way its thread is joined and its pipe closed.
        await onDedicatedThread("ingest-udev-off") { monitor.stop() }
        perform(machine.eventsEnded())
    }

    private func start(_ device: UdevDevice) {
        let (name, stop, ingest) = (device.kernelName, IngestStop(), self.ingest)
        stops[name] = stop
        logger.info("ingesting card", metadata: ["card": "\(name)", "device": "\(device.node ?? "")"])
        Task {
            let report = await ingest(device, stop)
            ended(name, report)
        }
    }

    private func ended(_ name: String, _ result: CardReport) {
        stops[name] = nil
        report(result)
        perform(machine.ingestEnded(name, outcome: result.outcome))
    }

    private func stop(of name: String) -> IngestStop {
        guard let stop = stops[name] else { preconditionFailure("CardWatcher: no ingest of \(name) to stop") }
        return stop
    }
}
