/// The queue of one run of uploads, without threads or locks of its own (the runner holds
/// it in a mutex): the jobs submitted one by one, and the position reached in the journal's
/// pending uploads of the volume it follows. Each change returns the waiting worker to
/// resume, if it is to wake.
struct UploadQueue: Sendable {
    /// What the worker is to do next.
    enum Next: Sendable {
        case job(UploadRunner.Job)
        /// Read up to `limit` of the volume's pending uploads after `position`.
        case read(volume: String, after: Int64, limit: Int)
        /// Nothing to do until something is submitted, planned or finished.
        case wait
        /// Finished, and nothing is left.
        case end
    }

    let pageSize: Int
    private var jobs: [UploadRunner.Job] = []
    private var head = 0
    /// The volume whose uploads are read from the journal.
    private var volume: String?
    /// Uploads at or before this position were planned before this run.
    private var plannedBefore: Int64 = 0
    /// The journal's position read up to.
    private var position: Int64 = 0
    /// Whether the journal may hold uploads after ``position``.
    private var more = false
    /// Counts ``journalGrew()``: one that comes while a page is read is not lost.
    private var growth = 0
    private var growthAtRead = 0
    private var reading = false
    private var finished = false
    private var waiter: CheckedContinuation<Void, Never>?

    init(pageSize: Int) {
        precondition(pageSize > 0)
        self.pageSize = pageSize
    }

    mutating func follow(volume: String, plannedAfter start: Int64) {
        self.volume = volume
        plannedBefore = start
        position = 0
        more = true
    }

    /// The journal could not be read: the rest stays pending there.
    mutating func unfollow() {
        volume = nil
        reading = false
    }

    func plannedBeforeRun(_ position: Int64) -> Bool { position <= plannedBefore }

    mutating func submit(_ job: UploadRunner.Job) -> CheckedContinuation<Void, Never>? {
        jobs.append(job)
        return wake()
    }

    mutating func journalGrew() -> CheckedContinuation<Void, Never>? {
        growth += 1
        more = true
        return wake()
    }

    mutating func finish() -> CheckedContinuation<Void, Never>? {
        finished = true
        return wake()
    }

    mutating func take() -> Next {
        if head < jobs.count {
            defer {
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: jobs.capacity <= 2 * pageSize)
                    head = 0
                }
            }
            return .job(jobs[head])
        }
        if let volume, more, !reading {
            reading = true
            growthAtRead = growth
            return .read(volume: volume, after: position, limit: pageSize)
        }
        return finished && !reading ? .end : .wait
    }

    /// A page was read: its jobs (those not queued already), through the position of its
    /// last row; `full`: it held as many as asked, so more may follow.
    mutating func read(_ page: [UploadRunner.Job], through last: Int64?, full: Bool) {
        reading = false
        if let last { position = last }
        more = full || growth != growthAtRead
        jobs.append(contentsOf: page)
    }

    /// Parks the worker; or, when there is something to do already, hands it back to resume.
    mutating func wait(_ continuation: CheckedContinuation<Void, Never>) -> CheckedContinuation<Void, Never>? {
        if head < jobs.count || (volume != nil && more) || finished {
            return continuation
        }
        waiter = continuation
        return nil
    }

    private mutating func wake() -> CheckedContinuation<Void, Never>? {
        defer { waiter = nil }
        return waiter
    }
}
