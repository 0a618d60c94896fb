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
        self.text = InternedText(text)
    }

    /// For values read back from this node's own durable log, which were validated when written.
    public init(trusted text: String) {
        self.text = InternedText(text)
    }

    public var description: String { value }

    public static func < (lhs: NodeID, rhs: NodeID) -> Bool {
        lhs.text != rhs.text && lhs.text.utf8.lexicographicallyPrecedes(rhs.text.utf8)
    }

    public static func == (lhs: NodeID, rhs: NodeID) -> Bool { lhs.text == rhs.text }

    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}

extension NodeID: Internable {
    var internHash: UInt64 { text.textHash }
}
