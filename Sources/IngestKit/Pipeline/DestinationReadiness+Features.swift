import Foundation

/// What an S3 server does of what ingest's proofs use, beyond conditional writes: whether
/// it reports a multipart object's CRC32C, and in which form, and whether it keeps tags.
/// Servers differ (issue 51): SeaweedFS and AWS by default report a composite CRC32C
/// (`<base64>-N`), AWS a full-object one for uploads created so, Ceph RGW before Squid
/// none at all; a server may refuse tags. Each is one line of `ingest check`, naming what
/// ingest falls back to.
extension DestinationReadiness {
    /// The bytes of the probe object: one part, small (the last part of an upload may be).
    static let featureProbeBytes = Array("ingest check: a probe of checksums and tags, deleted at once\n".utf8)

    /// Makes one multipart object of one part with a CRC32C (as an upload does), at a key of
    /// its own under `.ingest/` that holds nothing (looked at first: nothing is replaced),
    /// reads what `HEAD` with `x-amz-checksum-mode: ENABLED` reports, tags it and reads the
    /// tags back, then deletes it.
    func features(_ s3: S3Client) async -> [ReadinessCheck] {
        let key = ".ingest/check-probe-" + UUID().uuidString.lowercased()
        let bytes = Self.featureProbeBytes
        let digest = PartDigest.compute(.crc32c, bytes: bytes)
        let notMade = { (what: String, error: S3ClientError) -> [ReadinessCheck] in
            [
                .failed(
                    .checksums, "\(what) of the probe object \(key) failed: \(error)",
                    remedy: "let these credentials write (s3:PutObject) under .ingest/; the server's log may say more",
                    status: UploadError(error, what: what, target: target).exitStatus),
                .skipped(.tagging, because: "needs the probe object"),
            ]
        }
        do {
            if try await s3.headObject(key: key, checksumMode: false) != nil {
                return [
                    .skipped(.checksums, because: "\(key) holds an object already (nothing is replaced)"),
                    .skipped(.tagging, because: "needs the probe object"),
                ]
            }
        } catch { return notMade("HeadObject", error) }
        let uploadID: String
        do {
            uploadID = try await s3.createMultipartUpload(
                key: key, headers: PartDigestAlgorithm.crc32c.createMultipartUploadHeaders)
        } catch { return notMade("CreateMultipartUpload", error) }
        let checks = await probe(s3, key: key, uploadID: uploadID, bytes: bytes, digest: digest, notMade: notMade)
        await Self.deleteProbe(key, uploadID: uploadID, from: s3)
        return checks
    }

    /// Completes the probe's upload and looks at the object: its checksum, then its tags.
    private func probe(
        _ s3: S3Client, key: String, uploadID: String, bytes: [UInt8], digest: PartDigest,
        notMade: (String, S3ClientError) -> [ReadinessCheck]
    ) async -> [ReadinessCheck] {
        var completeError: S3ClientError?
        do {
            let etag = try await s3.uploadPart(
                key: key, uploadID: uploadID, partNumber: 1, body: .bytes(bytes),
                payloadHash: PayloadHash(sha256Of: bytes), headers: digest.headers)
            _ = try await s3.completeMultipartUpload(
                key: key, uploadID: uploadID, parts: [CompletedPart(number: 1, etag: etag, digest: digest)])
        } catch {
            // An answer this client cannot read may still have completed the object (RGW 16's
            // empty ETag in CompleteMultipartUploadResult): the HEAD below says.
            completeError = error
        }
        let head: ObjectHead
        do {
            guard let found = try await s3.headObject(key: key, checksumMode: true) else {
                return notMade(
                    "CompleteMultipartUpload", completeError ?? .unexpectedAnswer(status: 200, detail: "no object after it"))
            }
            head = found
        } catch { return notMade("HeadObject", error) }
        return [Self.checksums(head, expected: digest, completeError: completeError), await tagging(s3, key: key)]
    }

    /// The checksum line: the form the server reported the one-part object's CRC32C in, read
    /// as an upload's check reads it (``WholeObjectDigest/check(_:)``), and the proof ingest
    /// takes there.
    static func checksums(_ head: ObjectHead, expected digest: PartDigest, completeError: S3ClientError?) -> ReadinessCheck {
        let etag = head.etag.map { "ETag \($0)" } ?? "no ETag"
        let answer =
            completeError.map { "; its CompleteMultipartUpload answer could not be read (\($0)), the object was made" } ?? ""
        guard let reported = head.checksumCRC32C else {
            return .warned(
                .checksums,
                "none reported for a multipart object (\(etag); Ceph RGW before Squid reports none): uploads there go "
                    + "with Content-MD5, which the server checks, and objects are proven by the ETag of their part "
                    + "MD5s\(answer)",
                remedy: "nothing needed; a server that keeps x-amz-checksum-crc32c proves each part by its CRC32C, "
                    + "at almost no CPU cost")
        }
        let shown = "x-amz-checksum-crc32c \(reported), x-amz-checksum-type \(head.checksumType ?? "not sent"), \(etag)"
        let expected = WholeObjectDigest.expected(parts: [digest], lengths: [Int64(featureProbeBytes.count)])
        guard expected.check(head) == .matches else {
            return .failed(
                .checksums,
                "a CRC32C that is not the one of the bytes sent, in any form (\(shown); expected \(expected)): every "
                    + "multipart upload there would fail its check and stay staged\(answer)",
                remedy: "set [upload] checksum = \"md5\" (objects are then proven by their MD5 ETags), and see the "
                    + "server's documentation for its checksums",
                status: .integrity)
        }
        let form =
            if reported.contains("-") {
                "composite CRC32C reported (\(shown)): objects are proven by the CRC32C of their parts' CRC32Cs"
            } else if reported == digest.base64 {
                "full-object CRC32C reported (\(shown)): objects are proven by the CRC32C combined from their parts' CRC32Cs"
            } else {
                "composite CRC32C reported without its -N part count (\(shown), as moto 5.2.5 does): objects are "
                    + "proven by the CRC32C of their parts' CRC32Cs"
            }
        return .passed(.checksums, form + answer)
    }

    /// The tagging line: a tag put on the probe object is read back.
    func tagging(_ s3: S3Client, key: String) async -> ReadinessCheck {
        let tags = ["ingest-probe": "tagging"]
        let remedy = "set [upload] stream_parts = false, so that every file is sent from its staged copy with its "
            + "fingerprint in the metadata; or let these credentials tag (s3:PutObjectTagging, s3:GetObjectTagging)"
        do {
            try await s3.putObjectTagging(key: key, tags: tags)
            let read = try await s3.getObjectTagging(key: key)
            guard read == tags else {
                return .warned(
                    .tagging, "PutObjectTagging was answered, but the tags read back are \(read ?? [:]), not \(tags): "
                        + "a streamed file's fingerprint could not be recorded in its xxh128 tag",
                    remedy: remedy)
            }
        } catch {
            return .warned(
                .tagging, "tags are not kept (\(error)): a streamed file's fingerprint could not be recorded in its "
                    + "xxh128 tag", remedy: remedy)
        }
        return .passed(.tagging, "tags kept: a file streamed as it is read gets its fingerprint in its xxh128 tag")
    }

    /// Deletes the probe object, and aborts its upload in case it was never completed; what
    /// cannot be removed is left (it is small, under .ingest/).
    static func deleteProbe(_ key: String, uploadID: String, from s3: S3Client) async {
        _ = try? await s3.perform("DELETE", key: key)
        _ = try? await s3.abortMultipartUpload(key: key, uploadID: uploadID)
    }
}
