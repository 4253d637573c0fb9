import Synchronization

/// The files of a volume to stage, as a walk of the card finds them: the walk runs on a
/// thread of its own, at most ``depth`` files ahead of the stager that takes them, so memory
/// stays flat however many files the card holds. A file added to the card since the scan
/// that counted them is staged too (it is counted when staged).
///
/// Taken by one consumer on a thread that may block (the stager's reader). ``close()`` ends
/// the walk early, and returns once its thread holds nothing of the card (no directory is
/// left open under an unmount).
public final class FilesToStage: Sequence, IteratorProtocol, @unchecked Sendable {
    /// How far the walk may run ahead of the stager.
    static let depth = 256
    private let queue = BlockingQueue<ScannedFile?>(capacity: FilesToStage.depth)
    private let closing = Atomic<Bool>(false)
    /// The walk ended (its end taken from the queue).
    private var ended = false
    private let failure = Mutex<IngestError?>(nil)

    /// Starts walking `volume`, passing on the files `known` says are to be staged.
    public init(volume: VolumeIdentity, rules: ScanRules, known: KnownFiles) {
        // The thread holds the walk until it ends, which ``close()`` waits for.
        startThread("ingest-walk") { [self] in
            do throws(IngestError) {
                try known.walk(volume, rules: rules, until: { closing.load(ordering: .relaxed) }) { finding, toStage in
                    if toStage, case .file(let file) = finding, !closing.load(ordering: .relaxed) { queue.put(file) }
                }
            } catch {
                failure.withLock { $0 = error }
            }
            queue.put(nil)
        }
    }

    public func next() -> ScannedFile? {
        guard !ended else { return nil }
        guard let file = queue.take() else {
            ended = true
            return nil
        }
        return file
    }

    /// Calls `body` with each file, on a thread of its own (the walk's hand-off blocks), then
    /// closes the walk; throws what kept it from walking the card.
    public func each(_ body: @escaping @Sendable (ScannedFile) -> Void) async throws(IngestError) {
        let failure = await onDedicatedThread("ingest-each") { () -> IngestError? in
            while let file = self.next() { body(file) }
            return self.close()
        }
        if let failure { throw failure }
    }

    /// Ends the walk, dropping what it found and nobody took, and waits for its thread to let
    /// go of the card. Then the error that kept it from walking the card, if any (the card
    /// gone since it was scanned).
    @discardableResult
    public func close() -> IngestError? {
        closing.store(true, ordering: .relaxed)
        while next() != nil {}
        return failure.withLock { $0 }
    }
}
