import Foundation

/// A file whose content another file sent to the bucket gets its own object by a copy the
/// server makes (``UploadRecord/copyKey``): no byte of the content crosses the network again.
extension ObjectUploader {
    /// One attempt at making this copy's object at the record's key from `source`, the
    /// verified upload of its content (``UploadRun/copy(_:from:)`` drives the attempts),
    /// then verifies it as any object: size and recorded fingerprint, by `HEAD`.
    ///
    /// The source is looked at first (size and recorded fingerprint), and copied only while
    /// its ETag is the one seen (`x-amz-copy-source-if-match`): the copy's metadata is the
    /// file's own, fingerprint included, so a copy of bytes written over the source since
    /// would carry a fingerprint they do not have. A source gone or holding other bytes
    /// starts the content's upload again, and the copy waits for it.
    ///
    /// The same no-replace rule as a write: the key is looked at first (a copy request's
    /// `If-None-Match` is not honoured by every server that honours it on `PutObject`, so
    /// the look is what keeps an object there), and the copy is sent with `If-None-Match: *`
    /// where the server honours it. A key holding other bytes sends the copy to its
    /// alternative key. An empty file is one empty `PutObject` rather than a copy.
    ///
    /// A copy has nothing on the server to resume: an unfinished one starts again.
    ///
    /// A destination that cannot copy (``StoreCapabilities/serverSideCopy``; a tus server
    /// addresses uploads by URL, not by key) holds the content once, as `source`'s verified
    /// upload: this file counts as that upload (dedupe by content per destination), and
    /// nothing is sent.
    func copyOnce(from source: UploadRecord) async -> Attempt {
        // The file's object is its content's: its identity is the source's.
        guard client.capabilities.contains(.serverSideCopy) else { return .verified(alreadyThere: true, object: source.recordedObject) }
        if let decided = Self.decided(by: await lookAtKey()) { return decided }
        let condition = conditionalWrites ? [SigV4Header.ifNoneMatchAny] : []
        do {
            if record.size == 0 {
                _ = try await client.putObject(
                    key: record.key, body: .bytes([]), payloadHash: .emptyBody, headers: record.requestHeaders + condition)
            } else {
                guard let head = try await client.headObject(key: source.key), let etag = head.etag,
                    head.size == source.size, try await client.recordedFingerprint(of: head, key: source.key) == source.fingerprint
                else { return .done(await sourceGone(source)) }
                if record.size <= singleCopyLimit {
                    _ = try await client.copyObject(
                        key: record.key, from: source.key, sourceETag: etag, headers: record.requestHeaders + condition)
                } else {
                    try await copyInParts(from: source, sourceETag: etag)
                }
            }
        } catch {
            if error.isPreconditionFailed { return await afterPreconditionFailed() }
            if case .server(let problem, _) = error, problem.code == .noSuchKey || problem.status == 404 {
                return .done(await sourceGone(source))
            }
            return .done(.failed(UploadError(error, what: "CopyObject \(source.key) to \(record.key)", target: record.target)))
        }
        switch await lookAtKey() {
        case .failure(let error): return .done(.failed(error))
        case .success(.ours(let head)): return .verified(alreadyThere: false, object: StoredObject(head))
        case .success(.free):
            return .done(.failed(UploadError(
                exitStatus: .partial, scope: .object,
                message: "\(record.key) in \(record.target.displayName) was copied from \(source.key), then had no object: "
                    + "the file stays staged; run ingest resume.")))
        case .success(.taken(let head)):
            return .done(.failed(UploadError(
                exitStatus: .integrity, scope: .object,
                message: "\(record.key) in \(record.target.displayName) was copied from \(source.key), then held other "
                    + "bytes (\(head.size) bytes, fingerprint \(head.metadata[ObjectLabelKeys.fingerprint] ?? "none")): "
                    + "the file stays staged; run ingest resume.")))
        }
    }

    /// A copy above ``S3UploadLimits/maxSingleCopySize``: a multipart upload whose parts are
    /// ranges of the source, completed with `If-None-Match` where honoured. Aborted if any
    /// step fails, so no unfinished upload is left at the key.
    private func copyInParts(from source: UploadRecord, sourceETag: String) async throws(S3ClientError) {
        let uploadID = try await client.createMultipartUpload(key: record.key, size: record.size, headers: record.requestHeaders)
        do {
            var parts: [CompletedPart] = []
            var offset: Int64 = 0
            while offset < record.size {
                let end = min(offset + copyPartSize, record.size) - 1
                let etag = try await client.uploadPartCopy(
                    key: record.key, uploadID: uploadID, partNumber: parts.count + 1, from: source.key, sourceETag: sourceETag,
                    range: offset...end)
                parts.append(CompletedPart(number: parts.count + 1, etag: etag))
                offset = end + 1
            }
            _ = try await client.completeMultipartUpload(
                key: record.key, uploadID: uploadID, parts: parts,
                headers: conditionalWrites ? [SigV4Header.ifNoneMatchAny] : [])
        } catch {
            try? await client.abortMultipartUpload(key: record.key, uploadID: uploadID)
            throw error
        }
    }

    /// The object the copy is made from is not in the bucket, or holds other bytes: its
    /// upload starts again (from its staged copy, or from the card when that is gone; to its
    /// alternative key if its key is taken), and the copy waits for it.
    private func sourceGone(_ source: UploadRecord) async -> UploadResult {
        var note = "the upload of its content starts again"
        do { _ = try await journal.restartUpload(id: source.id, key: source.key) } catch {
            note = "its content's upload could not be started again (\(error))"
        }
        return .failed(UploadError(
            exitStatus: .partial, scope: .object,
            message: "\(record.key) is to be copied from \(source.key) in \(record.target.displayName), which is gone from "
                + "the bucket or holds other bytes: \(note); the file stays staged until the next run (ingest resume) copies it."))
    }
}
