/// Holds every task that passes it until it is opened, then lets each through at once: what
/// keeps work a test started under way (a commit, a request holding its room) while the test
/// looks at what waits behind it.
public actor Gate {
    private var open = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init() {}

    /// Returns once the gate is open.
    public func pass() async {
        if open { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    public func openUp() {
        open = true
        for waiter in waiting { waiter.resume() }
        waiting = []
    }
}
