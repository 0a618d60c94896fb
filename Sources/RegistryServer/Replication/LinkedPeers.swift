import RegistryCore
import RegistryWire
import Synchronization

/// What the request path and the stats see of the peer links: their status, read from the
/// replication when it runs (``attach(_:askHoldings:)``); none on a node without peers.
final class LinkedPeers: Sendable {
    private let source = Mutex<(statuses: @Sendable () -> [PeerLinkStatus], askHoldings: @Sendable () -> Void)?>(nil)
    /// ``clonesAllowed(wallMillis:members:own:)``'s last answer, and when it was worked out.
    private let cloneGate = Mutex<(checkedAt: UInt64, allowed: Bool)?>(nil)

    /// The replication's links report their status through `statuses` from now on, and
    /// `askHoldings` asks each to learn what its peer holds now (``PeerLink/askHoldings()``).
    func attach(_ statuses: @escaping @Sendable () -> [PeerLinkStatus], askHoldings: @escaping @Sendable () -> Void) {
        source.withLock { $0 = (statuses, askHoldings) }
    }

    /// Asks every link's peer what it holds now; their answers show in ``statuses``
    /// (``PeerLinkStatus/answeredAtMillis``).
    func askHoldings() {
        source.withLock { $0 }?.askHoldings()
    }

    /// Every link's status now.
    var statuses: [PeerLinkStatus] {
        source.withLock { $0 }?.statuses() ?? []
    }

    /// The peers this node streams to (its own address, once recognised, left out).
    func count(members: [NodeID: Member], own: NodeID) -> Int {
        ClusterPeers.count(links: statuses, members: members, own: own)
    }

    /// A vendor rule change asked to move devices is marked (``VendorIntent/moveRefusal``) unless
    /// this node streams to every other member and each runs ``ProtocolVersion/vendorMoves`` or
    /// later: a member before it would apply the change without its move and diverge for good.
    /// The mark refuses the change only if it does move devices (``NodeState/decideVendor``).
    /// `members` is asked only when some change asks to move.
    func holdMovesBackFromOldMembers(_ prepared: inout [NodeState.Prepared], members: () -> [NodeID: Member], own: NodeID) {
        for index in prepared.indices {
            guard case .vendorChange(.success(var intent)) = prepared[index], intent.move else { continue }
            let blocking = membersBefore(.vendorMoves, members: members(), own: own)
            guard !blocking.isEmpty else { continue }
            intent.moveRefusal = WireError(
                code: .unavailable,
                message:
                    "a move needs every member running and at protocol \(ProtocolVersion.vendorMoves) or later, or one would apply the change without its move; not so: \(blocking.joined(separator: ", "))")
            prepared[index] = .vendorChange(.success(intent))
        }
    }

    /// The other members this node does not stream to, or that run a protocol before `version`,
    /// each with why, sorted; empty when every one runs it.
    private func membersBefore(_ version: ProtocolVersion, members: [NodeID: Member], own: NodeID) -> [String] {
        let links = statuses
        var blocking = [String]()
        for (node, member) in members.sorted(by: { $0.key < $1.key }) where node != own && !member.removed {
            guard let link = links.first(where: { $0.nodeID == node.value && $0.state == "streaming" }) else {
                blocking.append("\(node) (not reached)")
                continue
            }
            if let peer = link.peerVersion, peer.isAtLeast(version) { continue }
            blocking.append("\(node) (protocol \(link.peerVersion ?? ProtocolVersion(major: 0, minor: 0)))")
        }
        return blocking
    }

    /// Whether this node may log a clone operation (``NodeState/clonesAllowed``): it streams to
    /// every other member and each runs ``ProtocolVersion/clones`` or later. Worked out again at
    /// most once a second of `wallMillis` (the node's clock), so that a request costs one lock;
    /// `members` is asked only then.
    func clonesAllowed(wallMillis: UInt64, members: () -> [NodeID: Member], own: NodeID) -> Bool {
        if let known = cloneGate.withLock({ $0 }), wallMillis >= known.checkedAt, wallMillis - known.checkedAt < 1_000 { return known.allowed }
        let allowed = membersBefore(.clones, members: members(), own: own).isEmpty
        cloneGate.withLock { $0 = (wallMillis, allowed) }
        return allowed
    }

    /// A removal of a node this node streams to now is refused unless it says `force`: the node
    /// is running, and removed it would go on taking writes until it learned of it.
    func refuseLiveRemovals(_ prepared: inout [NodeState.Prepared]) {
        for index in prepared.indices {
            guard case .removeMember(.success(let node), force: false) = prepared[index] else { continue }
            guard statuses.contains(where: { $0.nodeID == node.value && $0.state == "streaming" }) else { continue }
            prepared[index] = .refused(
                WireError(
                    code: .memberReachable,
                    message: "\(node) is running: this node streams to it now. Stop it first (a removed node that runs takes writes that never replicate), or remove it with --force"))
        }
    }
}
