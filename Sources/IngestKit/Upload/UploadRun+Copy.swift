/// A file whose content another file sent to the bucket: its object is a copy the server
/// makes (``ObjectUploader/copyOnce(from:)``), attempted until it ends.
extension UploadRun {
    /// Copies `source`, the verified upload of `uploader`'s content, to `uploader`'s key,
    /// then records the outcome in the journal. A key that holds other bytes decides as an
    /// upload's does (``UploadStateMachine/afterKeyTaken(onAlternativeKey:foundSize:foundFingerprint:)``):
    /// the copy goes to its alternative key, or fails on that key already.
    static func copy(_ uploader: ObjectUploader, from source: UploadRecord) async -> UploadResult {
        var copier = uploader
        while true {
            switch await copier.copyOnce(from: source) {
            case .done(let result):
                return await copier.conclude(result)
            case let .verified(alreadyThere, object):
                return await copier.conclude(.uploaded(alreadyThere: alreadyThere), object: object)
            case .keyTaken(let head):
                let found = head.metadata[ObjectLabelKeys.fingerprint]
                switch UploadStateMachine.afterKeyTaken(
                    onAlternativeKey: copier.onAlternativeKey, foundSize: head.size, foundFingerprint: found)
                {
                case .startAgain(.alternative):
                    switch await copier.movedToAlternativeKey(foundSize: head.size, foundFingerprint: found) {
                    case .success(let moved): copier = moved
                    case .failure(let error): return await copier.conclude(.failed(error))
                    }
                case let decided:
                    guard case .finish(.failed(.keyTakenTwice)) = decided else {
                        preconditionFailure("UploadRun: a taken key decides \(decided)")
                    }
                    return await copier.conclude(.failed(copier.keyTakenTwice(foundSize: head.size, foundFingerprint: found)))
                }
            }
        }
    }
}
