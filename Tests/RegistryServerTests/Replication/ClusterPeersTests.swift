import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Peers are counted as nodes, and the log is kept for every member.
@Suite struct ClusterPeersTests {
    let own = NodeID(trusted: "node-a")
    let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)

    func link(
        _ address: String, node: String = "", state: String = "streaming", holds: UInt64 = 0, proven: String? = nil, configured: Bool = true
    ) -> PeerLinkStatus {
        var status = PeerLinkStatus(address: address)
        status.nodeID = node
        status.configured = configured
        status.provenNodeID = proven ?? (state == "streaming" || state == "sending-snapshot" ? node : "")
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

    /// A vendor change catches up with the members not removed and the nodes a link has streamed
    /// to (disconnected since, or sending a snapshot), even before their joins arrive, but not with
    /// a removed one whose link lingers; and, by address, with every `--peers` address whose link
    /// has not streamed to the node answering there now, but a removed member's. A link made for
    /// a member's advertised address counts through the member alone.
    @Test func aVendorChangeCatchesUpWithMembersProvenLinksAndUnreachedAddresses() {
        let links = [
            link("b:1", node: "node-b"), link("d:1", node: "node-d"), link("e:1", node: "node-e", state: "sending-snapshot"),
            link("f:1", node: "node-f", state: "disconnected", proven: "node-f"),
            // Streamed to node-h once; another node answers there now.
            link("h:1", node: "node-y", state: "handshaking", proven: "node-h"),
            link("10.0.0.8:1", node: "node-x", state: "handshaking"), link("10.0.0.9:1", state: "connecting"),
            link("gone:1", state: "connecting"), link("advertised:1", state: "connecting", configured: false),
            link("self:1", state: "own-address"),
        ]
        let members = [own: member(), NodeID(trusted: "node-b"): member(), NodeID(trusted: "node-c"): member(),
                       NodeID(trusted: "node-d"): member(removed: true),
                       NodeID(trusted: "node-g"): Member(address: "gone:1", addressAt: .zero, removed: true)]
        let peers = ClusterPeers.catchingUp(links: links, members: members, own: own)
        #expect(peers.nodes == Set(["node-b", "node-c", "node-e", "node-f", "node-h"].map { NodeID(trusted: $0) }))
        #expect(peers.addresses == ["h:1", "10.0.0.8:1", "10.0.0.9:1"])
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
