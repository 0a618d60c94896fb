import RegistryCore
import RegistryWire
import Synchronization

/// What the request path and the stats see of the peer links: their status, read from the
/// replication when it runs (``attach(_:)``); none on a node without peers.
final class LinkedPeers: Sendable {
    private let source = Mutex<(@Sendable () -> [PeerLinkStatus])?>(nil)

    /// The replication's links report their status through `statuses` from now on.
    func attach(_ statuses: @escaping @Sendable () -> [PeerLinkStatus]) {
        source.withLock { $0 = statuses }
    }

    /// Every link's status now.
    var statuses: [PeerLinkStatus] {
        source.withLock { $0 }?() ?? []
    }

    /// The peers this node streams to (its own address, once recognised, left out).
    func count(members: [NodeID: Member], own: NodeID) -> Int {
        ClusterPeers.count(links: statuses, members: members, own: own)
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
