/// What a run uploads, and with which labels: the destination, the process's upload
/// service, and the scene and tags of this run (`--scene`, `--tag`).
public struct UploadRequest: Sendable {
    public var target: S3Destination
    public var service: UploadService
    public var scene: String?
    public var tags: [String: String]

    public init(target: S3Destination, service: UploadService, scene: String?, tags: [String: String]) {
        self.target = target
        self.service = service
        self.scene = scene
        self.tags = tags
    }
}
