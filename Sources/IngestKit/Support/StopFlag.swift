import Synchronization

/// A flag one thread raises and others poll; it is never lowered.
public final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    public init() {}
    public func raise() { raised.store(true, ordering: .releasing) }
    public var isRaised: Bool { raised.load(ordering: .acquiring) }
}
