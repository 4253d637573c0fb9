/// Where the station's upload-rate bucket (``StationRateBucket``) is kept.
public enum StationRateFile {
    /// The file's name in the runtime directory.
    public static let name = "upload-rate"

    /// `INGEST_RATE_FILE` when set, else `upload-rate` in `$RUNTIME_DIRECTORY` (the first,
    /// when systemd gives several; `/run/ingest` for the `ingest@` services), else
    /// `/run/ingest/upload-rate`: every process of the station finds the same file.
    public static func path(environment: [String: String]) -> String {
        if let given = environment["INGEST_RATE_FILE"], !given.isEmpty { return given }
        let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
        return "\(runtime.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/run/ingest")/\(name)"
    }
}

/// The token bucket of `[upload] max_rate` for the whole station: one small file (by
/// default `/run/ingest/upload-rate`), mapped into every ingest process that uploads under
/// a cap, so that the `ingest@` services of a multi-slot reader send at most the rate
/// together, not each.
///
/// The file holds the bucket (its tokens, when they were last counted on `CLOCK_MONOTONIC`,
/// which every process of the machine reads alike, the rate and the capacity) and a table
/// of the processes that use it, each with the rate it asked for. The bucket's rate is the
/// smallest of those asked by the processes alive: a slot that asks less slows the station
/// (a cap is a promise to the link's owner, and the smallest promise holds), and when it
/// exits the others go back to theirs. Each process holds an open-file-description lock on
/// its own byte of the table's liveness range for as long as it runs; the kernel drops it
/// when the process dies, killed or not, so a dead process's rate stops counting at the next
/// audit (once a second, by whichever process takes tokens then).
///
/// Every read and write of the file is under its `flock(2)` lock, which the kernel also
/// drops when its holder dies: a process killed in the middle of a take blocks no one. A
/// turn's reservation (``SendRateLimiter``) is a few loads and stores; the lock is taken
/// once per turn (64 KiB at most), a few hundred times a second at the rates ingest caps.
///
/// The first process creates the file and fills in the header under the lock when its
/// magic is absent, so two processes starting at once agree on one bucket.
final class StationRateBucket: SendTokens {
    /// Processes that can share the bucket at once; one more runs with the bucket's rate
    /// but without a say in it.
    static let slots = 32
    private static let size = 4096
    /// Each slot's liveness byte: one byte per slot from here, past the mapped header (a lock
    /// may cover bytes past a file's end).
    private static let livenessBase: Int64 = 1 << 20
    private static let magic: UInt64 = 0x3145_5441_5247_4e49  // "INGRATE1", little-endian

    // The header's fields, at byte offsets of the mapping.
    private static let magicOffset = 0
    private static let rateOffset = 8
    private static let capacityOffset = 16
    private static let tokensOffset = 24
    private static let updatedOffset = 32
    private static let auditedOffset = 40
    private static let slotsOffset = 64

    let path: String
    /// The rate this process asked for.
    let asked: ByteRate
    private let file: FileDescriptor
    private let mapping: SharedMapping
    private var map: UnsafeMutableRawPointer { mapping.base }
    /// This process's slot in the table; nil when all were taken.
    private let slot: Int?
    /// Nanoseconds on a clock every process of the station shares (`CLOCK_MONOTONIC`).
    private let clock: () -> Int64

    /// Opens (creating, mode 0600) the bucket at `path` and joins it asking for `rate`.
    /// Fails when the file cannot be opened or mapped: the caller caps the process alone.
    init(path: String, rate: ByteRate, clock: @escaping () -> Int64 = monotonicNanoseconds)
        throws(SystemError)
    {
        self.path = path
        asked = rate
        self.clock = clock
        let opened = try FileDescriptor(path: path, flags: [.readWrite, .create], mode: 0o600)
        _ = try opened.lockExclusively(waiting: true, path: path)
        defer { opened.unlock() }
        if Int64(try opened.stat().st_size) < Int64(Self.size) { try opened.truncate(to: Int64(Self.size), path: path) }
        let mapped = try SharedMapping(opened, length: Self.size, path: path)
        var mine: Int?
        for index in 0..<Self.slots where try opened.lockByte(at: Self.livenessBase + Int64(index), path: path) {
            mine = index
            break
        }
        file = opened
        mapping = mapped
        slot = mine
        let now = clock()
        if map.load(fromByteOffset: Self.magicOffset, as: UInt64.self) != Self.magic {
            map.initializeMemory(as: UInt8.self, repeating: 0, count: Self.size)
            let capacity = SendRateLimiter<AnyObject>.capacity(of: rate)
            ledger = TokenLedger(rate: max(1, rate.bytesPerSecond), capacity: capacity, tokens: Double(capacity), updated: now)
            map.storeBytes(of: Self.magic, toByteOffset: Self.magicOffset, as: UInt64.self)
        }
        if let mine { store(Self.slotsOffset + 8 * mine, max(1, rate.bytesPerSecond)) }
        var ledger = self.ledger
        audit(&ledger, at: now)
        self.ledger = ledger
    }

    deinit {
        if (try? file.lockExclusively(waiting: true, path: path)) ?? false {
            if let slot { store(Self.slotsOffset + 8 * slot, 0) }
            var ledger = self.ledger
            audit(&ledger, at: clock())
            self.ledger = ledger
            file.unlock()
        }
    }

    /// The bucket's rate now: the smallest asked by the processes alive at the last audit.
    var rate: ByteRate { locked { ByteRate(bytesPerSecond: load(Self.rateOffset)) } }

    func reserve(_ bytes: Int, at _: ContinuousClock.Instant) -> Duration {
        locked {
            let now = clock()
            var ledger = self.ledger
            if now - load(Self.auditedOffset) >= 1_000_000_000 { audit(&ledger, at: now) }
            let wait = ledger.reserve(bytes, at: now)
            self.ledger = ledger
            return .nanoseconds(wait)
        }
    }

    func giveBack(_ count: Int) {
        locked {
            var ledger = self.ledger
            ledger.giveBack(count)
            self.ledger = ledger
        }
    }

    // MARK: Under the lock

    /// Runs `body` holding the file's lock. A lock that fails (it cannot, on an open file
    /// but for a signal, which is retried) runs `body` unlocked rather than stop the uploads.
    private func locked<Result>(_ body: () -> Result) -> Result {
        let held = (try? file.lockExclusively(waiting: true, path: path)) ?? false
        defer { if held { file.unlock() } }
        return body()
    }

    /// The bucket in the file.
    private var ledger: TokenLedger {
        get {
            TokenLedger(
                rate: load(Self.rateOffset), capacity: load(Self.capacityOffset),
                tokens: map.load(fromByteOffset: Self.tokensOffset, as: Double.self), updated: load(Self.updatedOffset))
        }
        set {
            store(Self.rateOffset, newValue.rate)
            store(Self.capacityOffset, newValue.capacity)
            map.storeBytes(of: newValue.tokens, toByteOffset: Self.tokensOffset, as: Double.self)
            store(Self.updatedOffset, newValue.updated)
        }
    }

    /// Clears the slots of processes gone (their liveness byte is free) and sets the rate to
    /// the smallest asked by those alive; with none (this one has no slot), to this one's.
    private func audit(_ ledger: inout TokenLedger, at now: Int64) {
        var smallest: Int64?
        for index in 0..<Self.slots {
            let asked = load(Self.slotsOffset + 8 * index)
            guard asked > 0 else { continue }
            if index != slot, !file.byteIsLockedElsewhere(at: Self.livenessBase + Int64(index)) {
                store(Self.slotsOffset + 8 * index, 0)
                continue
            }
            smallest = min(smallest ?? asked, asked)
        }
        ledger.change(rate: smallest ?? asked.bytesPerSecond, at: now)
        store(Self.auditedOffset, now)
    }

    private func load(_ offset: Int) -> Int64 { map.load(fromByteOffset: offset, as: Int64.self) }
    private func store(_ offset: Int, _ value: Int64) { map.storeBytes(of: value, toByteOffset: offset, as: Int64.self) }
}
