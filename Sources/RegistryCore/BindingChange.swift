/// A bind or an unbind of one account to one device, as it is logged and replicated.
///
/// Changes of one account are applied in ``precedes(_:)`` order: their HLC, then the origin node, the kind
/// and the device, so that every replica that holds the same changes orders them alike. An
/// account is named by the keyed hash of its ``AccountName`` within its vendor.
public struct BindingChange: Hashable, Sendable {
    public enum Kind: UInt8, Hashable, Sendable {
        case bind = 1
        case unbind = 2
    }

    public let kind: Kind
    public let vendor: Vendor
    /// The keyed hash of the account's name.
    public let account: UUID128
    /// The device as the request named it, which may be an alias by the time it is applied.
    public let device: DeviceID
    /// When the change was accepted.
    public let time: HLCTimestamp
    /// The node that accepted it.
    public let origin: NodeID

    public init(kind: Kind, vendor: Vendor, account: UUID128, device: DeviceID, time: HLCTimestamp, origin: NodeID) {
        self.kind = kind
        self.vendor = vendor
        self.account = account
        self.device = device
        self.time = time
        self.origin = origin
    }

    /// True when `self` is applied before `other` (the two being changes of one account).
    public func precedes(_ other: BindingChange) -> Bool {
        if time != other.time { return time < other.time }
        if origin != other.origin { return origin < other.origin }
        if kind != other.kind { return kind.rawValue < other.kind.rawValue }
        return device < other.device
    }
}
