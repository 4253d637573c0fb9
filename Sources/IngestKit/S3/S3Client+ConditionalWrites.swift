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
    /// Whether the answer to the write that made the probe object gave back the CRC32C it
    /// was sent with: S3, SeaweedFS and moto keep a checksum sent with an object (and check
    /// it, S3 and SeaweedFS), Ceph RGW before Squid keeps none and ignores the header. Nil
    /// when no write succeeded.
    public var echoedCRC32C: Bool?

    public init(answer: Answer, leftInPlace: S3ClientError? = nil, echoedCRC32C: Bool? = nil) {
        self.answer = answer
        self.leftInPlace = leftInPlace
        self.echoedCRC32C = echoedCRC32C
    }

    /// What the trial of `key` says of conditional writes, for the uploader: a write that
    /// failed counts as not honoured, with its words.
    public func conditionalWrites(key: String) -> ConditionalWrites {
        switch answer {
        case .honoured: .honoured
        case .ignored: .notHonoured(reason: "PutObject with If-None-Match: * wrote over \(key), which it had just written")
        case .failed(let error): .notHonoured(reason: "a conditional PutObject of \(key) failed: \(error)")
        }
    }
}

extension S3Client {
    /// Finds out whether the server honours `If-None-Match: *` (``tryConditionalWrite(key:)``):
    /// a write that failed counts as not honoured, with its words.
    public func probeConditionalWrites(key: String) async -> ConditionalWrites {
        await tryConditionalWrite(key: key).conditionalWrites(key: key)
    }

    /// Probes `If-None-Match: *` with an empty object at `key`: written only if absent, then
    /// written again only if absent. A server that honours the condition answers the second
    /// write (or the first, if another probe's object is there) with `412`; one that ignores
    /// it writes the same empty object twice, which harms nothing. The writes carry the
    /// empty body's CRC32C, and the first answer says whether the server keeps checksums
    /// (``ConditionalWriteTrial/echoedCRC32C``). The probe deletes the object it made.
    public func tryConditionalWrite(key: String) async -> ConditionalWriteTrial {
        let digest = PartDigest.compute(.crc32c, bytes: [])
        let headers = [
            SigV4Header.ifNoneMatchAny, SigV4Header("Content-Type", "text/plain"),
            SigV4Header("x-amz-meta-ingest-probe", "conditional writes"),
        ] + digest.headers
        var created = false
        var echoed: Bool?
        var answer = ConditionalWriteTrial.Answer.honoured
        for _ in 1...2 {
            do {
                let written = try await putObject(key: key, body: .bytes([]), payloadHash: .emptyBody, headers: headers)
                echoed = echoed ?? (written.checksumCRC32C == digest.base64)
            } catch {
                if !error.isPreconditionFailed { answer = .failed(error) }
                break
            }
            if created { answer = .ignored }
            created = true
        }
        var trial = ConditionalWriteTrial(answer: answer, echoedCRC32C: echoed)
        if created {
            do { _ = try await perform("DELETE", key: key) } catch { trial.leftInPlace = error }
        }
        return trial
    }
}
