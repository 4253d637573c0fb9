/// A file whose content another file sent to the bucket: its object is a copy the server
/// makes (``ObjectUploader/copyOnce(from:)``), attempted until it ends.
extension UploadRun {
    /// Copies `source`, the verified upload of `uploader`'s content, to `uploader`'s key;
    /// a key that holds other bytes sends the copy to its alternative key
    /// (``ObjectUploader/movedAside(from:)``, which fails on the alternative key already).
    /// Then records the outcome in the journal.
    static func copy(_ uploader: ObjectUploader, from source: UploadRecord) async -> UploadResult {
        var copier = uploader
        while true {
            switch await copier.copyOnce(from: source) {
            case .done(let result):
                return await copier.conclude(result)
            case .keyTaken(let head):
                switch await copier.movedAside(from: head) {
                case .success(let moved): copier = moved
                case .failure(let error): return await copier.conclude(.failed(error))
                }
            }
        }
    }
}
