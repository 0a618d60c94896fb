/// How many devices one account of a vendor may be bound to, and what a bind past that does.
///
/// Only devices bound or re-bound within ``activeWithinDays`` of a bind count toward the limit
/// when a window is set; a device outside it stays bound but takes no place. A backend that
/// binds on every login keeps a device active by logging in on it.
public struct BindingPolicy: Hashable, Sendable {
    /// What a bind does when the account already has ``maxDevices`` counted devices.
    public enum PastLimit: String, Hashable, Sendable, CaseIterable {
        /// The bind is refused, and the answer names the bound devices, so that the app can ask
        /// the user which one to unbind.
        case reject
        /// The least recently active counted device is unbound (the lowest device ID among equals),
        /// and the answer names it.
        case replace
    }

    /// The highest limit a policy may set.
    public static let maxDevicesLimit = 1_000
    /// The longest activity window, in days (ten years).
    public static let maxActiveWithinDays = 3_650

    /// The most devices counted for one account: 1 to ``maxDevicesLimit``.
    public let maxDevices: Int
    /// When set, only devices active within this many days of a bind count (1 to
    /// ``maxActiveWithinDays``); nil counts every bound device.
    public let activeWithinDays: Int?
    public let pastLimit: PastLimit

    /// One device per account, every bound device counted, a bind past it rejected: a vendor
    /// that sets no policy gets this one.
    public static let `default` = BindingPolicy(checked: 1, activeWithinDays: nil, pastLimit: .reject)

    /// Throws ``IdentityError/invalidBindingPolicy(_:)`` for a limit or window out of range.
    public init(maxDevices: Int, activeWithinDays: Int? = nil, pastLimit: PastLimit = .reject) throws(IdentityError) {
        guard (1...Self.maxDevicesLimit).contains(maxDevices) else {
            throw .invalidBindingPolicy("the most devices per account must be 1 to \(Self.maxDevicesLimit), not \(maxDevices)")
        }
        if let days = activeWithinDays, !(1...Self.maxActiveWithinDays).contains(days) {
            throw .invalidBindingPolicy("the activity window must be 1 to \(Self.maxActiveWithinDays) days, not \(days)")
        }
        self.init(checked: maxDevices, activeWithinDays: activeWithinDays, pastLimit: pastLimit)
    }

    private init(checked maxDevices: Int, activeWithinDays: Int?, pastLimit: PastLimit) {
        self.maxDevices = maxDevices
        self.activeWithinDays = activeWithinDays
        self.pastLimit = pastLimit
    }

    /// The earliest activity that counts toward the limit for a bind at `time`, in HLC
    /// milliseconds; 0 when every bound device counts.
    func countedSince(_ time: HLCTimestamp) -> UInt64 {
        guard let days = activeWithinDays else { return 0 }
        let window = UInt64(days) * 86_400_000
        return time.millis > window ? time.millis - window : 0
    }
}
