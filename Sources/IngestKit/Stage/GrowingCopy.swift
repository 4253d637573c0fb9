import Synchronization

/// Takes the copies an uploader may read while they are written: a large file's parts go
/// to the bucket as the card is read, so its upload ends about when its last byte is read
/// instead of starting then.
///
/// The stager's reader asks ``partSize(toStream:)`` once per file, before its first byte;
/// for a file it accepts, the reader makes a ``GrowingCopy`` and hands it over with
/// ``stream(_:)``, then the reader and writer report into it as they go. Called on the
/// reader's thread: both must return at once.
public protocol CopyStreams: Sendable {
    /// The part size to stream `file` at, or nil to copy it the ordinary way.
    func partSize(toStream file: ScannedFile) -> Int64?
    /// Reads `copy` as it grows; once done with it, calls ``GrowingCopy/close()``.
    func stream(_ copy: GrowingCopy)
}

/// A copy being written that an uploader reads as it grows, part by part.
///
/// The writer links the partial file to a name of the stream's own (``attach(path:)``), so
/// the stream reads the same bytes whatever happens to the partial's name (published under
/// its content address, or removed), and tells how far it has written; the reader tells
/// each part's CRC32C as it finishes the part, computed from the card's bytes. A part is
/// ready once both are known. The copy ends complete, with its fingerprint, or failed
/// (unreadable, changed while copied, the run stopped): then nothing of it may become an
/// object.
///
/// One reader thread, one writer thread and one consumer task use it; the consumer waits
/// with ``part(_:)`` and ``end()``. Its memory is a checksum per part, at most 10,000.
public final class GrowingCopy: Sendable {
    /// How the copy ended.
    public enum End: Sendable, Equatable {
        /// Written in full: the content's fingerprint.
        case complete(Fingerprint)
        case failed
    }

    /// A part ready to be sent.
    public struct Part: Sendable, Equatable {
        /// The stream's own name of the copy.
        public var path: String
        public var offset: Int64
        public var length: Int64
        /// From the card's bytes, as read.
        public var crc32c: UInt32
    }

    /// The file as opened for the copy.
    public let file: ScannedFile
    public let partSize: Int64
    public var partCount: Int { Int((file.size + partSize - 1) / partSize) }

    private struct State {
        var path: String?
        var written: Int64 = 0
        var checksums: [UInt32] = []
        var end: End?
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
    }

    private let state = Mutex(State())

    /// A copy of `file` (its size as opened, more than 0) cut at `partSize`.
    public init(file: ScannedFile, partSize: Int64) {
        precondition(partSize > 0 && file.size > 0, "a streamed copy has parts")
        self.file = file
        self.partSize = partSize
    }

    /// A task waits for a part or the end, at this instant.
    var isAwaited: Bool { state.withLock { $0.waiter != nil } }

    // MARK: the stager's side

    /// The writer: the stream's name of the partial file.
    func attach(path: String) { update { $0.path = path } }
    /// The writer: bytes written so far.
    func wrote(upTo written: Int64) { update { $0.written = written } }
    /// The reader: the CRC32C of the next part, in order.
    func checksummed(_ crc32c: UInt32) { update { $0.checksums.append(crc32c) } }
    /// The writer: the copy is written in full (every part's CRC32C given) or given up.
    func ended(_ end: End) { update { if $0.end == nil { $0.end = end } } }

    private func update(_ change: (inout State) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: the consumer's side

    /// Waits until part `number` (1-based) is written and its checksum known; nil once the
    /// copy failed.
    public func part(_ number: Int) async -> Part? {
        let offset = Int64(number - 1) * partSize
        let length = min(partSize, file.size - offset)
        return await wait { state -> Part?? in
            if state.end == .failed { return .some(nil) }
            guard let path = state.path, state.written >= offset + length, state.checksums.count >= number else { return nil }
            return Part(path: path, offset: offset, length: length, crc32c: state.checksums[number - 1])
        }
    }

    /// Waits for the copy's end.
    public func end() async -> End {
        await wait { $0.end }
    }

    /// The stream is done with the copy: its name goes (the bytes stay wherever the stager
    /// put them). Once.
    public func close() {
        let path = state.withLock { state -> String? in
            guard !state.closed else { return nil }
            state.closed = true
            return state.path
        }
        if let path { try? System.unlink(path) }
    }

    private func wait<T: Sendable>(_ ready: @Sendable (State) -> T?) async -> T {
        while true {
            var found: T?
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if let value = ready(state) {
                        found = value
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            if let found { return found }
        }
    }
}
