import Foundation

/// How an upload's parts go out: the digests they carry, their bodies and payload hashes,
/// one `UploadPart` within the process-wide limit, and the parts a listing proves ours.
extension ObjectUploader {
    /// The digests parts go out with: the card's CRC32Cs when the stager (or the check
    /// before a resume) computed them for this cut, otherwise computed from the staged copy:
    /// from `bytes` when the body is in memory already, else read from the disk.
    struct PartSender: Sendable {
        let uploader: ObjectUploader
        let checksums: PartChecksums?

        /// The digest of part `number` at `range`, and whether it comes from the card's bytes.
        func digest(
            ofPart number: Int, range: (offset: Int64, length: Int64), bytes: [UInt8]? = nil
        ) async -> Result<(PartDigest, Bool), SystemError> {
            if let known = checksums?.digest(ofPart: number, partSize: uploader.record.partSize) { return .success((known, true)) }
            if let bytes { return .success((PartDigest.compute(uploader.record.checksum, bytes: bytes), false)) }
            return await ObjectUploader.digest(
                uploader.record.checksum, path: uploader.stagedPath, offset: range.offset, length: range.length
            ).map { ($0, false) }
        }
    }

    /// The body of `range` of the staged copy. A small one (``smallCopyLimit``) is read into
    /// memory here, on the calling task: one `pread` of a copy the page cache holds (it was
    /// staged through it), where streaming it cost a hand-over to a read-ahead thread and a
    /// wake-up of the transport's. It holds no more than its own buffer would have, and the
    /// files uploading at once bound how many there are. A larger one streams from the disk
    /// as it is sent.
    func body(of range: (offset: Int64, length: Int64)) -> Result<HTTPBody, SystemError> {
        guard range.length <= smallCopyLimit else {
            return .success(.file(path: stagedPath, offset: range.offset, length: range.length))
        }
        return Result { () throws(SystemError) -> HTTPBody in
            let file = try FileDescriptor(path: stagedPath, flags: .readOnly)
            // Read into uninitialised memory: zeroing it first cost as much as the copy.
            var failure: SystemError?
            let bytes = [UInt8](unsafeUninitializedCapacity: Int(range.length)) { buffer, count in
                do throws(SystemError) {
                    count = try file.read(into: UnsafeMutableRawBufferPointer(buffer), at: range.offset, path: stagedPath)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            // Shorter than planned: the copy was cut since it was staged.
            guard bytes.count == range.length else { throw SystemError(call: "pread", errno: .ioError, path: stagedPath) }
            return .bytes(bytes)
        }
    }

    /// `UNSIGNED-PAYLOAD` where TLS (or the loopback) protects the body; its SHA-256 over
    /// plain HTTP to another host, or with `[upload] sign_payloads` (``PayloadHash``): from
    /// `bytes` when the body is in memory already, else read from the staged copy.
    func bodyHash(of range: (offset: Int64, length: Int64), bytes: [UInt8]? = nil) async -> Result<PayloadHash, SystemError> {
        let signed = settings.signPayloads || client.bodiesCrossPlainHTTP
        if let bytes { return .success(signed ? PayloadHash(sha256Of: bytes) : .unsigned) }
        return await Self.bodyHash(path: stagedPath, range: range, signed: signed)
    }

    /// ``bodyHash(of:)`` of a range of the file at `path`: its SHA-256 when `signed`, read on a
    /// blocking worker, else `UNSIGNED-PAYLOAD`.
    static func bodyHash(
        path: String, range: (offset: Int64, length: Int64), signed: Bool
    ) async -> Result<PayloadHash, SystemError> {
        guard signed else { return .success(.unsigned) }
        return await BlockingWorkers.shared.run { () -> Result<PayloadHash, SystemError> in
            Result { () throws(SystemError) in try PayloadHash.ofFile(path: path, offset: range.offset, length: range.length) }
        }
    }

    static func digest(
        _ algorithm: PartDigestAlgorithm, path: String, offset: Int64, length: Int64
    ) async -> Result<PartDigest, SystemError> {
        await BlockingWorkers.shared.run { () -> Result<PartDigest, SystemError> in
            Result { () throws(SystemError) -> PartDigest in
                try PartDigest.compute(algorithm, path: path, offset: offset, length: length)
            }
        }
    }

    /// Digests one part and sends it, within the process-wide limit.
    func sendPart(
        uploadID: String, number: Int, range: (offset: Int64, length: Int64), sender: PartSender
    ) async -> UploadRun.PartAnswer {
        await limiter.withPermit(range.length) { () async -> UploadRun.PartAnswer in
            if stop.isRaised { return .notSent }
            let (digest, fromCard): (PartDigest, Bool)
            switch await sender.digest(ofPart: number, range: range) {
            case .success(let value): (digest, fromCard) = value
            case .failure(let error): return .unreadable(uploadID: uploadID, number: number, error)
            }
            let payloadHash: PayloadHash
            switch await bodyHash(of: range) {
            case .success(let hash): payloadHash = hash
            case .failure(let error): return .unreadable(uploadID: uploadID, number: number, error)
            }
            do throws(S3ClientError) {
                let etag = try await client.uploadPart(
                    key: record.key, uploadID: uploadID, partNumber: number, offset: range.offset,
                    body: .file(path: stagedPath, offset: range.offset, length: range.length), payloadHash: payloadHash,
                    headers: digest.headers)
                return .acknowledged(uploadID: uploadID, number: number, etag: etag, digest: digest)
            } catch {
                if stop.isRaised, error.isCut { return .notSent }
                if fromCard, error.isBadDigest { return .damaged(uploadID: uploadID, number: number) }
                return .failed(uploadID: uploadID, number: number, error: error)
            }
        }
    }

    /// Parts the server holds that the journal never recorded, proved ours: acknowledged
    /// just before a kill, or sent by another station whose upload this one takes over
    /// (``UploadRun``'s handover). A part is proved by the server's digest of it against
    /// this station's own read of the same range of the staged copy: its CRC32C where the
    /// server returns one, else its ETag, which is the MD5 of its bytes. A part that does
    /// not prove ours (another digest, another ETag form, encryption) is simply sent again.
    func adopt(_ parts: [ListedPart], plan: PartPlan) async -> [UploadStateMachine.AcknowledgedPart] {
        var adopted: [UploadStateMachine.AcknowledgedPart] = []
        let path = stagedPath
        for part in parts {
            let range = plan.range(ofPart: part.number)
            let proof: PartDigestAlgorithm = part.crc32c != nil ? .crc32c : .md5
            guard case .success(let read) = await Self.digest(proof, path: path, offset: range.offset, length: range.length)
            else { continue }
            let matches = part.crc32c.map { $0 == read.base64 } ?? (ETag.unquoted(part.etag).lowercased() == lowercaseHex(read.bytes))
            guard matches else { continue }
            let digest: PartDigest
            if record.checksum == proof {
                digest = read
            } else if case .success(let value) = await Self.digest(
                record.checksum, path: path, offset: range.offset, length: range.length)
            {
                digest = value
            } else {
                continue
            }
            adopted.append(.init(number: part.number, etag: part.etag, size: part.size, digest: digest.journalText))
        }
        return adopted
    }
}
