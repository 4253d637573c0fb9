import Foundation
import Testing

@testable import IngestKit

/// What proves an object: the identity its completion recorded, compared and never adopted.
@Suite struct StoredObjectTests {
    let recorded = StoredObject(etag: "\"0a1b\"", size: 6, checksum: "AAAAAA==", versionID: "v1")

    @Test func theSameObjectShowsNoDifferenceWithOrWithoutQuotesOrAChecksum() {
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: "\"0a1b\"", checksumCRC32C: "AAAAAA==", versionID: "v1")) == nil)
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: "0a1b")) == nil, "a look that asked for no checksum")
    }

    @Test func anotherETagSizeChecksumOrVersionIsAnotherObject() {
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: "\"ffff\"")) == "ETag \"ffff\", \"0a1b\" when verified")
        #expect(recorded.difference(from: ObjectHead(size: 7, etag: "\"0a1b\"")) == "7 bytes, 6 when verified")
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: "\"0a1b\"", checksumCRC32C: "BBBBBB==")) != nil)
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: "\"0a1b\"", versionID: "v2")) != nil)
        #expect(recorded.difference(from: ObjectHead(size: 6, etag: nil)) != nil)
    }

    @Test func aLookWithoutAnETagRecordsNothing() {
        #expect(StoredObject(ObjectHead(size: 6, etag: nil)) == nil)
        #expect(StoredObject(ObjectHead(size: 6, etag: "\"\"")) == nil, "RGW's empty ETag is no identity")
        #expect(StoredObject(ObjectHead(size: 6, etag: "\"e\"", versionID: "v9"))?.versionID == "v9")
    }
}
