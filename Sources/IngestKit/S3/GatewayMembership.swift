/// What one gateway showed of its bucket, asked alone and once: the bytes of the marker
/// ``S3Gateways/markerKey``, no marker, no such bucket, or no answer.
public enum MarkerSight: Sendable, Equatable {
    case marker([UInt8])
    /// The bucket is there, without a marker.
    case noMarker
    /// The server has no bucket of that name (`NoSuchBucket`).
    case noBucket
    /// No answer that says what it shows (refused, reset, timed out, or an error), and why.
    case noAnswer(String)

    /// How people read it: "the bucket id ID", "no .ingest/bucket-id", …
    public var description: String {
        switch self {
        case .marker(let bytes): "the bucket id \(String(decoding: bytes, as: UTF8.self))"
        case .noMarker: "no \(S3Gateways.markerKey)"
        case .noBucket: "no bucket of that name"
        case .noAnswer(let reason): "no answer (\(reason))"
        }
    }
}

/// Which of a destination's configured gateways belong to it, decided by the bucket's
/// identity (the marker ``S3Gateways/markerKey``), never by their URLs or their order.
///
/// The id that decides is, in this order:
/// 1. the one the journal recorded for a configured gateway, or for the destination the
///    configured gateways name (``Basis/recorded``);
/// 2. else the first shown, in the list's order, that the journal recorded for another name
///    of the same bucket: the destination is that one, reached by new URLs
///    (``Basis/recognised(name:)``);
/// 3. else the first shown at all: the destination is known by URL but no id was recorded
///    (``Basis/known``), or every configured gateway is unknown to the journal
///    (``Basis/new``);
/// 4. else none: no gateway shows a marker and none is recorded, so one is to be written
///    (``needsMarker``), and the gateways showing none belong.
///
/// A gateway showing another id, none while there is one, or no bucket is foreign: never
/// written through. One that did not answer is ``Verdict/unchecked``: its first request checks
/// it against the id.
public struct GatewayMembership: Sendable, Equatable {
    public enum Verdict: Sendable, Equatable {
        case belongs
        /// Shows another bucket: what it shows.
        case foreign(MarkerSight)
        /// Did not answer: checked when it first carries a request.
        case unchecked
    }

    /// Where the deciding id comes from.
    public enum Basis: Sendable, Equatable {
        case recorded
        /// Shown by a gateway; the journal records it for the destination of this name.
        case recognised(name: String)
        /// The journal knows a configured gateway, but no id for it.
        case known
        /// The journal knows none of the configured gateways, nor the id they show.
        case new
    }

    /// What is wrong with the destination as a whole.
    public enum Refusal: Sendable, Equatable {
        /// Every gateway that answered has no bucket of that name.
        case missingBucket
        /// Gateways answered, and none shows the deciding id.
        case noGatewayShows([UInt8])
    }

    /// The bucket's id; nil when none is shown or recorded (``needsMarker``).
    public var id: [UInt8]?
    public var basis: Basis
    /// One per gateway, in the order given.
    public var verdicts: [Verdict]

    public var isNew: Bool { basis == .new }
    /// No gateway shows a marker and the journal records none: one is written through the
    /// first gateway that belongs.
    public var needsMarker: Bool { id == nil && verdicts.contains(.belongs) }

    /// - Parameters:
    ///   - recorded: the id the journal records for a configured gateway or the destination.
    ///   - recognised: every id the journal records for the bucket, with the name of the
    ///     destination it records it for.
    ///   - anyGatewayKnown: whether the journal records one of the configured gateways.
    ///   - sights: what each configured gateway showed, in the configured order.
    public init(recorded: [UInt8]?, recognised: [[UInt8]: String], anyGatewayKnown: Bool, sights: [MarkerSight]) {
        let shown = sights.compactMap { sight -> [UInt8]? in
            if case .marker(let bytes) = sight { return bytes }
            return nil
        }
        if let recorded {
            id = recorded
            basis = .recorded
        } else if let known = shown.first(where: { recognised[$0] != nil }), let name = recognised[known] {
            id = known
            basis = .recognised(name: name)
        } else {
            id = shown.first
            basis = anyGatewayKnown ? .known : .new
        }
        let id = id
        verdicts = sights.map { sight in
            switch sight {
            case .marker(let bytes): bytes == id ? .belongs : .foreign(sight)
            case .noMarker: id == nil ? .belongs : .foreign(sight)
            case .noBucket: .foreign(sight)
            case .noAnswer: .unchecked
            }
        }
    }

    /// Why no gateway may be used; nil when one belongs, or none answered (their requests
    /// then check them).
    public var refusal: Refusal? {
        guard !verdicts.contains(.belongs), verdicts.contains(where: { $0 != .unchecked }) else { return nil }
        let answered = verdicts.filter { $0 != .unchecked }
        if answered.allSatisfy({ $0 == .foreign(.noBucket) }) { return .missingBucket }
        return id.map { .noGatewayShows($0) }
    }

    /// Whether a gateway answered.
    public var anyAnswered: Bool { verdicts.contains { $0 != .unchecked } }

    /// After ``needsMarker``: the marker `id` was written through the gateway at `index`.
    /// The others that showed none are unchecked again (their first request reads it).
    public mutating func markerWritten(_ id: [UInt8], through index: Int) {
        self.id = id
        for other in verdicts.indices where other != index && verdicts[other] == .belongs { verdicts[other] = .unchecked }
    }
}
