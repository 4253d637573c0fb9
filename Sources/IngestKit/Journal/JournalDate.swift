import Foundation
import GRDB

/// A date as the journal stores it: text `yyyy-MM-dd HH:mm:ss.SSS` in UTC, which is GRDB's
/// own format for `Date` (so the text sorts in time order, SQLite's date functions read it,
/// and journals written before read the same), but formatted here.
///
/// GRDB formats dates with a `DateFormatter` and reads them back through a `Calendar` with a
/// locale, which bring ICU, its locale and calendar data and the time zone files into the
/// process: a good share of a run's peak memory, and time at every start, for one fixed
/// numeric format.
///
/// Every date the journal writes or reads goes through this type: in records, through
/// ``JournalRecord``; as a statement argument or a fetched value, wrapped (`JournalDate(date)`,
/// `JournalDate.fetchOne`).
struct JournalDate: DatabaseValueConvertible {
    let date: Date

    init(_ date: Date) { self.date = date }

    var databaseValue: DatabaseValue { Self.text(date).databaseValue }

    static func fromDatabaseValue(_ value: DatabaseValue) -> JournalDate? { parse(value).map(Self.init) }

    /// Reads what ``text(_:)`` writes; any other text or a number (not written by any
    /// version of ingest) as GRDB reads dates.
    static func parse(_ value: DatabaseValue) -> Date? {
        if let text = String.fromDatabaseValue(value), let date = parse(text) { return date }
        return Date.fromDatabaseValue(value)
    }

    /// `yyyy-MM-dd HH:mm:ss.SSS` in UTC, or nil.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 23, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: " "),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: ".")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), let second = number(17..<19), let millisecond = number(20..<23),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var fields = CalendarTime()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month - 1)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(hour)
        fields.tm_min = Int32(minute)
        fields.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: Double(System.seconds(universal: fields)) + Double(millisecond) / 1000)
    }

    /// The stored text, to the nearest millisecond, as GRDB's `DateFormatter` rounds it.
    /// Written digit by digit into one buffer: every row a file makes carries a date or two,
    /// and joining thirteen strings took a visible share of the journal thread's time on a
    /// card of small files.
    static func text(_ date: Date) -> String {
        let milliseconds = ((date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate) * 1000)
            .rounded()
        let total = Int64(milliseconds)
        let seconds = total >= 0 ? total / 1000 : (total - 999) / 1000
        let millisecond = Int(total - seconds * 1000)
        let fields = System.universalTime(seconds)
        let year = Int(fields.tm_year) + 1900
        // Years of more than four digits (or before year 0) keep their sign and width.
        let yearText = (0...9999).contains(year) ? nil : String(year)
        return String(unsafeUninitializedCapacity: 19 + (yearText?.utf8.count ?? 4)) { buffer in
            var at = 0
            func put(_ value: Int, _ width: Int) {
                var value = value
                for offset in stride(from: width - 1, through: 0, by: -1) {
                    buffer[at + offset] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                at += width
            }
            func put(_ byte: Unicode.Scalar) {
                buffer[at] = UInt8(ascii: byte)
                at += 1
            }
            if let yearText {
                for byte in yearText.utf8 { buffer[at] = byte; at += 1 }
            } else {
                put(year, 4)
            }
            put("-"); put(Int(fields.tm_mon) + 1, 2); put("-"); put(Int(fields.tm_mday), 2)
            put(" "); put(Int(fields.tm_hour), 2); put(":"); put(Int(fields.tm_min), 2); put(":"); put(Int(fields.tm_sec), 2)
            put("."); put(millisecond, 3)
            return at
        }
    }
}

/// A journal record: its `Date` properties are stored and read as ``JournalDate`` text.
public protocol JournalRecord: EncodableRecord, FetchableRecord {}

extension JournalRecord {
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .custom { JournalDate($0) }
    }

    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .custom { JournalDate.parse($0) }
    }
}
