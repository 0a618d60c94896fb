import RegistryCore

/// `registry.v1.BindRequest` and `registry.v1.UnbindRequest`: an account and a device of one
/// vendor, unvalidated.
public struct BindingRequest: Hashable, Sendable {
    /// The vendor, by one of its bundle IDs or by name (as a lookup names it).
    public var scope: LookupRequest.Scope
    /// The vendor backend's name for the account.
    public var account: String
    public var deviceID: String

    public init(scope: LookupRequest.Scope, account: String, deviceID: String) {
        self.scope = scope
        self.account = account
        self.deviceID = deviceID
    }
}

/// `registry.v1.AccountRequest`: an account's devices, or a device's accounts.
public struct AccountQuery: Hashable, Sendable {
    public enum Subject: Hashable, Sendable {
        /// An account by its name.
        case account(String)
        /// An account by its key (``AccountBindingsMessage/accountKey``).
        case accountKey(String)
        /// Every account whose binds named this device or one merged with it.
        case device(String)
        case unspecified
    }

    public var scope: LookupRequest.Scope
    public var subject: Subject

    public init(scope: LookupRequest.Scope, subject: Subject) {
        self.scope = scope
        self.subject = subject
    }
}

/// `registry.v1.BindOutcome`.
public enum BindOutcomeCode: Int32, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case unspecified = 0
    case bound = 1
    case alreadyBound = 2
    case rejected = 3
    case unbound = 4
    case notBound = 5

    public var description: String {
        switch self {
        case .unspecified: return "unspecified"
        case .bound: return "bound"
        case .alreadyBound: return "already-bound"
        case .rejected: return "rejected"
        case .unbound: return "unbound"
        case .notBound: return "not-bound"
        }
    }
}

/// `registry.v1.BoundDevice`.
public struct BoundDeviceMessage: Hashable, Sendable, Codable {
    public var deviceID: String
    public var sinceMillis: UInt64
    public var lastActiveMillis: UInt64

    public init(deviceID: String, sinceMillis: UInt64, lastActiveMillis: UInt64) {
        self.deviceID = deviceID
        self.sinceMillis = sinceMillis
        self.lastActiveMillis = lastActiveMillis
    }
}

/// `registry.v1.UnboundDevice`.
public struct UnboundDeviceMessage: Hashable, Sendable, Codable {
    /// `registry.v1.UnbindReason`.
    public enum Reason: Int32, Hashable, Sendable, Codable, CustomStringConvertible {
        case unspecified = 0
        case unbound = 1
        case replaced = 2
        case refused = 3

        public var description: String {
            switch self {
            case .unspecified: return "unspecified"
            case .unbound: return "unbound"
            case .replaced: return "replaced"
            case .refused: return "refused"
            }
        }
    }

    public var deviceID: String
    public var reason: Reason
    /// For ``Reason/replaced``: the device that took its place; empty otherwise.
    public var replacedBy: String
    public var atMillis: UInt64

    public init(deviceID: String, reason: Reason, replacedBy: String = "", atMillis: UInt64) {
        self.deviceID = deviceID
        self.reason = reason
        self.replacedBy = replacedBy
        self.atMillis = atMillis
    }
}

/// `registry.v1.AccountBindings`: one account's devices.
public struct AccountBindingsMessage: Hashable, Sendable, Codable {
    public var vendor: String
    /// The keyed hash of the account's name, as UUID text.
    public var accountKey: String
    public var bound: [BoundDeviceMessage]
    public var unbound: [UnboundDeviceMessage]

    public init(vendor: String, accountKey: String, bound: [BoundDeviceMessage], unbound: [UnboundDeviceMessage]) {
        self.vendor = vendor
        self.accountKey = accountKey
        self.bound = bound
        self.unbound = unbound
    }
}

/// `registry.v1.BindResult`.
public struct BindResultMessage: Hashable, Sendable {
    public var outcome: BindOutcomeCode
    /// The device the `replace` policy unbound to make room; empty when none.
    public var replacedDeviceID: String
    /// The account after the change (as it was, when nothing changed).
    public var account: AccountBindingsMessage?

    public init(outcome: BindOutcomeCode, replacedDeviceID: String = "", account: AccountBindingsMessage?) {
        self.outcome = outcome
        self.replacedDeviceID = replacedDeviceID
        self.account = account
    }
}
