/// What a client token grants: the vendors whose devices it may touch, what it may do with
/// them, until when, and whom it was issued to (for logs).
public struct AccessToken: Equatable, Sendable {
    /// The vendors a token covers.
    public enum Vendors: Equatable, Sendable {
        /// Every vendor (operators' tokens).
        case all
        /// These vendor names (lower-case, as `RegisterResult.vendor` spells them).
        case only(Set<String>)

        public func contains(_ vendor: String) -> Bool {
            switch self {
            case .all: return true
            case .only(let names): return names.contains(vendor)
            }
        }
    }

    /// Whom the token was issued to: free text for logs ("billing-api").
    public let subject: String
    public let vendors: Vendors
    public let roles: Set<TokenRole>
    /// Seconds since the Unix epoch after which the token is refused.
    public let expiresAt: UInt64

    public init(subject: String, vendors: Vendors, roles: Set<TokenRole>, expiresAt: UInt64) {
        self.subject = subject
        self.vendors = vendors
        self.roles = roles
        self.expiresAt = expiresAt
    }

    /// Whether the token allows `role` on `vendor`'s devices.
    public func allows(_ role: TokenRole, vendor: String) -> Bool {
        roles.contains(role) && vendors.contains(vendor)
    }
}

/// What a token lets its holder do.
public enum TokenRole: String, CaseIterable, Comparable, Sendable {
    /// Register devices (RegisterRequest, RegisterBatchRequest).
    case register
    /// Resolve device IDs and look up identifiers.
    case read
    /// Operator requests: stats, snapshots, cluster membership.
    case admin

    public static func < (lhs: TokenRole, rhs: TokenRole) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
