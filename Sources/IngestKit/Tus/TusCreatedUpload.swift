import Foundation

/// An upload a tus server has just created (tus 1.0, "Creation"): where to send its bytes.
public struct TusCreatedUpload: Sendable, Equatable {
    /// The upload URL, absolute, on the creation URL's server (``TusClient`` refuses any
    /// other): the target of every later HEAD, PATCH and DELETE of this upload.
    public var url: String
    /// When the server will forget the upload if it is not finished (`Upload-Expires`), if
    /// it says.
    public var expires: Date?
    /// The bytes the server kept of the creation's own body (`creation-with-upload`); 0
    /// without one.
    public var offset: Int64

    public init(url: String, expires: Date?, offset: Int64 = 0) {
        self.url = url
        self.expires = expires
        self.offset = offset
    }
}
