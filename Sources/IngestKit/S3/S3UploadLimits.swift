/// The limits S3 sets on uploads, from the S3 API reference ("Amazon S3 multipart upload
/// limits" and "PutObject").
///
/// The object limit is the classic, documented 5 TiB. AWS has since raised it to 48.8 TiB,
/// but S3-compatible servers (and older AWS documentation) keep 5 TiB, and a camera card
/// never comes near either, so the smaller one is the safe promise.
public enum S3UploadLimits {
    /// The smallest part of a multipart upload, except the last one: 5 MiB.
    public static let minPartSize: Int64 = 5 * mebibyte
    /// The largest part of a multipart upload: 5 GiB.
    public static let maxPartSize: Int64 = 5 * gibibyte
    /// Part numbers run from 1 to 10,000.
    public static let maxPartCount = 10_000
    /// The largest object: 5 TiB (see the type's documentation for the newer 48.8 TiB).
    public static let maxObjectSize: Int64 = 5 * tebibyte
    /// The longest object key, in bytes of UTF-8: 1,024.
    public static let maxKeyBytes = 1024
    /// The largest object a single `PutObject` may send: 5 GiB.
    public static let maxSinglePutSize: Int64 = 5 * gibibyte
    /// The largest object a single `CopyObject` may copy: 5 GiB; larger ones are copied in
    /// parts (`UploadPartCopy`).
    public static let maxSingleCopySize: Int64 = 5 * gibibyte

    static let mebibyte: Int64 = 1 << 20
    static let gibibyte: Int64 = 1 << 30
    static let tebibyte: Int64 = 1 << 40
}
