/// An account as a vendor's backend names it: an opaque string of 1 to ``maxBytes`` bytes of
/// UTF-8 with no NUL. The registry never stores it as text: the server keeps a keyed hash of it,
/// as it does for identifiers, and the core sees only that hash (``BindingChange/account``).
public struct AccountName: Hashable, Sendable {
    /// The longest account name, in UTF-8 bytes.
    public static let maxBytes = 256

    public let text: String

    /// Throws ``IdentityError/invalidAccount(_:)`` for an empty name, one longer than
    /// ``maxBytes``, or one that holds NUL.
    public init(validating text: String) throws(IdentityError) {
        let length = text.utf8.count
        guard length > 0 else { throw .invalidAccount("an account must not be empty") }
        guard length <= Self.maxBytes else {
            throw .invalidAccount("\(quoted(text)) is \(length) bytes; the most is \(Self.maxBytes)")
        }
        guard !text.containsNUL else { throw .invalidAccount("\(quoted(text)) holds NUL") }
        self.text = text
    }
}
