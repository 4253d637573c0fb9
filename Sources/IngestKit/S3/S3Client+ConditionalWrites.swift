// Conditional writes (`If-None-Match: *`): the header, and the probe that finds out whether a
// server honours it.

import Logging

extension SigV4Header {
    /// Makes `PutObject` and `CompleteMultipartUpload` write only where no object is: a
    /// key that holds one answers `412 PreconditionFailed` and keeps its object.
    public static let ifNoneMatchAny = SigV4Header("If-None-Match", "*")
}

/// Whether a server honours `If-None-Match: *` on writes.
public enum ConditionalWrites: Sendable, Equatable {
    case honoured
    /// The server wrote over an object it was told to keep, or refused the probe; the
    /// reason says which.
    case notHonoured(reason: String)
}

/// What one probe of conditional writes found, in full (``S3Client/tryConditionalWrite(key:)``).
public struct ConditionalWriteTrial: Sendable, Equatable {
    public enum Answer: Sendable, Equatable {
        /// A write to a key that held an object was refused with `412`.
        case honoured
        /// The second write wrote over the object the first had just written.
        case ignored
        /// A write failed otherwise (refused credentials, a server error…).
        case failed(S3ClientError)
    }

    public var answer: Answer
    /// The probe wrote an object and could not delete it (credentials without
    /// `DeleteObject` leave it, empty): why.
    public var leftInPlace: S3ClientError?
}

extension S3Client {
    /// Finds out whether the server honours `If-None-Match: *` (``tryConditionalWrite(key:)``),
    /// for the uploader: a write that failed counts as not honoured, with its words.
    public func probeConditionalWrites(key: String) async -> ConditionalWrites {
        let trial = await tryConditionalWrite(key: key)
        if let error = trial.leftInPlace {
            logger.info("the probe object stays", metadata: ["key": "\(key)", "error": "\(error)"])
        }
        switch trial.answer {
        case .honoured: return .honoured
        case .ignored:
            return .notHonoured(reason: "PutObject with If-None-Match: * wrote over \(key), which it had just written")
        case .failed(let error): return .notHonoured(reason: "a conditional PutObject of \(key) failed: \(error)")
        }
    }

    /// Probes `If-None-Match: *` with an empty object at `key`: written only if absent, then
    /// written again only if absent. A server that honours the condition answers the second
    /// write (or the first, if another probe's object is there) with `412`; one that ignores
    /// it writes the same empty object twice, which harms nothing. The probe deletes the
    /// object it made.
    public func tryConditionalWrite(key: String) async -> ConditionalWriteTrial {
        let headers = [
            SigV4Header.ifNoneMatchAny, SigV4Header("Content-Type", "text/plain"),
            SigV4Header("x-amz-meta-ingest-probe", "conditional writes"),
        ]
        var created = false
        var answer = ConditionalWriteTrial.Answer.honoured
        for _ in 1...2 {
            do {
                _ = try await putObject(key: key, body: .bytes([]), payloadHash: .emptyBody, headers: headers)
            } catch {
                if !error.isPreconditionFailed { answer = .failed(error) }
                break
            }
            if created { answer = .ignored }
            created = true
        }
        var trial = ConditionalWriteTrial(answer: answer)
        if created {
            do { _ = try await perform("DELETE", key: key) } catch { trial.leftInPlace = error }
        }
        return trial
    }
}
