import RegistryCore
import RegistryWire

/// Who this node's peers are, counted as nodes, not links: a member reached through two
/// addresses (a relay and its own) is one peer, and a member no link has reached yet is a peer
/// all the same. Pure rules over the links' status and the cluster's members.
enum ClusterPeers {
    /// The distinct peers: every link's node (or, before it answered, its address), and every
    /// member that was not removed, this node left out.
    static func count(links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID) -> Int {
        var peers = Set<String>()
        for link in links where link.state != "own-address" {
            peers.insert(link.nodeID.isEmpty ? "address " + link.address : link.nodeID)
        }
        for (node, member) in members where node != own && !member.removed { peers.insert(node.value) }
        return peers.count
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
