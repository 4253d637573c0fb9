import ArgumentParser
import Foundation
import IngestKit

/// `ingest ls [PREFIX]`: what the bucket holds, with the fingerprints ingest recorded.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List objects in the bucket with their size and fingerprint.",
        discussion: """
            Lists the objects under PREFIX (ListObjectsV2) and reads each one's metadata \
            (HeadObject) for the XXH3-128 fingerprint ingest stored with it, and its original \
            path on the card; for a large file whose parts were sent while it was copied, the \
            fingerprint is in its xxh128 tag (GetObjectTagging). Objects that ingest did not \
            upload show no fingerprint. Compare \
            with `xxh128sum` of a downloaded copy to check an object end to end.

            Examples:
              ingest ls --bucket cards station-7/2026-11-21/
              ingest ls --json | jq -r .key
            """)

    @OptionGroup var common: CommonOptions

    @OptionGroup var destination: DestinationOptions

    @Argument(help: ArgumentHelp("Only keys starting with this (default: the whole bucket).", valueName: "prefix"))
    var prefix: String = ""

    func run() async throws {
        let logger = common.bootstrapLogging()
        do throws(IngestError) {
            var config = try common.loadConfig()
            destination.apply(to: &config)
            let target = try config.s3.target()
            let client = try await common.makeStores(config: config, logger: logger).store(target)
            let what = "listing \(target.displayName)"
            guard client.capabilities.contains(.listing) else {
                throw .config(file: nil, key: "s3.endpoint", problem: "\(target.displayName) cannot list its objects")
            }
            var count = 0
            var bytes: Int64 = 0
            // Page by page: a bucket of millions of objects lists in the memory of one page.
            do {
                try await client.listObjects(prefix: prefix) { page in
                    // The bucket's identity marker is ingest's own, not a card's file.
                    let objects = page.filter { !$0.key.hasPrefix(".ingest/") }
                    let heads = await heads(of: objects.map(\.key), client: client)
                    for (object, head) in zip(objects, heads) { print(object, head: head) }
                    count += objects.count
                    bytes = objects.reduce(bytes) { $0.addingSaturating($1.size) }
                }
            } catch {
                throw .upload(UploadError(error, what: what, target: target))
            }
            if !common.json { ReportOutput.standardError.line("\(counted(count, "object")), \(ByteCount(bytes))") }
        } catch {
            throw fail(error, json: common.json)
        }
    }

    private func print(_ object: ListedObject, head: ObjectHead?) {
        let labels = ObjectLabelKeys.decoded(head?.metadata ?? [:])
        let fingerprint = labels[ObjectLabelKeys.fingerprint]
        let original = labels[ObjectLabelKeys.originalPath]
        if common.json {
            var line: [String: JSONValue] = ["event": "object", "key": .string(object.key), "size": .int(object.size)]
            line["xxh128"] = fingerprint.map(JSONValue.string)
            line["original_path"] = original.map(JSONValue.string)
            line["etag"] = .string(object.etag)
            ReportOutput.standardOutput.write(JSONValue.line(line) + "\n")
        } else {
            let size = String(object.size).leftPadded(to: 12)
            ReportOutput.standardOutput.line("\(size)  \((fingerprint ?? "-").leftPadded(to: 32))  \(object.key)")
        }
    }

    /// HeadObject for each key, eight at a time, with the fingerprint of a streamed object
    /// (in its tag) put with its metadata; nil for an object that vanished meanwhile.
    private func heads(of keys: [String], client: any ObjectStore) async -> [ObjectHead?] {
        var heads = [ObjectHead?](repeating: nil, count: keys.count)
        await withTaskGroup(of: (Int, ObjectHead?).self) { group in
            var next = 0
            func add() {
                guard next < keys.count else { return }
                let index = next
                next += 1
                group.addTask {
                    guard var head = try? await client.headObject(key: keys[index]) else { return (index, nil) }
                    if head.metadata[ObjectLabelKeys.fingerprint] == nil,
                        let tagged = try? await client.recordedFingerprint(of: head, key: keys[index])
                    {
                        head.metadata[ObjectLabelKeys.fingerprint] = tagged
                    }
                    return (index, head)
                }
            }
            for _ in 0..<8 { add() }
            for await (index, head) in group {
                heads[index] = head
                add()
            }
        }
        return heads
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
