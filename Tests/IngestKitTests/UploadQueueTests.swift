import Testing

@testable import IngestKit

/// The queue of a run of uploads, without threads: jobs submitted one by one, and the pages
/// of a card's uploads read from the journal, which is the queue.
@Suite struct UploadQueueTests {
    static func job(_ id: String) -> UploadRunner.Job { UploadRunner.Job(id: id, resumed: false, checksums: nil) }

    func taken(_ next: UploadQueue.Next) -> String {
        switch next {
        case .job(let job): "job \(job.id)"
        case let .read(volume, after, limit): "read \(volume) after \(after) limit \(limit)"
        case .wait: "wait"
        case .end: "end"
        }
    }

    @Test func aFollowedVolumeIsReadPageAfterPageWhileThePagesComeBackFull() {
        var queue = UploadQueue(pageSize: 2)
        queue.follow(volume: "uuid:A", plannedAfter: 10)
        #expect(taken(queue.take()) == "read uuid:A after 0 limit 2", "uploads an earlier run left pending come first")
        #expect(taken(queue.take()) == "wait", "one page is read at a time")
        queue.read([Self.job("a"), Self.job("b")], through: 7, full: true)
        #expect(taken(queue.take()) == "job a")
        #expect(taken(queue.take()) == "job b")
        #expect(taken(queue.take()) == "read uuid:A after 7 limit 2", "a full page: there may be more")
        queue.read([Self.job("c")], through: 12, full: false)
        #expect(taken(queue.take()) == "job c")
        #expect(taken(queue.take()) == "wait", "a short page: nothing more until more is planned")
        #expect(queue.plannedBeforeRun(7) && !queue.plannedBeforeRun(12))
    }

    @Test func uploadsPlannedWhileAPageIsReadAreReadNext() {
        var queue = UploadQueue(pageSize: 2)
        queue.follow(volume: "uuid:A", plannedAfter: 0)
        _ = queue.take()
        _ = queue.journalGrew()  // planned while the page was read: maybe after what it saw
        queue.read([], through: nil, full: false)
        #expect(taken(queue.take()) == "read uuid:A after 0 limit 2")
        queue.read([], through: nil, full: false)
        #expect(taken(queue.take()) == "wait")
        _ = queue.journalGrew()
        #expect(taken(queue.take()) == "read uuid:A after 0 limit 2")
    }

    @Test func submittedJobsGoFirstAndAFinishedQueueEndsOnlyOnceTheJournalHasNoMore() {
        var queue = UploadQueue(pageSize: 2)
        queue.follow(volume: "uuid:A", plannedAfter: 0)
        _ = queue.submit(Self.job("other-card"))
        #expect(taken(queue.take()) == "job other-card")
        _ = queue.finish()
        #expect(taken(queue.take()) == "read uuid:A after 0 limit 2", "finishing drains the journal's pages")
        queue.read([Self.job("a"), Self.job("b")], through: 2, full: true)
        #expect(taken(queue.take()) == "job a")
        #expect(taken(queue.take()) == "job b")
        #expect(taken(queue.take()) == "read uuid:A after 2 limit 2")
        queue.read([], through: nil, full: false)
        #expect(taken(queue.take()) == "end")
    }

    @Test func aQueueWithNothingToDoParksItsWorkerAndHandsItBackWhenWorkComes() async {
        var queue = UploadQueue(pageSize: 2)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            #expect(queue.wait(continuation) == nil, "parked")
            let woken = queue.submit(Self.job("a"))
            #expect(woken != nil)
            woken?.resume()
        }
        #expect(taken(queue.take()) == "job a")
    }
}
