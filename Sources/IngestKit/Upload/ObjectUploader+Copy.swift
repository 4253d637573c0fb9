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
    /// file's own, fingerprint included (``copyHeaders``), so a copy of bytes written over
    /// the source since would carry a fingerprint they do not have. A source that carries no
    /// fingerprint is not other bytes on that alone: proven ours by what the server says of
    /// it (``lookAtKey(completedFrom:copiedFrom:)``) it is tagged and copied. A source gone,
    /// holding other bytes, or unproven starts the content's upload again, and the copy
    /// waits for it.
    ///
    /// The same no-replace rule as a write: the key is looked at first (a copy request's
    /// `If-None-Match` is not honoured by every server that honours it on `PutObject`, so
    /// the look is what keeps an object there), and the copy is sent with `If-None-Match: *`
    /// where the server honours it. An object at the key that is a copy of the source
    /// without a fingerprint (made before copies carried one) is proven ours by the
    /// server's ETag or checksum of both, and tagged. A key holding other bytes sends the
    /// copy to its alternative key. An empty file is one empty `PutObject` rather than a copy.
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
        if let decided = Self.decided(by: await lookAtKey(copiedFrom: source)) { return decided }
        let condition = conditionalWrites ? [SigV4Header.ifNoneMatchAny] : []
        do {
            if record.size == 0 {
                _ = try await client.putObject(
                    key: record.key, body: .bytes([]), payloadHash: .emptyBody, headers: copyHeaders + condition)
            } else {
                guard let head = try await client.headObject(key: source.key), let etag = head.etag, head.size == source.size
                else { return .done(await sourceGone(source)) }
                let recorded = try await client.recordedFingerprint(of: head, key: source.key)
                if recorded == nil {
                    // Its fingerprint's tag never set (a kill between its `Complete` and the
                    // tagging): proven ours by what the server says of its bytes, it is
                    // tagged and copied; unproven, its content is sent again.
                    switch await acting(for: source).lookAtKey() {
                    case .success(.ours): break
                    case .success(.free), .success(.taken): return .done(await sourceGone(source))
                    case .failure(let error): return .done(.failed(error))
                    }
                } else if recorded != source.fingerprint {
                    return .done(await sourceGone(source))
                }
                if record.size <= singleCopyLimit {
                    _ = try await client.copyObject(
                        key: record.key, from: source.key, sourceETag: etag, headers: copyHeaders + condition)
                } else {
                    try await copyInParts(from: source, sourceETag: etag)
                }
            }
        } catch {
            if error.isPreconditionFailed { return await afterPreconditionFailed(copiedFrom: source) }
            if case .server(let problem, _) = error, problem.code == .noSuchKey || problem.status == 404 {
                return .done(await sourceGone(source))
            }
            return .done(.failed(UploadError(error, what: "CopyObject \(source.key) to \(record.key)", target: record.target)))
        }
        switch await lookAtKey(copiedFrom: source) {
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

    /// The headers a copy's object is made with (`x-amz-metadata-directive` and
    /// `x-amz-tagging-directive: REPLACE`: the file's own labels, not the source's): the
    /// record's, with the content's fingerprint in its metadata (`x-amz-meta-xxh128`) and,
    /// where the record puts it in a tag (``UploadRecord/fingerprintGoesInTag``: planned as
    /// streamed, its parts to be sent before the fingerprint was known), in its `xxh128` tag
    /// too. At the time of a copy the content's fingerprint is known, so whatever the record
    /// was planned as, the object carries it from its first byte: a server that does not
    /// tag on a copy, or a kill before a tagging, can never leave it without one.
    ///
    /// The metadata gets the fingerprint only within S3's 2 KB of user metadata (a streamed
    /// record's labels were checked without it); beyond, the tag alone carries it.
    var copyHeaders: [SigV4Header] {
        let metadataName = ObjectLabels.metadataPrefix + ObjectLabelKeys.fingerprint
        var headers = record.requestHeaders
        let taggedToo = record.fingerprintGoesInTag
        if !headers.contains(where: { $0.name.lowercased() == metadataName }) {
            let metadataBytes = headers.reduce(0) { total, header in
                let name = header.name.lowercased()
                guard name.hasPrefix(ObjectLabels.metadataPrefix) else { return total }
                return total + name.utf8.count - ObjectLabels.metadataPrefix.utf8.count + header.value.utf8.count
            }
            if metadataBytes + ObjectLabelKeys.fingerprint.utf8.count + record.fingerprint.utf8.count
                <= ObjectLabels.maximumMetadataBytes
            {
                headers.append(SigV4Header(metadataName, record.fingerprint))
            }
        }
        if taggedToo {
            var tags = record.objectTags
            tags[ObjectLabelKeys.fingerprint] = record.fingerprint
            headers.removeAll { $0.name.lowercased() == ObjectLabels.taggingHeader }
            headers.append(SigV4Header(ObjectLabels.taggingHeader, ObjectTagging.header(tags)))
        }
        return headers
    }

    /// A copy above ``S3UploadLimits/maxSingleCopySize``: a multipart upload whose parts are
    /// ranges of the source, completed with `If-None-Match` where honoured. Aborted if any
    /// step fails, so no unfinished upload is left at the key.
    private func copyInParts(from source: UploadRecord, sourceETag: String) async throws(S3ClientError) {
        let uploadID = try await client.createMultipartUpload(key: record.key, size: record.size, headers: copyHeaders)
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
