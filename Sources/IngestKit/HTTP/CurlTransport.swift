// The HTTP transport over libcurl, and the limits every request lives by. Its thread and multi
// handle are in CurlTransport+Loop.swift, one request in flight in CurlTransport+Transfer.swift.

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
    /// The file of the station's bucket for `maxSendRate` (``StationRateBucket``), shared
    /// with every ingest process of the machine; nil, or a file that cannot be opened: the
    /// cap holds for this transport alone.
    public var stationRateFile: String?

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
/// The only type that talks to libcurl (with its `Loop` and `Transfer`).
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

    /// Why ``TransportSettings/stationRateFile`` could not be used, when it could not: the
    /// cap then holds for this process alone.
    public var stationRateProblem: SystemError? { loop.stationRateProblem }

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

extension TransportError {
    /// The transfer was cut: the process is stopping (``CurlTransport/cut()``).
    static let cutForStop = TransportError(kind: .cut, code: 0, message: "transfer cut")

    /// libcurl refused an option the transport sets: its build lacks a feature ingest needs.
    static func refusedOption(_ name: String, code: Int32, reason: String) -> TransportError {
        TransportError(kind: .optionRefused, code: code, message: "libcurl refused the option \(name): \(reason)")
    }
}
