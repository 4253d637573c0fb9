import Foundation

/// Turns a staged file of one card into the upload the journal records: its key from the
/// template, its labels (checked once per card, then per file), its content type, and how
/// it is cut into parts.
///
/// Everything here is decided once, when the file is staged, and stored with the upload: a
/// resume next week sends the same key and the same headers even if the configuration
/// changed in between.
public struct UploadPlanner: Sendable {
    let target: S3Destination
    let template: KeyTemplate
    let policy: LabelPolicy
    /// The labels every file of the card shares.
    let cardLabels: LabelSet
    let settings: UploadSettings
    let device: String
    let volume: VolumeIdentity
    let runDate: Date
    /// When the journal first saw the card: its `{card_date}`.
    let cardDate: Date?

    /// Checks the run's labels and the card's (its identity and its scene file, read with
    /// ``SceneFile/read(cardRoot:)``) before anything of the card is uploaded.
    public init(
        config: Config, request: UploadRequest, volume: VolumeIdentity, sceneFile: SceneFile?, runDate: Date = Date(),
        cardDate: Date? = nil
    ) throws(IngestError) {
        self.cardDate = cardDate
        target = request.target
        settings = config.upload
        self.volume = volume
        self.runDate = runDate
        device = config.device.id ?? Self.hostName()
        do { template = try KeyTemplate(prefix: config.s3.prefix, template: config.s3.keyTemplate) } catch {
            throw .config(file: config.source, key: error.configKey, problem: error.description)
        }
        do {
            policy = try Self.labelPolicy(config: config, request: request)
            cardLabels = try policy.cardLabels(card: CardLabels(device: volume.device), sceneFile: sceneFile)
        } catch {
            throw .labels(error.description)
        }
    }

    /// The labels of a run: the configuration's `[device]`, `[scene]` and `[s3] object_tags`,
    /// and the request's scene and tags. Making it checks everything about them that no card
    /// can change (``LabelPolicy/init(deviceID:deviceTags:defaultScene:commandLine:objectTagKeys:)``):
    /// ``Ingestor`` makes it before it touches a card, so a problem stops the run before
    /// anything is staged.
    public static func labelPolicy(config: Config, request: UploadRequest) throws(LabelError) -> LabelPolicy {
        let defaultScene = config.scene.name == nil && config.scene.tags.isEmpty
            ? nil : Scene(name: config.scene.name, tags: config.scene.tags)
        return try LabelPolicy(
            deviceID: config.device.id, deviceTags: config.device.tags, defaultScene: defaultScene,
            commandLine: Scene(name: request.scene, tags: request.tags), objectTagKeys: config.s3.objectTagKeys)
    }

    /// The upload of one staged file.
    public func claim(for file: ScannedFile, fingerprint: Fingerprint) throws(UploadPlanError) -> UploadClaim {
        let (key, headers, plan) = try object(for: file, fingerprint: fingerprint)
        return UploadClaim(
            path: file.path, fingerprint: fingerprint, size: file.size, target: target, key: key, headers: headers,
            partSize: plan.partSize, checksum: settings.checksum)
    }

    /// The object a file being read becomes, when its parts can be sent before its
    /// fingerprint is known: a multipart upload with CRC32C checksums, at a key that does not
    /// hold the fingerprint, with tag room left for the fingerprint's. Its labels lack the
    /// fingerprint, which goes in a tag once the object is complete. nil: the file is
    /// uploaded once staged, the ordinary way.
    public func streamedObject(for file: ScannedFile) -> StreamedObject? {
        guard settings.checksum == .crc32c, !template.usesFingerprint,
            let (key, headers, plan) = try? object(for: file, fingerprint: nil), let partSize = plan.partSize,
            plan.partCount > 1
        else { return nil }
        let tagging = headers.first { $0.name == ObjectLabels.taggingHeader }?.value ?? ""
        guard tagging.split(separator: "&").count < ObjectTagging.maximumTags else { return nil }
        return StreamedObject(target: target, key: key, headers: headers, partSize: partSize, partCount: plan.partCount)
    }

    private func object(for file: ScannedFile, fingerprint: Fingerprint?) throws(UploadPlanError)
        -> (key: String, headers: [SigV4Header], plan: PartPlan)
    {
        let key: String
        do {
            key = try template.key(
                for: KeyContext(
                    device: device, volume: volume, file: file, fingerprint: fingerprint ?? Self.unknownFingerprint,
                    runDate: runDate, cardDate: cardDate))
        } catch { throw .key(error) }
        let labels: ObjectLabels
        do { labels = try policy.objectLabels(base: cardLabels, path: file.path, fingerprint: fingerprint) } catch {
            throw .labels(error)
        }
        let plan: PartPlan
        do {
            plan = try PartPlan.plan(
                fileSize: file.size, preferredPartSize: settings.partSize, singlePutThreshold: settings.singlePutThreshold)
        } catch { throw .plan(error) }
        var headers = labels.headers.map { SigV4Header($0.name, $0.value) }
        headers.append(SigV4Header("Content-Type", ContentType.of(name: Array(file.path.name))))
        return (key, headers, plan)
    }

    /// The card's folder in the bucket as `config`'s key template gives it
    /// (``KeyTemplate/cardPrefix(for:)``); nil when the template may spread the card, or is
    /// not valid.
    public static func cardFolder(config: Config, volume: VolumeIdentity, cardDate: Date?) -> String? {
        guard let template = try? KeyTemplate(prefix: config.s3.prefix, template: config.s3.keyTemplate) else { return nil }
        let context = KeyContext(
            device: config.device.id ?? hostName(), volume: volume, file: ScannedFile(path: CardPath("-"), size: 0, mtime: 0),
            fingerprint: unknownFingerprint, runDate: Date(), cardDate: cardDate)
        return template.cardPrefix(for: context)
    }

    /// What a key is made with before the fingerprint is known: only for templates without
    /// `{xxh128}` (``KeyTemplate/usesFingerprint``), which never read it.
    private static let unknownFingerprint = Fingerprint(high: 0, low: 0)

    static func hostName() -> String {
        System.hostName ?? "localhost"
    }
}

/// Why one staged file cannot become an object. The file stays staged; the message says
/// which setting to change.
public enum UploadPlanError: Error, Sendable, Equatable, CustomStringConvertible {
    case key(KeyTemplateError)
    case labels(LabelError)
    case plan(PartPlanError)

    public var description: String {
        switch self {
        case .key(let error): "\(error)"
        case .labels(let error): "\(error)"
        case .plan(let error): "\(error)"
        }
    }
}
