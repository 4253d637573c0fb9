import Foundation
import Synchronization

extension UploadService {
    /// Takes up what processes that stopped uncleanly left, before a run plans or resumes
    /// anything, and tells `sink` what was recovered (once per process, and only when there
    /// is something to tell).
    ///
    /// A stream (the parts of a large file sent as it was copied) whose owner is gone is
    /// adopted as its file's upload when the file was staged as the stream saw it: its
    /// acknowledged parts are kept, and the upload sends the rest from the staged copy, card
    /// or no card. A stream whose file's copy never completed is aborted: the card's next
    /// run sends that file again. A stream whose owner still runs is left to it.
    public func recover(sink: any EventSink) async throws(IngestError) {
        var recovery = Recovery()
        recovery.uncleanStops = uncleanStopsToTell.exchange(0, ordering: .relaxed)
        do { try await journal.settleFilesOfVerifiedUploads() } catch { throw .journal(error) }
        let streams: [AdoptableStream]
        do { streams = try await journal.adoptableStreams() } catch { throw .journal(error) }
        for candidate in streams {
            let stream = candidate.stream
            guard let lock = try stateDirectory.lockStream(stream.id) else { continue }
            defer { lock.release() }
            do {
                guard try await journal.hasStream(stream.id) else { continue }
                if let claim = candidate.claim(),
                    case .planned = try await journal.claim([claim], volumeKey: stream.volumeKey).first
                {
                    recovery.streamsAdopted += 1
                    recovery.streamedPartsKept += candidate.parts.count
                    continue
                }
            } catch { throw .journal(error) }
            // Not staged as streamed, or its content planned already: the upload goes. When
            // the server cannot be asked now, the stream stays for the next run.
            guard case .success(let ready) = await destinations.client(for: stream.target),
                (try? await ready.client.abortMultipartUpload(key: stream.key, uploadID: stream.uploadID)) != nil
            else { continue }
            try? await journal.endStream(stream.id)
            recovery.streamsAborted += 1
        }
        guard !recovery.isEmpty else { return }
        do {
            (recovery.uploadsPending, recovery.partsKept, recovery.filesNeedingCard) = try await journal.leftToTakeUp()
        } catch { throw .journal(error) }
        logger.notice("\(recovery.text)")
        sink.emit(.upload(.recovered(recovery)))
    }
}
