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
    /// A vendor name is not one the rules can produce, or a vendor rule is broken; the string
    /// says which.
    case invalidVendor(String)
    /// An account name is empty, longer than ``AccountName/maxBytes`` or holds NUL.
    case invalidAccount(String)
    /// A binding policy's limit or activity window is out of range; the string says which.
    case invalidBindingPolicy(String)
    /// A clone policy's action or window is out of range; the string says which.
    case invalidClonePolicy(String)

    public var description: String {
        switch self {
        case .invalidBundleID(let reason): return "invalid bundle ID: \(reason)"
        case .invalidIdentifier(let reason): return "invalid identifier: \(reason)"
        case .missingIdentifier: return "the request carries no identifier; send a keychain UUID, an IDFV, or both"
        case .invalidDeviceID(let text): return "invalid device ID \(quoted(text)): expected UUID text"
        case .invalidVendor(let reason): return "invalid vendor: \(reason)"
        case .invalidAccount(let reason): return "invalid account: \(reason)"
        case .invalidBindingPolicy(let reason): return "invalid binding policy: \(reason)"
        case .invalidClonePolicy(let reason): return "invalid clone policy: \(reason)"
        }
    }
}

/// Quotes user input for an error message, cut to a readable length. Quotes, backslashes and
/// control characters (NUL among them) are escaped, so that the message shows exactly what was
/// sent and stays one line of text.
func quoted(_ text: String) -> String {
    let limit = 80
    var result = "\""
    var shown = 0
    for scalar in text.unicodeScalars {
        if shown >= limit {
            result += "…"
            break
        }
        shown += 1
        switch scalar {
        case "\"": result += "\\\""
        case "\\": result += "\\\\"
        case "\0": result += "\\0"
        case "\n": result += "\\n"
        case "\t": result += "\\t"
        case "\r": result += "\\r"
        default:
            if scalar.value < 0x20 || scalar.value == 0x7F {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
    }
    return result + "\""
}
