/// Why an input was refused by the identity rules. Each case maps to one wire error code.
public enum IdentityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bundle ID breaks the reverse-DNS rules; the string says which one.
    case invalidBundleID(String)
    /// An identifier is malformed, all-zero, of an unknown kind, or repeated.
    case invalidIdentifier(String)
    /// The request carried no identifier at all.
    case missingIdentifier
    /// The text is not a device ID.
    case invalidDeviceID(String)
    /// A vendor name is not one the rules can produce.
    case invalidVendor(String)

    public var description: String {
        switch self {
        case .invalidBundleID(let reason): return "invalid bundle ID: \(reason)"
        case .invalidIdentifier(let reason): return "invalid identifier: \(reason)"
        case .missingIdentifier: return "the request carries no identifier; send a keychain UUID, an IDFV, or both"
        case .invalidDeviceID(let text): return "invalid device ID \(quoted(text)): expected UUID text"
        case .invalidVendor(let text): return "invalid vendor \(quoted(text))"
        }
    }
}

/// Quotes user input for an error message, cut to a readable length.
func quoted(_ text: String) -> String {
    let limit = 80
    if text.utf8.count <= limit { return "\"\(text)\"" }
    return "\"\(String(decoding: text.utf8.prefix(limit), as: UTF8.self))…\""
}
