// The transport's loop: libcurl's multi handle, driven by `poll(2)` on a thread of its own.

import CCurl
import CSystemShims
import Glibc
import Synchronization

/// The multi handle and its thread.
///
/// The thread waits in `poll(2)` on the sockets libcurl asks it to watch (its socket
/// callback) and an eventfd that wakes it, and tells libcurl which socket is ready
/// (`curl_multi_socket_action`), or that its timer is due: libcurl then serves that
/// transfer alone. `curl_multi_perform` would serve every transfer at every wake-up, each
/// after a `poll` of its own socket: 25,000 system calls for a card of 5,000 small files.
final class Loop: @unchecked Sendable {
    private let multi: UnsafeMutableRawPointer
    private let settings: TransportSettings
    private let pending = Mutex<[Transfer]>([])
    /// Reads file bodies for the transfers, two blocks per transfer in flight (as many as
    /// the uploader's limiter lets run).
    let readAhead: BodyReadAhead
    /// The cap on the bodies' bytes per second; nil: none.
    private let sendRate: SendRateLimiter<Transfer>?
    /// Why the station's bucket could not be used, when it could not.
    let stationRateProblem: SystemError?
    private let running = Atomic<Bool>(true)
    /// Every transfer is to end now, and every later one at once (``CurlTransport/cut()``).
    private let cutting = Atomic<Bool>(false)
    /// The option libcurl refused when the multi handle was set up, if one was: every
    /// request fails with it (there is no transport to send them with).
    private let setupError: TransportError?
    /// What wakes the thread from its wait: a submission, a body block read, the stop.
    private let wakeup: Int32
    /// Transfers in flight, by their easy handle; touched only by the loop's thread.
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    /// The sockets libcurl wants watched, and for what (`POLLIN`, `POLLOUT`); the loop's thread's.
    private var watched: [curl_socket_t: Int16] = [:]
    /// When libcurl wants to be told its timer is due; nil: no timer. The loop's thread's.
    private var timerDue: ContinuousClock.Instant?

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    init(settings: TransportSettings) {
        _ = Self.globalInit
        self.settings = settings
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        let wakeup = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeup >= 0 else { fatalError("eventfd failed: \(SystemError.last("eventfd").reason)") }
        self.wakeup = wakeup
        // Two readers: one reads while the other hands its block over, and the disk sees
        // two reads in flight.
        readAhead = BodyReadAhead(threads: 2, wake: { Self.wake(wakeup) })
        (sendRate, stationRateProblem) = Self.sendRateLimiter(settings)
        do throws(TransportError) {
            try setMultiOption(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, "CURLMOPT_MAX_TOTAL_CONNECTIONS", settings.maxConnections)
            try setMultiOption(multi, CURLMOPT_MAXCONNECTS, "CURLMOPT_MAXCONNECTS", settings.maxConnections)
            setupError = nil
        } catch {
            setupError = error
        }
    }

    /// The limiter of `settings`' cap: on the station's bucket when there is a file for it
    /// and it opens, else on a bucket of the transport's own (and why).
    private static func sendRateLimiter(_ settings: TransportSettings) -> (SendRateLimiter<Transfer>?, SystemError?) {
        guard let rate = settings.maxSendRate else { return (nil, nil) }
        guard let path = settings.stationRateFile else { return (SendRateLimiter(rate: rate, now: .now), nil) }
        do throws(SystemError) {
            return (SendRateLimiter(rate: rate, bucket: try StationRateBucket(path: path, rate: rate)), nil)
        } catch {
            return (SendRateLimiter(rate: rate, now: .now), error)
        }
    }

    func start() {
        // The callbacks find the loop through their data pointer: the thread holds it.
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = ingest_curl_multi_set_socket_callback(multi, curlWatchSocket, context)
        _ = ingest_curl_multi_set_timer_callback(multi, curlSetTimer, context)
        startThread("ingest-http") { [self] in run() }
    }

    func stop() {
        running.store(false, ordering: .releasing)
        Self.wake(wakeup)
    }

    func cut() {
        cutting.store(true, ordering: .releasing)
        Self.wake(wakeup)
    }

    var isCut: Bool { cutting.load(ordering: .acquiring) }

    private static func wake(_ wakeup: Int32) {
        _ = eventfd_write(wakeup, 1)
    }

    func submit(_ transfer: Transfer) {
        if let setupError { return transfer.fail(setupError) }
        if isCut { return transfer.fail(.cutForStop) }
        // One wake-up for the transfers the loop has not taken yet: it takes them all at
        // once, and a wake-up (a write to the eventfd, a pass of the loop) for each of a
        // burst of small files' PUTs cost a system call or two a file.
        let first = pending.withLock { list in
            list.append(transfer)
            return list.count == 1
        }
        if first { Self.wake(wakeup) }
    }

    /// libcurl's socket callback: `what` it wants to know of socket `socket`.
    fileprivate func watch(_ socket: curl_socket_t, _ what: Int32) {
        switch what {
        case CURL_POLL_IN: watched[socket] = Int16(POLLIN)
        case CURL_POLL_OUT: watched[socket] = Int16(POLLOUT)
        case CURL_POLL_INOUT: watched[socket] = Int16(POLLIN | POLLOUT)
        default: watched.removeValue(forKey: socket)
        }
    }

    /// libcurl's timer callback: tell it in `milliseconds`; -1: no timer.
    fileprivate func setTimer(_ milliseconds: Int) {
        timerDue = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
    }

    private func run() {
        var stillRunning: Int32 = 0
        var polled: [pollfd] = []
        while running.load(ordering: .acquiring) || !active.isEmpty {
            if isCut { cutEverything() }
            for transfer in pending.withLock({ list in defer { list.removeAll() }; return list }) {
                if let easy = transfer.prepare(sendRate: sendRate) {
                    active[easy] = transfer
                    curl_multi_add_handle(multi, easy)
                }
            }
            for transfer in active.values where transfer.pause == .body { transfer.unpauseIfReady() }
            for (transfer, bytes) in sendRate?.serve(at: .now) ?? [] { transfer.takeTurn(bytes) }

            polled.removeAll(keepingCapacity: true)
            polled.append(pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0))
            for (socket, events) in watched { polled.append(pollfd(fd: socket, events: events, revents: 0)) }
            let ready = poll(&polled, nfds_t(polled.count), waitMilliseconds())
            if ready > 0 {
                if polled[0].revents != 0 {
                    var count: eventfd_t = 0
                    _ = eventfd_read(wakeup, &count)
                }
                for entry in polled.dropFirst() where entry.revents != 0 {
                    curl_multi_socket_action(multi, entry.fd, Self.events(entry.revents), &stillRunning)
                }
            }
            if let due = timerDue, due <= .now {
                timerDue = nil
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &stillRunning)
            }
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(multi, easy)
                active.removeValue(forKey: easy)?.complete(code)
            }
        }
        readAhead.stop()  // no wake-up after this
        curl_multi_cleanup(multi)
        close(wakeup)
    }

    /// Ends the transfers in flight and those not taken yet, each with the cut's error.
    private func cutEverything() {
        for transfer in pending.withLock({ list in defer { list.removeAll() }; return list }) { transfer.fail(.cutForStop) }
        for (easy, transfer) in active {
            curl_multi_remove_handle(multi, easy)
            transfer.cut()
        }
        active.removeAll()
    }

    /// What `poll` found on a socket, as libcurl's `CURL_CSELECT_*`: a hang-up is a read
    /// (of the end) as well as an error.
    private static func events(_ revents: Int16) -> Int32 {
        var events: Int32 = 0
        if revents & Int16(POLLIN | POLLHUP) != 0 { events |= CURL_CSELECT_IN }
        if revents & Int16(POLLOUT) != 0 { events |= CURL_CSELECT_OUT }
        if revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { events |= CURL_CSELECT_ERR }
        return events
    }

    /// How long the thread may wait: until libcurl's timer is due, a second at most, or
    /// until the next turn of a transfer waiting for the send rate (rounded up to a
    /// millisecond, so that the turn is due when it wakes).
    private func waitMilliseconds() -> Int32 {
        var wait: Duration = .seconds(1)
        if let due = timerDue { wait = min(wait, max(.zero, due - .now)) }
        if let turn = sendRate?.nextTurn(at: .now) { wait = min(wait, turn) }
        return Int32((wait.inSeconds * 1000).rounded(.up))
    }
}

// libcurl's multi callbacks: plain C functions that find the loop through their data pointer.

private let curlWatchSocket: curl_socket_callback = { _, socket, what, context, _ in
    guard let context else { return -1 }
    Unmanaged<Loop>.fromOpaque(context).takeUnretainedValue().watch(socket, what)
    return 0
}

private let curlSetTimer: curl_multi_timer_callback = { _, milliseconds, context in
    guard let context else { return -1 }
    Unmanaged<Loop>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds)
    return 0
}

/// Sets one option of the multi handle; throws, naming it, when libcurl refuses it.
private func setMultiOption(
    _ multi: UnsafeMutableRawPointer, _ option: CURLMoption, _ name: String, _ value: Int
) throws(TransportError) {
    let code = ingest_curl_multi_set_long(multi, option, value)
    guard code != CURLM_OK else { return }
    throw .refusedOption(name, code: Int32(code.rawValue), reason: String(cString: curl_multi_strerror(code)))
}
