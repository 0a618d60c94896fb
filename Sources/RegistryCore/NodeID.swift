/// The stable name of a registry node: 1 to 64 bytes of lower-case ASCII letters, digits and `-`.
/// It is part of the merge order, so it is compared byte by byte.
public struct NodeID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let maxLength = 64

    /// The name, interned for the process: a copy counts no references (``InternedText``).
    public let text: InternedText

    public var value: String { text.string }

    /// Thrown for a name that breaks the rules; the message says which.
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    public init(_ text: String) throws(Invalid) {
        try Self.check(text)
        self.text = InternedText(text)
    }

    /// The node `text` names when this process has made that node ID; nil otherwise, or when
    /// `text` is no node ID. For a client's text (a causal token, a watch cursor), which must
    /// not add names to the process's ``InternedText``s.
    public init?(known text: String) {
        guard (try? Self.check(text)) != nil, let known = InternedText.existing(text) else { return nil }
        self.text = known
    }

    /// Whether `text` is a valid node ID, without making one.
    public static func isValid(_ text: String) -> Bool {
        (try? check(text)) != nil
    }

    private static func check(_ text: String) throws(Invalid) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else {
            throw Invalid(description: "node ID \(quoted(text)) must be 1 to \(Self.maxLength) bytes")
        }
        let allowed = text.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
        }
        guard allowed else {
            throw Invalid(description: "node ID \(quoted(text)) may hold only lower-case letters, digits and '-'")
        }
    }

    /// For values read back from this node's own durable log, which were validated when written.
    public init(trusted text: String) {
        self.text = InternedText(text)
    }

    public var description: String { value }

    /// Byte by byte (``InternedText``'s order).
    public static func < (lhs: NodeID, rhs: NodeID) -> Bool { lhs.text < rhs.text }

    public static func == (lhs: NodeID, rhs: NodeID) -> Bool { lhs.text == rhs.text }

    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}

extension NodeID: Internable {
    var internHash: UInt64 { text.textHash }
}
