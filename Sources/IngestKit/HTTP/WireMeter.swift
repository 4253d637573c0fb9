import Synchronization

/// The bytes of files' contents a transport has handed to the network, as they go: what a
/// progress line shows while parts are in flight, rather than only once the server has
/// acknowledged them. A 16 MiB part under a cap of 5 MiB/s shared by a few parts takes
/// many seconds to be acknowledged; counted on the wire it moves every turn.
///
/// Only request bodies marked as payload (``HTTPRequest/isPayload``: a part, a file's single
/// PUT) count, not the XML of control requests or a history's manifest. A body whose
/// transfer ends without a 2xx answer is taken back: it will be sent again, or not at all,
/// and must not count twice. So ``onWire`` is what was delivered plus what is on its way.
///
/// Written by the transport's thread, read by anyone.
public final class WireMeter: Sendable {
    private let sent = Atomic<Int64>(0)
    private let takenBack = Atomic<Int64>(0)

    public init() {}

    /// Payload bytes delivered or on their way.
    public var onWire: Int64 { sent.load(ordering: .relaxed) - takenBack.load(ordering: .relaxed) }

    /// `bytes` more handed to libcurl (negative: a rewind before a resend).
    func add(_ bytes: Int64) { sent.add(bytes, ordering: .relaxed) }

    /// A transfer that handed over `bytes` ended without the server accepting them.
    func takeBack(_ bytes: Int64) { takenBack.add(bytes, ordering: .relaxed) }
}
