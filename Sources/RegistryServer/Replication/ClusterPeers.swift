import RegistryCore
import RegistryWire

/// Who this node's peers are, counted as nodes, not links: a member reached through two
/// addresses (a relay and its own) is one peer, and a member no link has reached yet is a peer
/// all the same; and which of them a vendor change waits for. Pure rules over the links' status
/// and the cluster's members.
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

    /// The peers a vendor change catches up with (``CatchUpBarrier``), unlike ``count(links:members:own:)``
    /// by what they may hold: by name, every member that was not removed, and every node a link
    /// has streamed to (``PeerLinkStatus/provenNodeID``), whose join may not have reached this
    /// node yet; this node and removed members left out. By address, every `--peers` address
    /// (``PeerLinkStatus/configured``) whose link has not streamed to the node that answers there
    /// now: that node may hold registrations no member this node knows holds (the simulation
    /// found changes decided without them). An address a removed member advertised is left out,
    /// so that a removed node's address kept in `--peers` holds nothing back; any other address
    /// nothing answers at does, until it answers or leaves `--peers`. A link the node made for a
    /// member's advertised address counts through that member.
    static func catchingUp(links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID) -> (nodes: Set<NodeID>, addresses: Set<String>) {
        var nodes = Set(members.lazy.filter { $0.key != own && !$0.value.removed }.map(\.key))
        let removedAddresses = Set(members.values.lazy.filter(\.removed).map(\.address))
        var addresses = Set<String>()
        for link in links where link.state != "own-address" {
            if !link.provenNodeID.isEmpty {
                let node = NodeID(trusted: link.provenNodeID)
                if node != own && members[node]?.removed != true { nodes.insert(node) }
            }
            // Not streamed to yet, or another node answers there now.
            let unproven = link.provenNodeID.isEmpty || (!link.nodeID.isEmpty && link.nodeID != link.provenNodeID)
            if link.configured && unproven && !removedAddresses.contains(link.address) { addresses.insert(link.address) }
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
