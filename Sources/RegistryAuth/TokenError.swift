/// Why a token was refused. Each message says what to do; none reveals the key.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The node requires a token and the hello carried none.
    case missing
    /// Not of the form `rgt1.<claims>.<signature>`, or its claims do not parse.
    case malformed(String)
    /// The signature does not match: issued under another secret, or altered.
    case forged
    /// Past its expiry (seconds since the Unix epoch).
    case expired(at: UInt64)

    public var description: String {
        switch self {
        case .missing: return "this node requires a token in the hello (registryctl token issue)"
        case .malformed(let reason): return "the token is malformed: \(reason)"
        case .forged: return "the token's signature does not verify: it was issued under another secret, or altered"
        case .expired(let at): return "the token expired at \(at) (seconds since the Unix epoch); issue a new one"
        }
    }
}
