/// The `Content-Type` of an object, from its file name: what a browser or a download tool
/// needs to open a card's photos, videos and logs the right way. Anything unknown is
/// `application/octet-stream`, which every client handles.
enum ContentType {
    static func of(name: [UInt8]) -> String {
        guard let dot = name.lastIndex(of: UInt8(ascii: ".")) else { return fallback }
        let suffix = String(decoding: name[name.index(after: dot)...], as: UTF8.self).lowercased()
        return known[suffix] ?? fallback
    }

    static let fallback = "application/octet-stream"

    static let known: [String: String] = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "tif": "image/tiff", "tiff": "image/tiff",
        "heic": "image/heic", "dng": "image/x-adobe-dng", "cr2": "image/x-canon-cr2", "cr3": "image/x-canon-cr3",
        "nef": "image/x-nikon-nef", "arw": "image/x-sony-arw",
        "mp4": "video/mp4", "mov": "video/quicktime", "mts": "video/mp2t", "avi": "video/x-msvideo",
        "wav": "audio/wav", "mp3": "audio/mpeg",
        "txt": "text/plain", "log": "text/plain", "csv": "text/csv", "srt": "application/x-subrip",
        "json": "application/json", "xml": "application/xml", "kml": "application/vnd.google-earth.kml+xml",
        "bin": fallback,
    ]
}
