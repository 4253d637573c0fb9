/// S3's rules for bucket names, checked when the configuration and the command line are
/// read: a name no server can have must fail before anything is staged or recorded against
/// it, not after (SeaweedFS answers it with a 400 per request; others create nothing).
///
/// The rules every S3 region and S3-compatible server shares: 3 to 63 characters; lowercase
/// letters, digits, dots and hyphens only; a letter or digit first and last; no two dots in
/// a row; not an IPv4 address. And the names S3 reserves for its own uses (``reserved``): a
/// bucket can never have one, and other S3-compatible servers follow the same rules, so a
/// configuration naming one is a mistake to say at once, not a 400 on the first request.
public enum BucketName {
    /// The prefixes and suffixes S3 reserves, with what it reserves them for (Amazon S3 User
    /// Guide, "General purpose bucket naming rules", and the directory and table bucket rules
    /// for `--x-s3` and `--table-s3`). `sthree-` covers `sthree-configurator`.
    public static let reserved: [(affix: Affix, use: String)] = [
        (.prefix("xn--"), "internationalized domain names"),
        (.prefix("sthree-"), "S3's own buckets"),
        (.prefix("amzn-s3-demo-"), "the examples in AWS's documentation"),
        (.suffix("-s3alias"), "access point aliases"),
        (.suffix("--ol-s3"), "Object Lambda access point aliases"),
        (.suffix(".mrap"), "Multi-Region Access Points"),
        (.suffix("--x-s3"), "directory buckets (S3 Express One Zone), which ingest does not write to"),
        (.suffix("--table-s3"), "table buckets (S3 Tables), which hold no objects"),
    ]

    /// The start or the end of a name that S3 reserves.
    public enum Affix: Sendable, Equatable, CustomStringConvertible {
        case prefix(String)
        case suffix(String)

        func matches(_ name: String) -> Bool {
            switch self {
            case .prefix(let text): name.hasPrefix(text)
            case .suffix(let text): name.hasSuffix(text)
            }
        }

        public var description: String {
            switch self {
            case .prefix(let text): "begins with '\(text)'"
            case .suffix(let text): "ends with '\(text)'"
            }
        }
    }

    /// The reserved prefix or suffix `name` has, and what S3 keeps it for; nil when it has none.
    public static func reservation(_ name: String) -> (affix: Affix, use: String)? {
        reserved.first { $0.affix.matches(name) }
    }

    /// Why `name` cannot be a bucket, in a phrase that names the broken rule; nil when it can.
    public static func problem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else {
            return "it is \(name.unicodeScalars.count) characters long; a bucket name has 3 to 63"
        }
        func isLetterOrDigit(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        if let bad = name.unicodeScalars.first(where: { scalar in
            !(scalar.isASCII && (isLetterOrDigit(UInt8(scalar.value)) || scalar == "." || scalar == "-"))
        }) {
            let what = ("A"..."Z").contains(bad) ? "an uppercase letter ('\(bad)')" : "'\(bad)'"
            return "it holds \(what); a bucket name holds only lowercase letters, digits, dots and hyphens"
        }
        guard isLetterOrDigit(bytes.first!), isLetterOrDigit(bytes.last!) else {
            return "it begins or ends with '.' or '-'; a bucket name begins and ends with a letter or digit"
        }
        if name.contains("..") { return "it holds two dots in a row ('..')" }
        if isIPv4Address(name) { return "it is written like an IP address; a bucket name cannot be one" }
        if let (affix, use) = reservation(name) {
            return "it \(affix), and S3 reserves such names for \(use): no bucket is named so"
        }
        return nil
    }

    /// The message for a name that breaks a rule: the rule, and how to fix it where it was
    /// given (`origin`, like "[s3] bucket" or "--bucket"), with a valid name close to it when
    /// there is one.
    public static func fix(_ name: String, problem: String, origin: String) -> String {
        var text = "'\(name)' is not a valid S3 bucket name: \(problem). "
        if reservation(name) != nil {
            return text + "Give the bucket's real name in \(origin); S3 reserves names beginning with "
                + reserved.compactMap { if case .prefix(let text) = $0.affix { text } else { nil } }.joined(separator: ", ")
                + " and ending with "
                + reserved.compactMap { if case .suffix(let text) = $0.affix { text } else { nil } }.joined(separator: ", ")
                + "."
        }
        let suggestion = String(name.lowercased().map { $0 == "_" || $0 == " " ? "-" : $0 })
        if suggestion != name, Self.problem(suggestion) == nil {
            text += "Give the bucket's real name in \(origin), like '\(suggestion)'."
        } else {
            text += "Give the bucket's real name in \(origin): 3 to 63 lowercase letters, digits, dots and hyphens, "
                + "beginning and ending with a letter or digit."
        }
        return text
    }

    /// Four dot-separated decimal numbers (`192.168.5.4`), as S3 recognises an address.
    static func isIPv4Address(_ name: String) -> Bool {
        let groups = name.split(separator: ".", omittingEmptySubsequences: false)
        return groups.count == 4
            && groups.allSatisfy { group in
                (1...3).contains(group.count) && group.allSatisfy(\.isASCII) && group.allSatisfy(\.isNumber)
                    && Int(group).map { $0 <= 255 } == true
            }
    }
}
