/// A validated, lower-cased reverse-DNS bundle ID such as `com.vendor.app1`.
///
/// Rules (design brief section 2): ASCII letters, digits and `-`; labels separated by `.`;
/// at least two labels, none empty; at most 255 bytes. Compared case-insensitively, so it is
/// stored lower-cased.
public struct BundleID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The maximum length in bytes.
    public static let maxLength = 255

    /// The lower-case text, interned for the process: a copy counts no references
    /// (``InternedText``).
    public let text: InternedText
    /// Lower-case text.
    public var value: String { text.string }
    /// The labels, lower-case.
    public var labels: [Substring] { Self.labels(of: value) }

    /// ``labels`` of a normalised bundle ID's text.
    static func labels(of value: String) -> [Substring] { value.split(separator: ".", omittingEmptySubsequences: false) }

    /// Validates and normalises `text`.
    public init(parsing text: String) throws(IdentityError) {
        try self.init(parsing: text, minimumLabels: 2, what: "bundle ID")
    }

    /// Shared by bundle IDs and vendor-rule prefixes, which follow the same label grammar.
    init(parsing text: String, minimumLabels: Int, what: String) throws(IdentityError) {
        self.text = InternedText(try Self.normalized(text, minimumLabels: minimumLabels, what: what))
    }

    /// `text` validated and lower-cased, as a bundle ID made from it holds it, without making
    /// one: a read that names a bundle must not add its text to the process's interned texts
    /// (``InternedText``). `what` names the text in the errors.
    static func normalized(_ text: String, minimumLabels: Int = 2, what: String = "bundle ID") throws(IdentityError) -> String {
        let utf8 = text.utf8
        guard !utf8.isEmpty else { throw .invalidBundleID("the \(what) is empty") }
        guard utf8.count <= Self.maxLength else {
            throw .invalidBundleID("the \(what) is \(utf8.count) bytes; at most \(Self.maxLength) are allowed")
        }
        var lowered = [UInt8]()
        lowered.reserveCapacity(utf8.count)
        var labels = 1
        var labelLength = 0
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { throw .invalidBundleID("\(quoted(text)) has an empty label") }
                labels += 1
                labelLength = 0
                lowered.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                labelLength += 1
                lowered.append(byte + 32)
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                labelLength += 1
                lowered.append(byte)
            default:
                throw .invalidBundleID(
                    "\(quoted(text)) contains a character other than ASCII letters, digits, '-' and '.'")
            }
        }
        guard labelLength > 0 else { throw .invalidBundleID("\(quoted(text)) has an empty label") }
        guard labels >= minimumLabels else {
            throw .invalidBundleID("\(quoted(text)) needs at least \(minimumLabels) labels separated by '.'")
        }
        return String(decoding: lowered, as: UTF8.self)
    }

    /// True when `prefix`'s labels are the first labels of this ID (`com.acme` prefixes
    /// `com.acme.app` and `com.acme`, not `com.acmecorp.app`).
    public func hasLabelPrefix(_ prefix: String) -> Bool {
        Self.hasLabelPrefix(value, prefix)
    }

    /// ``hasLabelPrefix(_:)`` of a normalised bundle ID's text.
    static func hasLabelPrefix(_ value: String, _ prefix: String) -> Bool {
        guard value.hasPrefix(prefix) else { return false }
        let rest = value.utf8.dropFirst(prefix.utf8.count)
        return rest.isEmpty || rest.first == UInt8(ascii: ".")
    }

    public var description: String { value }

    public static func < (lhs: BundleID, rhs: BundleID) -> Bool { lhs.text < rhs.text }

    public static func == (lhs: BundleID, rhs: BundleID) -> Bool { lhs.text == rhs.text }

    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}

extension BundleID: Internable {
    var internHash: UInt64 { text.textHash }
}
