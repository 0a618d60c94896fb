/// The kinds of device identifier an app can present. Raw values match the wire enum
/// `registry.v1.IdentifierKind`; new kinds get new numbers.
public enum IdentifierKind: Int32, CaseIterable, Comparable, Sendable, CustomStringConvertible {
    /// The UUID shared through the vendor's keychain access group.
    case keychain = 1
    /// `identifierForVendor`.
    case idfv = 2

    public var description: String {
        switch self {
        case .keychain: return "keychain"
        case .idfv: return "idfv"
        }
    }

    public static func < (lhs: IdentifierKind, rhs: IdentifierKind) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One validated identifier: a kind and a non-zero UUID.
public struct Identifier: Hashable, Sendable, CustomStringConvertible {
    public let kind: IdentifierKind
    public let value: UUID128

    public init(kind: IdentifierKind, value: UUID128) {
        self.kind = kind
        self.value = value
    }

    /// Validates an identifier as it arrives on the wire.
    public init(rawKind: Int32, text: String) throws(IdentityError) {
        try self.init(PresentedIdentifier(rawKind: rawKind, text: text))
    }

    /// Validates an identifier as it arrives on the wire (its UUID text already parsed, when
    /// it was UUID text).
    public init(_ presented: PresentedIdentifier) throws(IdentityError) {
        guard let kind = IdentifierKind(rawValue: presented.rawKind) else {
            throw .invalidIdentifier("unknown identifier kind \(presented.rawKind)")
        }
        guard let value = presented.value.uuid else {
            throw .invalidIdentifier("\(kind) \(quoted(presented.text)) is not UUID text")
        }
        guard !value.isZero else { throw .invalidIdentifier("\(kind) is the all-zero UUID") }
        self.init(kind: kind, value: value)
    }

    public var description: String { "\(kind)=\(value.text)" }
}

/// An identifier exactly as a client sent it, before validation.
public struct PresentedIdentifier: Hashable, Sendable {
    /// The wire enum value, possibly one this node does not know.
    public let rawKind: Int32
    /// The value's text, held as a UUID when it is UUID text (see ``UUIDText``).
    public let value: UUIDText

    public init(rawKind: Int32, text: String) {
        self.init(rawKind: rawKind, value: UUIDText(text))
    }

    public init(rawKind: Int32, value: UUIDText) {
        self.rawKind = rawKind
        self.value = value
    }

    /// The text as the client sent it.
    public var text: String { value.text }
}
