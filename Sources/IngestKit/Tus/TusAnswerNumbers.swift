/// The byte counts a tus server answers with (`Upload-Offset`, `Upload-Length`,
/// `Tus-Max-Size`), read strictly and checked against what we know before they are used.
///
/// An offset decides which byte is sent next and when an upload is taken as complete, so
/// one that cannot be true is an error, never trusted: a negative one, one that is not a
/// plain decimal number (`+5`, ` 5`, `5.0`, `0x5`), one beyond the upload's length, and, in
/// the answer to a PATCH, one below the offset sent (the server would have lost bytes it
/// had acknowledged) or beyond the offset sent plus the chunk (bytes we never sent). Taking
/// any of them would skip bytes of the file or leave an object that is not the file.
enum TusAnswerNumbers {
    /// A header's value as a byte count: ASCII digits only, no sign, within `Int64`.
    static func byteCount(_ text: String?, header: String, status: Int) throws(TusError) -> Int64 {
        guard let text else { throw .unexpectedAnswer(status: status, detail: "no \(header) header") }
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let value = Int64(text)
        else {
            throw .unexpectedAnswer(status: status, detail: "\(header) \"\(text.prefix(40))\" is not a byte count")
        }
        return value
    }

    /// An `Upload-Offset` answer, read as ``byteCount(_:header:status:)`` and refused unless
    /// it lies in `lowest...highest` (see the type's documentation).
    static func offset(_ text: String?, lowest: Int64, highest: Int64?, status: Int) throws(TusError) -> Int64 {
        let offset = try byteCount(text, header: "Upload-Offset", status: status)
        if offset < lowest {
            throw .unexpectedAnswer(status: status, detail: "Upload-Offset \(offset) is below \(lowest), which it had acknowledged")
        }
        if let highest, offset > highest {
            throw .unexpectedAnswer(status: status, detail: "Upload-Offset \(offset) is beyond \(highest), the most it can hold")
        }
        return offset
    }
}
