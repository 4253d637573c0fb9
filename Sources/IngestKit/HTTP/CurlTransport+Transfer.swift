// One request in flight: its easy handle and its options, its body as libcurl reads it, and
// what came back.

import CCurl
import CSystemShims
import Foundation

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

/// One request in flight: its easy handle, its body source, what came back.
final class Transfer: @unchecked Sendable {
    let request: HTTPRequest
    let settings: TransportSettings
    let readAhead: BodyReadAhead
    /// Counts the body as it is sent, for a payload.
    let meter: WireMeter?
    let continuation: CheckedContinuation<Result<HTTPResponse, TransportError>, Never>
    /// How long a request with ``HTTPRequest/expectContinue`` waits for `100 Continue`
    /// before it sends its body anyway (libcurl's default is a second): a server or proxy
    /// that ignores Expect costs this per request, one that answers it a round trip.
    static let expectContinueWait: Duration = .milliseconds(300)

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
        // that the signature does not cover. A request that asks for it (a conditional
        // PutObject of a large body) waits for the go-ahead, but not long: a server that
        // ignores Expect costs that wait per request.
        var headers = request.headers.map { "\($0.name): \($0.value)" }
        if request.expectContinue, request.body.length > 0 {
            headers.append("Expect: 100-continue")
            try options.set(CURLOPT_EXPECT_100_TIMEOUT_MS, Transfer.expectContinueWait.inMilliseconds)
        } else {
            headers.append("Expect:")
        }
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
        // A body of a stated length (an object's range read back, 8 MiB) is held in one
        // allocation of that length, not grown by doubling through copies of twice its size.
        if responseBody.isEmpty, let stated = responseHeaders["content-length"].flatMap(Int.init),
            stated > bytes.count, stated <= settings.maxResponseBytes
        {
            responseBody.reserveCapacity(stated)
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
