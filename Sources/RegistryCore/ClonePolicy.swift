/// What a vendor's registry does when one keychain UUID shows up with two IDFVs that both stay
/// active: a keychain copied onto a second phone by a restored backup (`docs/identity.md`,
/// "Keychains cloned onto another phone").
public struct ClonePolicy: Hashable, Sendable {
    /// The action taken on a suspected clone.
    public enum Action: String, Hashable, Sendable, CaseIterable {
        /// A ``CloneOp`` marks the device (`registryctl device clones` lists it) and watchers
        /// hear `clone_suspected`; both phones keep the one device ID.
        case flag
        /// The IDFV that appeared later gets a device of its own, the keychain UUID stops linking
        /// IDFVs, and watchers hear `split`.
        case split
        /// Nothing is looked for.
        case off
    }

    /// The longest window, in days (ten years).
    public static let maxWindowDays = 3_650
    /// The window a vendor that sets none gets.
    public static let defaultWindowDays = 7

    public let action: Action
    /// The earlier IDFV counts as active again only when it registers within this many days
    /// after the later one first did (1 to ``maxWindowDays``).
    public let windowDays: Int

    /// Flag, within 7 days: a vendor that sets no policy gets this one.
    public static let `default` = ClonePolicy(checked: .flag, windowDays: defaultWindowDays)

    /// Throws ``IdentityError/invalidClonePolicy(_:)`` for a window out of range.
    public init(action: Action, windowDays: Int = ClonePolicy.defaultWindowDays) throws(IdentityError) {
        guard (1...Self.maxWindowDays).contains(windowDays) else {
            throw .invalidClonePolicy("the clone window must be 1 to \(Self.maxWindowDays) days, not \(windowDays)")
        }
        self.init(checked: action, windowDays: windowDays)
    }

    private init(checked action: Action, windowDays: Int) {
        self.action = action
        self.windowDays = windowDays
    }

    /// The window in HLC milliseconds.
    var windowMillis: UInt64 { UInt64(windowDays) * 86_400_000 }

    /// The action's number in logs and on the wire (0 is "not said": the default).
    public var wireAction: UInt8 {
        switch action {
        case .flag: return 1
        case .split: return 2
        case .off: return 3
        }
    }

    /// The policy read back from its wire numbers: 0 for the default action or window.
    public static func reading(action: UInt8, windowDays: Int) throws(IdentityError) -> ClonePolicy {
        let chosen: Action
        switch action {
        case 0, 1: chosen = .flag
        case 2: chosen = .split
        case 3: chosen = .off
        default: throw .invalidClonePolicy("clone action \(action) is not flag (1), split (2) or off (3)")
        }
        return try ClonePolicy(action: chosen, windowDays: windowDays == 0 ? defaultWindowDays : windowDays)
    }
}
