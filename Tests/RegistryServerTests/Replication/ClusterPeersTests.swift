import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Peers are counted as nodes, and the log is kept for every member.
@Suite struct ClusterPeersTests {
    let own = NodeID(trusted: "node-a")
    let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)

    func link(_ address: String, node: String = "", state: String = "streaming", holds: UInt64 = 0) -> PeerLinkStatus {
        var status = PeerLinkStatus(address: address)
        status.nodeID = node
        status.state = state
        status.peerHolds = holds > 0 ? [LogPosition(origin: "node-a", epoch: 1, sequence: holds)] : []
        return status
    }

    func member(removed: Bool = false) -> Member { Member(address: "x:1", addressAt: .zero, removed: removed) }

    @Test func twoLinksToOneNodeAreOnePeerAndAMemberWithoutALinkIsOne() {
        let links = [link("relay:1", node: "node-b"), link("10.0.0.2:1", node: "node-b"), link("self:1", state: "own-address")]
        #expect(ClusterPeers.count(links: links, members: [:], own: own) == 1)
        let members = [own: member(), NodeID(trusted: "node-b"): member(), NodeID(trusted: "node-c"): member(),
                       NodeID(trusted: "node-d"): member(removed: true)]
        #expect(ClusterPeers.count(links: links, members: members, own: own) == 2)
        // A link that has not answered yet counts by its address.
        #expect(ClusterPeers.count(links: links + [link("10.0.0.9:1", state: "connecting")], members: members, own: own) == 3)
    }

    /// The peers by name leave out this node and removed members, even while a link to one
    /// lingers; a link whose peer has not answered is named by its address.
    @Test func thePeersByNameLeaveOutRemovedMembers() {
        let links = [link("b:1", node: "node-b"), link("d:1", node: "node-d"), link("e:1", node: "node-e"), link("10.0.0.9:1", state: "connecting")]
        let members = [own: member(), NodeID(trusted: "node-b"): member(), NodeID(trusted: "node-c"): member(),
                       NodeID(trusted: "node-d"): member(removed: true)]
        let peers = ClusterPeers.distinct(links: links, members: members, own: own)
        #expect(peers.nodes == Set(["node-b", "node-c", "node-e"].map { NodeID(trusted: $0) }))
        #expect(peers.addresses == ["10.0.0.9:1"])
    }

    @Test func theFloorKeepsWhatAMemberWithoutALinkLacks() {
        let links = [link("b:1", node: "node-b", holds: 50)]
        #expect(ClusterPeers.retentionFloor(links: links, members: [:], own: own)?[log] == 50)
        let members = [NodeID(trusted: "node-b"): member(), NodeID(trusted: "node-c"): member()]
        #expect(ClusterPeers.retentionFloor(links: links, members: members, own: own)?[log] ?? 0 == 0)
        // A removed member holds nothing back.
        let removed = [NodeID(trusted: "node-b"): member(), NodeID(trusted: "node-c"): member(removed: true)]
        #expect(ClusterPeers.retentionFloor(links: links, members: removed, own: own)?[log] == 50)
        #expect(ClusterPeers.retentionFloor(links: [], members: [:], own: own) == nil)
    }
}
