/// `verify-card --read-back`: an object whose `HEAD` passed (its size, and the fingerprint
/// its label carries) is read back whole and its bytes fingerprinted, the proof its label
/// cannot give: anyone who can write the bucket can copy a label onto other bytes.
extension CardVerification {
    /// Reads the object `check` names back, only while its ETag is the one `head` showed,
    /// and compares the fingerprint of its bytes with the card's. The bytes hashed are
    /// counted in `progress` as they are.
    static func readBack(
        _ check: CardObjectCheck, head: ObjectHead, in store: any ObjectStore, with reader: ObjectReadBack,
        progress: CardVerificationProgress, stop: StopFlag
    ) async -> CardVerdict {
        func problem(_ code: CardVerificationProblem.Code, _ message: String) -> CardVerdict {
            .problem(CardVerificationProblem(
                code: code, path: check.path, message: message, size: check.size, fingerprint: check.fingerprint,
                key: check.key, uploadID: check.uploadID))
        }
        let place = "s3://\(check.target.bucket)/\(check.key)"
        let outcome: ObjectReadBack.Outcome
        do throws(S3ClientError) {
            outcome = try await reader.read(key: check.key, size: head.size, etag: head.etag, in: store, stop: stop) { bytes in
                progress.bytesReadBack.add(bytes, ordering: .relaxed)
            }
        } catch {
            let sorted = UploadError(error, what: "reading \(place) back", target: check.target)
            if sorted.scope == .destination { return .destination(sorted) }
            return problem(.objectUnchecked, "could not be read back: \(sorted.message)")
        }
        switch outcome {
        case .read(let found) where found == check.fingerprint:
            return .readBack(bytes: head.size)
        case .read(let found):
            return problem(
                .readBackDiffers,
                "the object at \(place) was read back: its \(head.size) bytes have fingerprint \(found.hex), the card's file "
                    + "\(check.fingerprint.hex), though its label says \(check.fingerprint.hex). Other bytes were put at its "
                    + "key with its label copied: keep the card, and find out who writes to the bucket")
        case .replaced:
            return problem(
                .readBackDiffers,
                "the object at \(place) was replaced while it was read back (its ETag is no longer \(head.etag ?? "the one shown")): "
                    + "keep the card, and find out who writes to the bucket")
        case .missing:
            return problem(.objectMissing, "the object at \(place) went away while it was read back: the bucket lost it")
        case .stopped:
            // Not read back whole: verified by its label alone, and the check says it stopped.
            return .verified(head: head)
        }
    }
}
