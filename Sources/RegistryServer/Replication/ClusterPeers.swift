import RegistryCore
import RegistryWire

/// Who this node's peers are, counted as nodes, not links: a member reached through two
/// addresses (a relay and its own) is one peer, and a member no link has reached yet is a peer
/// all the same. Pure rules over the links' status and the cluster's members.
enum ClusterPeers {
    /// The distinct peers: every link's node (or, before it answered, its address), and every
    /// member that was not removed, this node left out.
    static func count(links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID) -> Int {
        let peers = distinct(links: links, members: members, own: own)
        return peers.nodes.count + peers.addresses.count
    }

    /// The distinct peers, by name: every member that was not removed and every node a link
    /// reached (its join may not have reached this node yet), removed ones and this node left
    /// out; and, by address, the links whose peer has not said its name yet.
    static func distinct(links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID) -> (nodes: Set<NodeID>, addresses: Set<String>) {
        var nodes = Set(members.lazy.filter { $0.key != own && !$0.value.removed }.map(\.key))
        var addresses = Set<String>()
        for link in links where link.state != "own-address" {
            guard !link.nodeID.isEmpty else {
                addresses.insert(link.address)
                continue
            }
            let node = NodeID(trusted: link.nodeID)
            if node != own && members[node]?.removed != true { nodes.insert(node) }
        }
        return (nodes, addresses)
    }

    /// What every member holds, as far as this node knows (docs/cluster.md, "Trimming": the log is trimmed only
    /// after every member has it): the floor over every link's last word, and nothing for a
    /// member no link has heard from. Nil when there is no peer: a single node keeps no journal
    /// for anyone.
    static func retentionFloor(links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID) -> [LogID: UInt64]? {
        let linked = links.filter { $0.state != "own-address" }
        var holds = linked.map { (try? VersionVector(positions: $0.peerHolds)) ?? VersionVector() }
        let heard = Set(linked.map(\.nodeID))
        for (node, member) in members where node != own && !member.removed && !heard.contains(node.value) {
            holds.append(VersionVector())
        }
        return VersionVector.floor(of: holds)
    }
}
