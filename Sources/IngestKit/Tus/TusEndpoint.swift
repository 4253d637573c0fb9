import Foundation

/// A tus server's creation URL (`https://HOST/PATH/`), and the one server every request of
/// its uploads may go to.
///
/// The server is the URL's origin: scheme, host and port. An upload URL the server hands
/// out in `Location` is resolved against the creation URL and accepted only on the same
/// origin; so is every URL a request is sent to. A hostile or misconfigured server must not
/// make us send a card's bytes, or the extra headers with their bearer token, anywhere
/// else: not to another host, nor to another port of this one, nor over `http://` when the
/// creation URL is `https://` (the token would cross the network in the clear).
public struct TusEndpoint: Sendable, Equatable {
    /// The creation URL as given.
    public let creationURL: String
    /// `scheme://host:port`, lowercased, the port always written.
    public let origin: String

    /// Fails for a URL that is not `http://` or `https://` with a host, or that carries a
    /// user and password (credentials go in the client's headers, which are kept out of
    /// logs; a URL is not) or a fragment. Whether plain HTTP is allowed is the caller's
    /// decision.
    public init(_ creationURL: String) throws(TusError) {
        guard let url = URL(string: creationURL) else { throw .invalidCreationURL(reason: "is not a URL") }
        guard url.user == nil, url.password == nil else {
            throw .invalidCreationURL(reason: "holds a user or password (give credentials as headers)")
        }
        guard url.fragment == nil else { throw .invalidCreationURL(reason: "has a fragment (#…)") }
        guard let origin = Self.origin(of: url) else {
            throw .invalidCreationURL(reason: "is not an http:// or https:// URL with a host")
        }
        self.creationURL = creationURL
        self.origin = origin
    }

    /// The absolute upload URL a `Location` header stands for: resolved against the creation
    /// URL when relative (`/files/abc`, `abc`), taken as is when absolute; refused when it is
    /// on another server (see the type's documentation). `status` is the answer's, for the
    /// error when the header is not a URL.
    public func resolve(location: String, status: Int = 201) throws(TusError) -> String {
        guard let base = URL(string: creationURL), let url = URL(string: location, relativeTo: base)?.absoluteURL else {
            throw .unexpectedAnswer(status: status, detail: "the Location header is not a URL")
        }
        try checkSameServer(url)
        return url.absoluteString
    }

    /// Throws unless `url` is on the creation URL's server.
    public func checkSameServer(_ url: String) throws(TusError) {
        guard let parsed = URL(string: url) else { throw .foreignServer(origin: "not a URL") }
        try checkSameServer(parsed)
    }

    private func checkSameServer(_ url: URL) throws(TusError) {
        let other = Self.origin(of: url)
        guard other == origin, url.user == nil, url.password == nil else {
            throw .foreignServer(origin: other ?? "not an http(s) URL")
        }
    }

    /// `scheme://host:port` of an `http`/`https` URL with a host, lowercased, with the
    /// scheme's default port written out (so that `https://h/` and `https://h:443/` are one
    /// server); nil for any other URL.
    private static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host?.lowercased(), !host.isEmpty
        else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }
}
