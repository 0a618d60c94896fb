/// A change to the cluster's members, logged and replicated like every other operation: a node
/// joined (and is reached at `address`), or an operator removed it.
public struct MembershipOp: Hashable, Sendable {
    public let node: NodeID
    /// Where peers reach the node (`host:port`); empty for a removal.
    public let address: String
    public let removed: Bool
    /// When the change was made (the HLC of the node that made it).
    public let at: HLCTimestamp

    public init(node: NodeID, address: String, removed: Bool, at: HLCTimestamp) {
        self.node = node
        self.address = address
        self.removed = removed
        self.at = at
    }
}

/// A member as the cluster's operations leave it. Applying membership operations is a join, so
/// every order gives the same members: a removal is final, and the address is the latest by
/// (HLC, address text).
public struct Member: Hashable, Sendable {
    public private(set) var address: String
    public private(set) var addressAt: HLCTimestamp
    public private(set) var removed: Bool

    public init(address: String, addressAt: HLCTimestamp, removed: Bool) {
        self.address = address
        self.addressAt = addressAt
        self.removed = removed
    }

    /// The member after `op` (about this member) is applied.
    func joined(with op: MembershipOp) -> Member {
        var member = self
        member.removed = removed || op.removed
        if !op.address.isEmpty, (op.at, op.address) > (addressAt, address) {
            member.address = op.address
            member.addressAt = op.at
        }
        return member
    }

    /// The member that `op` alone makes.
    init(_ op: MembershipOp) {
        self.init(address: op.address, addressAt: op.address.isEmpty ? .zero : op.at, removed: op.removed)
    }
}
