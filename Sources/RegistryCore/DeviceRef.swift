/// A device as every operation names it: enough for a replica to create the device if this is
/// the first it hears of it, and to rank it in a merge.
public struct DeviceRef: Hashable, Sendable {
    public let id: DeviceID
    /// When the device was minted.
    public let created: HLCTimestamp
    /// The node that minted it.
    public let origin: NodeID
    public let vendor: Vendor

    public init(id: DeviceID, created: HLCTimestamp, origin: NodeID, vendor: Vendor) {
        self.id = id
        self.created = created
        self.origin = origin
        self.vendor = vendor
    }

    /// The merge rule (design brief section 2): of several devices found to be one, the winner
    /// is the minimum by (created HLC, origin node ID, device ID bytes). Never arrival order.
    public func winsMerge(against other: DeviceRef) -> Bool {
        if created != other.created { return created < other.created }
        if origin != other.origin { return origin < other.origin }
        return id < other.id
    }
}
