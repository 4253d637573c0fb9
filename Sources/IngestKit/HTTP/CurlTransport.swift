import CCurl
import CSystemShims
import Foundation
import Glibc
import Synchronization

/// Limits every request of a transport lives by.
public struct TransportSettings: Sendable, Equatable {
    /// Longest wait for a TCP (and TLS) connection.
    public var connectTimeout: Duration = .seconds(10)
    /// A transfer slower than `lowSpeedBytesPerSecond` for `lowSpeedTime` is abandoned as
    /// stalled: a dead connection is detected without capping how long a big part may take.
    public var lowSpeedBytesPerSecond = 1024
    public var lowSpeedTime: Duration = .seconds(30)
    /// Verify the server's TLS certificate (never turn this off outside tests).
    public var verifyTLS = true
    /// A CA bundle to trust instead of the system's.
    public var caBundle: String?
    /// Connections kept open for reuse, and transfers at once: as many as `[upload]
    /// files_in_flight` allows at most, so that no request holding a permit of the uploads'
    /// limiters waits inside libcurl for a connection.
    public var maxConnections = 64
    /// Answers larger than this are cut off as an error (S3 answers are small XML).
    public var maxResponseBytes = 16 << 20
    /// A cap on the bytes per second of all request bodies together (``SendRateLimiter``);
    /// nil: none.
    public var maxSendRate: ByteRate?

    public init() {}

    /// The stall threshold of one transfer. Under a cap the connections share it, and each
    /// one's share (a turn at a time) may be below `lowSpeedBytesPerSecond`: the threshold
    /// is then a quarter of an even share, so that only a dead connection stalls.
    var transferLowSpeedLimit: Int {
        guard let rate = maxSendRate else { return lowSpeedBytesPerSecond }
        return max(1, min(lowSpeedBytesPerSecond, Int(rate.bytesPerSecond) / (4 * max(1, maxConnections))))
    }
}

/// HTTP over libcurl, driven by a multi handle on a thread of its own.
///
/// `send` suspends the calling task and never blocks a thread of the concurrency pool: the
/// transport's thread runs every transfer and resumes the caller when it ends. Request
/// bodies stream from disk through a read callback, read ahead on other threads in direct
/// reads of 256 KiB (``BodyReadAhead``), so the transport's thread never waits for the disk,
/// a body never passes through the page cache and a transfer holds two blocks whatever its
/// size; a transfer whose next block is not read yet is paused until it is. Under a
/// ``TransportSettings/maxSendRate`` the bodies take turns from one ``SendRateLimiter``: a
/// transfer waiting for its turn is paused, and the thread's poll wakes when the turn is
/// due. Connections are kept alive and reused. The payload bytes handed to libcurl are
/// counted as they go (``WireMeter``), and ``cut()`` ends every transfer at once when the
/// process is stopping.
/// The proxy variables (`https_proxy`, `no_proxy`, …) are honoured as libcurl does.
///
/// The only file that talks to libcurl.
public final class CurlTransport: Sendable {
    public let settings: TransportSettings
    /// The payload bytes on the wire (``HTTPRequest/isPayload``).
    public let meter: WireMeter
    private let loop: Loop

    public init(settings: TransportSettings = TransportSettings(), meter: WireMeter = WireMeter()) {
        self.settings = settings
        self.meter = meter
        loop = Loop(settings: settings)
        loop.start()
    }

    deinit { loop.stop() }

    /// Sends a request and returns the server's answer, whatever its status; throws only
    /// when no answer came.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let result: Result<HTTPResponse, TransportError> = await withCheckedContinuation { continuation in
            loop.submit(
                Transfer(
                    request: request, settings: settings, readAhead: loop.readAhead, meter: request.isPayload ? meter : nil,
                    continuation: continuation))
        }
        return try result.get()
    }

    /// Ends every transfer in flight and every one sent from now on with ``TransportError/Kind/cut``:
    /// the process is stopping, and a part under a rate cap may have minutes left to send.
    /// What the server acknowledged before is journalled; what the cut transfers carried is
    /// sent again when their uploads resume. For good: the transport serves nothing more.
    public func cut() { loop.cut() }

    /// Whether ``cut()`` was called.
    public var isCut: Bool { loop.isCut }

    /// Waits `duration`, or until ``cut()`` (a retry's backoff need not outlast the process's
    /// stop): in steps of a tenth of a second, which the backoffs' half-second and longer
    /// waits can afford.
    public func pause(for duration: Duration) async {
        let end = ContinuousClock.now + duration
        while !isCut, ContinuousClock.now < end {
            try? await Task.sleep(for: min(.milliseconds(100), end - .now))
        }
    }
}

/// The multi handle and its thread.
///
/// The thread waits in `poll(2)` on the sockets libcurl asks it to watch (its socket
/// callback) and an eventfd that wakes it, and tells libcurl which socket is ready
/// (`curl_multi_socket_action`), or that its timer is due: libcurl then serves that
/// transfer alone. `curl_multi_perform` would serve every transfer at every wake-up, each
/// after a `poll` of its own socket: 25,000 system calls for a card of 5,000 small files.
private final class Loop: @unchecked Sendable {
    private let multi: UnsafeMutableRawPointer
    private let settings: TransportSettings
    private let pending = Mutex<[Transfer]>([])
    /// Reads file bodies for the transfers, two blocks per transfer in flight (as many as
    /// the uploader's limiter lets run).
    let readAhead: BodyReadAhead
    /// The cap on the bodies' bytes per second; nil: none.
    private let sendRate: SendRateLimiter<Transfer>?
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
        sendRate = settings.maxSendRate.map { SendRateLimiter(rate: $0, now: .now) }
        do throws(TransportError) {
            try setMultiOption(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, "CURLMOPT_MAX_TOTAL_CONNECTIONS", settings.maxConnections)
            try setMultiOption(multi, CURLMOPT_MAXCONNECTS, "CURLMOPT_MAXCONNECTS", settings.maxConnections)
            setupError = nil
        } catch {
            setupError = error
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

/// The options of one easy handle, set through the typed shims (libcurl's setter is
/// variadic, which Swift cannot call). Each setter throws when libcurl refuses the option
/// (one it does not know, or a feature this build of it lacks): a request sent without an
/// option it needs (a timeout, TLS verification) must not be sent at all.
private struct EasyOptions {
    let easy: UnsafeMutableRawPointer

    func set(_ option: CURLoption, _ value: Int) throws(TransportError) {
        try check(ingest_curl_set_long(easy, option, value), option)
    }

    func set(_ option: CURLoption, offset: Int64) throws(TransportError) {
        try check(ingest_curl_set_offset(easy, option, curl_off_t(offset)), option)
    }

    func set(_ option: CURLoption, _ pointer: UnsafeRawPointer?) throws(TransportError) {
        try check(ingest_curl_set_pointer(easy, option, pointer), option)
    }

    /// A string option: libcurl copies it.
    func set(_ option: CURLoption, _ text: String) throws(TransportError) {
        try check(text.withCString { ingest_curl_set_pointer(easy, option, $0) }, option)
    }

    func set(_ option: CURLoption, _ callback: ingest_curl_data_callback) throws(TransportError) {
        try check(ingest_curl_set_callback(easy, option, callback), option)
    }

    func setSeekFunction(_ callback: ingest_curl_seek_callback) throws(TransportError) {
        try check(ingest_curl_set_seek_callback(easy, callback), CURLOPT_SEEKFUNCTION)
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws(TransportError) {
        guard code != CURLE_OK else { return }
        let name = curl_easy_option_by_id(option).map { "CURLOPT_" + String(cString: $0.pointee.name) }
        throw .refusedOption(
            name ?? "option \(option.rawValue)", code: Int32(code.rawValue), reason: String(cString: curl_easy_strerror(code)))
    }
}

extension TransportError {
    /// The transfer was cut: the process is stopping (``CurlTransport/cut()``).
    fileprivate static let cutForStop = TransportError(kind: .cut, code: 0, message: "transfer cut")

    /// libcurl refused an option the transport sets: its build lacks a feature ingest needs.
    fileprivate static func refusedOption(_ name: String, code: Int32, reason: String) -> TransportError {
        TransportError(kind: .optionRefused, code: code, message: "libcurl refused the option \(name): \(reason)")
    }
}

/// One request in flight: its easy handle, its body source, what came back.
private final class Transfer: @unchecked Sendable {
    let request: HTTPRequest
    let settings: TransportSettings
    let readAhead: BodyReadAhead
    /// Counts the body as it is sent, for a payload.
    let meter: WireMeter?
    let continuation: CheckedContinuation<Result<HTTPResponse, TransportError>, Never>

    private var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    private var bodyFile: FileBody?
    private var bodyBytes: [UInt8] = []
    /// Where the body's next byte to send is, from its start.
    private var position: Int64 = 0
    /// Why the read callback paused the transfer, while it is paused.
    private(set) var pause: Pause?
    /// The transport's cap on the bodies' rate, if it has one.
    private var sendRate: SendRateLimiter<Transfer>?
    /// The bytes of its turn the transfer may still send under `sendRate`.
    private var turnLeft = 0
    private var bodyError: SystemError?
    private var responseHeaders: [String: String] = [:]
    private var responseBody: [UInt8] = []
    private var tooLarge = false

    init(
        request: HTTPRequest, settings: TransportSettings, readAhead: BodyReadAhead, meter: WireMeter?,
        continuation: CheckedContinuation<Result<HTTPResponse, TransportError>, Never>
    ) {
        self.request = request
        self.settings = settings
        self.readAhead = readAhead
        self.meter = meter
        self.continuation = continuation
    }

    enum Pause {
        /// Its body's next block is not read yet.
        case body
        /// It waits for its turn of the send rate.
        case rate
    }

    /// Builds the easy handle, its body drawing from `sendRate` when there is one; on
    /// failure resumes the caller and returns nil.
    func prepare(sendRate: SendRateLimiter<Transfer>?) -> UnsafeMutableRawPointer? {
        self.sendRate = sendRate
        switch request.body {
        case .empty: break
        case .bytes(let bytes): bodyBytes = bytes
        case let .file(path, offset, length):
            do { bodyFile = try readAhead.open(path: path, offset: offset, length: length) } catch {
                fail(TransportError(kind: .bodyUnreadable(error), code: 0, message: "cannot open \(path)"))
                return nil
            }
        }
        guard let easy = curl_easy_init() else {
            fail(TransportError(kind: .other, code: 0, message: "curl_easy_init failed"))
            return nil
        }
        self.easy = easy
        do throws(TransportError) {
            try configure(EasyOptions(easy: easy))
        } catch {
            cleanUp()
            fail(error)
            return nil
        }
        return easy
    }

    /// Sets every option of the request's easy handle.
    private func configure(_ options: EasyOptions) throws(TransportError) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        try options.set(CURLOPT_URL, request.url)
        try options.set(CURLOPT_ERRORBUFFER, errorBufferPointer)
        try options.set(CURLOPT_NOSIGNAL, 1)
        try options.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeout.inMilliseconds)
        try options.set(CURLOPT_LOW_SPEED_LIMIT, settings.transferLowSpeedLimit)
        try options.set(CURLOPT_LOW_SPEED_TIME, max(1, settings.lowSpeedTime.inMilliseconds / 1000))
        try options.set(CURLOPT_SSL_VERIFYPEER, settings.verifyTLS ? 1 : 0)
        try options.set(CURLOPT_SSL_VERIFYHOST, settings.verifyTLS ? 2 : 0)
        if let bundle = settings.caBundle { try options.set(CURLOPT_CAINFO, bundle) }
        try options.set(CURLOPT_WRITEFUNCTION, transferWrite)
        try options.set(CURLOPT_WRITEDATA, context)
        try options.set(CURLOPT_HEADERFUNCTION, transferHeader)
        try options.set(CURLOPT_HEADERDATA, context)

        switch request.method {
        case "GET": break
        case "HEAD": try options.set(CURLOPT_NOBODY, 1)
        default:
            // Any method with a body (PUT, POST) goes through the upload machinery, which
            // streams from the read callback with a known Content-Length.
            try options.set(CURLOPT_UPLOAD, 1)
            try options.set(CURLOPT_INFILESIZE_LARGE, offset: request.body.length)
            try options.set(CURLOPT_READFUNCTION, transferRead)
            // libcurl's default of 64 KiB costs a read callback, a send and a pass of the loop
            // per 64 KiB; with 256 KiB the benchmark upload took measurably less CPU, for
            // little memory. A smaller body gets a buffer of its own size (16 KiB at least,
            // libcurl's least): 64 small files at once then hold 64 small buffers, not 16 MiB.
            try options.set(CURLOPT_UPLOAD_BUFFERSIZE, Int(min(256 << 10, max(16 << 10, request.body.length))))
            try options.set(CURLOPT_READDATA, context)
            // When a reused keep-alive connection turns out dead before any answer, libcurl
            // sends the request again on a fresh connection, and must rewind the body
            // first. Without a seek callback it cannot, and fails the request with
            // CURLE_SEND_FAIL_REWIND ("necessary data rewind wasn't possible"), which hides
            // the reset behind an unclassified error and costs a retry with backoff.
            try options.setSeekFunction(transferSeek)
            try options.set(CURLOPT_SEEKDATA, context)
            if request.method != "PUT" { try options.set(CURLOPT_CUSTOMREQUEST, request.method) }
        }
        // No "Expect: 100-continue" round trip before each part; no header curl adds itself
        // that the signature does not cover.
        var headers = request.headers.map { "\($0.name): \($0.value)" }
        headers.append("Expect:")
        for header in headers { headerList = curl_slist_append(headerList, header) }
        try options.set(CURLOPT_HTTPHEADER, headerList)
    }

    private var errorBufferPointer: UnsafeMutablePointer<CChar> {
        errorBuffer.withUnsafeMutableBufferPointer { $0.baseAddress! }
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if responseBody.count + bytes.count > settings.maxResponseBytes {
            tooLarge = true
            return 0  // aborts the transfer
        }
        responseBody.append(contentsOf: bytes)
        return bytes.count
    }

    func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        switch ResponseHeadLine(bytes) {
        case .status:
            responseHeaders = [:]  // a new response (after a 100 Continue or a redirect)
        case let .field(name, value):
            if let existing = responseHeaders[name] {
                responseHeaders[name] = existing + ", " + value
            } else {
                responseHeaders[name] = value
            }
        case .other:
            break
        }
        return bytes.count
    }

    /// Fills libcurl's buffer with the body's next bytes: as many as are read, and under a
    /// send rate as many as the transfer's turn has left; pauses the transfer when there
    /// are none yet.
    func send(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var room = buffer.count
        if let sendRate {
            if turnLeft == 0 {
                let remaining = request.body.length - position
                guard remaining > 0 else { return 0 }
                turnLeft = sendRate.claim(Int(min(Int64(room), remaining)), for: self, at: .now)
                guard turnLeft > 0 else {
                    pause = .rate
                    return Int(CURL_READFUNC_PAUSE)
                }
            }
            room = min(room, turnLeft)
        }
        switch readBody(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<room])) {
        case .bytes(let count):
            position += Int64(count)
            meter?.add(Int64(count))
            if sendRate != nil { turnLeft -= count }
            return count
        case .end: return 0
        case .notReady:
            pause = .body
            return Int(CURL_READFUNC_PAUSE)
        case .failed(let error):
            bodyError = error
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// Copies the body's bytes from `position` into `buffer`, as many as are read and fit.
    private func readBody(into buffer: UnsafeMutableRawBufferPointer) -> FileBody.Chunk {
        if let file = bodyFile { return file.read(into: buffer) }
        let start = Int(position)
        let count = min(buffer.count, bodyBytes.count - start)
        guard count > 0 else { return .end }
        bodyBytes.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + start, byteCount: count)
        }
        return .bytes(count)
    }

    /// Moves the body's read position to `offset` bytes from its start (libcurl rewinds
    /// with offset 0 before sending the request again). Only SEEK_SET within the body.
    func seek(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= request.body.length else { return CURL_SEEKFUNC_CANTSEEK }
        bodyFile?.rewind(to: offset)
        meter?.add(offset - position)
        position = offset
        bodyError = nil
        return CURL_SEEKFUNC_OK
    }

    /// Lets a transfer paused for its body send again once the body has a block (or an
    /// error) for it.
    func unpauseIfReady() {
        guard pause == .body, let easy, bodyFile?.isReady == true else { return }
        pause = nil
        curl_easy_pause(easy, CURLPAUSE_CONT)
    }

    /// Lets a transfer that waited for the send rate send `bytes` more.
    func takeTurn(_ bytes: Int) {
        turnLeft += bytes
        guard pause == .rate, let easy else { return }
        pause = nil
        curl_easy_pause(easy, CURLPAUSE_CONT)
    }

    func complete(_ code: CURLcode) {
        defer { cleanUp() }
        guard code == CURLE_OK else {
            meter?.takeBack(position)
            fail(error(for: code))
            return
        }
        var status = 0
        _ = ingest_curl_get_long(easy, CURLINFO_RESPONSE_CODE, &status)
        if !(200..<300).contains(status) { meter?.takeBack(position) }
        continuation.resume(returning: .success(HTTPResponse(status: status, headers: responseHeaders, body: responseBody)))
    }

    private func error(for code: CURLcode) -> TransportError {
        let detail = String(cString: errorBufferPointer)
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let kind: TransportError.Kind
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: kind = .hostNotFound
        case CURLE_COULDNT_CONNECT: kind = .connectionFailed
        case CURLE_OPERATION_TIMEDOUT: kind = .timedOut
        // A plain-http server answers the ClientHello with an HTTP status line, which the TLS
        // library reads as a record of an impossible version: the scheme is wrong for good.
        case CURLE_SSL_CONNECT_ERROR where Self.answeredInPlainHTTP(detail):
            kind = .plainHTTP(server: Self.server(of: request.url))
        // CURLE_SSL_CONNECT_ERROR is also what a connection reset mid-handshake gives:
        // retryable, unlike a certificate that does not verify.
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2_STREAM,
            CURLE_SSL_CONNECT_ERROR:
            kind = .connectionReset
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE:
            kind = .tls
        case CURLE_ABORTED_BY_CALLBACK, CURLE_READ_ERROR:
            kind = bodyError.map { .bodyUnreadable($0) } ?? .other
        case CURLE_WRITE_ERROR where tooLarge:
            return TransportError(
                kind: .other, code: Int32(code.rawValue),
                message: "answer larger than \(settings.maxResponseBytes) bytes")
        default: kind = .other
        }
        return TransportError(kind: kind, code: Int32(code.rawValue), message: message)
    }

    /// The TLS library's words when the handshake got plain HTTP back: OpenSSL's "wrong
    /// version number" (and "packet length too long", which older versions say when the
    /// status line's bytes read as a record length), GnuTLS's "unexpected TLS packet".
    static func answeredInPlainHTTP(_ detail: String) -> Bool {
        let text = detail.lowercased()
        return ["wrong version number", "packet length too long", "unexpected tls packet"].contains {
            text.contains($0)
        }
    }

    /// The `host:port` of a URL (no user information, which may hold a secret), as it is
    /// written, for naming the server in a message.
    static func server(of url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return String(authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority)
    }

    func fail(_ error: TransportError) {
        continuation.resume(returning: .failure(error))
    }

    /// Ends the transfer, taken out of the multi handle, as cut.
    func cut() {
        meter?.takeBack(position)
        cleanUp()
        fail(.cutForStop)
    }

    private func cleanUp() {
        sendRate?.release(self, unsent: turnLeft)
        sendRate = nil
        turnLeft = 0
        if let easy { curl_easy_cleanup(easy) }
        easy = nil
        curl_slist_free_all(headerList)
        headerList = nil
        bodyFile?.close()
        bodyFile = nil
    }
}

// libcurl's callbacks: plain C functions that find their transfer through the context pointer.

private let transferWrite: ingest_curl_data_callback = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private let transferHeader: ingest_curl_data_callback = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveHeader(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private let transferSeek: ingest_curl_seek_callback = { context, offset, origin in
    guard let context else { return CURL_SEEKFUNC_FAIL }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.seek(to: Int64(offset), origin: origin)
}

private let transferRead: ingest_curl_data_callback = { buffer, size, count, context in
    guard let buffer, let context else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.send(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}
