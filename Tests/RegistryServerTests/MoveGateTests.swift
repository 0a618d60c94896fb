import Synchronization
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// A vendor move waits for every member (``LinkedPeers/holdMovesBackFromOldMembers(_:members:own:)``):
/// a member before ``ProtocolVersion/vendorMoves`` would apply the change without its move and
/// diverge, so the node asked refuses a change that moves devices unless it streams to every
/// other member and each gave that version or a later one in its welcome.
@Suite struct MoveGateTests {
    let own = NodeID(trusted: "node-a")
    let members: [NodeID: Member] = [
        NodeID(trusted: "node-a"): Member(address: "a:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-b"): Member(address: "b:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-c"): Member(address: "c:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-d"): Member(address: "d:7400", addressAt: .zero, removed: true),
    ]

    func link(_ node: String, _ state: String, version: ProtocolVersion?) -> PeerLinkStatus {
        var status = PeerLinkStatus(address: "\(node):7400")
        status.nodeID = node
        status.state = state
        status.peerVersion = version
        return status
    }

    func refusal(links statuses: [PeerLinkStatus], move: Bool = true) -> WireError? {
        let links = LinkedPeers()
        links.attach({ statuses }, askHoldings: {})
        let rule = try! VendorRule(name: "acme", prefixes: ["com.acme"])
        var prepared: [NodeState.Prepared] = [.vendorChange(.success(VendorIntent(action: .set(rule, adding: true), move: move)))]
        var asked = 0
        links.holdMovesBackFromOldMembers(&prepared, members: { asked += 1; return members }, own: own)
        guard case .vendorChange(.success(let intent)) = prepared[0] else { return nil }
        if !move { #expect(asked == 0, "members are read only for a move") }
        return intent.moveRefusal
    }

    @Test func aMoveWaitsUntilEveryOtherMemberStreamsAtAVersionWithMoves() {
        let b = link("node-b", "streaming", version: .current)
        #expect(refusal(links: [b, link("node-c", "streaming", version: .vendorMoves)]) == nil, "every member can move; the removed one does not count")
        let down = refusal(links: [b, link("node-c", "disconnected", version: .current)])
        #expect(down?.code == .unavailable && down?.message.contains("node-c (not reached)") == true, "\(String(describing: down))")
        // A peer before 1.1 says no version in its welcome: read as 0.0.
        let old = refusal(links: [b, link("node-c", "streaming", version: ProtocolVersion(major: 0, minor: 0))])
        #expect(old?.message.contains("node-c (protocol 0.0)") == true, "\(String(describing: old))")
        #expect(refusal(links: [b, link("node-c", "streaming", version: ProtocolVersion(major: 1, minor: 0))]) != nil)
        #expect(refusal(links: [], move: false) == nil, "a change that asks no move is not held back")
    }

    @Test func theMarkRefusesOnlyAChangeThatMovesDevices() throws {
        let helper = AccountRequestTests()
        var node = try helper.node()
        let blocked = WireError(code: .unavailable, message: "node-c (not reached)")
        func ask(_ rule: VendorRule) -> ServerBody {
            var operations = [LoggedOperation]()
            return node.decideVendor(VendorIntent(action: .set(rule, adding: true), move: true, moveRefusal: blocked), wallMillis: 1_000, operations: &operations)
        }
        // Nothing registered under com.quiet: nothing moves, the change goes through.
        guard case .vendorRules = ask(try VendorRule(name: "quiet", prefixes: ["com.quiet"])) else {
            Issue.record("a change that moves nothing was refused")
            return
        }
        _ = helper.device(&node, "com.busy.app", idfv: helper.idfvs[0])
        guard case .error(let error) = ask(try VendorRule(name: "busy", prefixes: ["com.busy"])) else {
            Issue.record("a move went through while a member could not carry it out")
            return
        }
        #expect(error == blocked)
    }

    /// A clone operation waits for every member too (``LinkedPeers/clonesAllowed(wallMillis:members:own:)``):
    /// a member before ``ProtocolVersion/clones`` refuses the batch that holds one. The answer is
    /// kept for a second of the node's clock.
    @Test func aCloneIsLoggedOnlyWhileEveryOtherMemberReadsClones() {
        let statuses = Mutex([link("node-b", "streaming", version: .current), link("node-c", "streaming", version: .vendorMoves)])
        let links = LinkedPeers()
        links.attach({ statuses.withLock { $0 } }, askHoldings: {})
        var asked = 0
        #expect(!links.clonesAllowed(wallMillis: 10_000, members: { asked += 1; return members }, own: own), "node-c runs 1.1")
        statuses.withLock { $0[1] = link("node-c", "streaming", version: .clones) }
        #expect(!links.clonesAllowed(wallMillis: 10_999, members: { asked += 1; return members }, own: own), "kept for a second")
        #expect(links.clonesAllowed(wallMillis: 11_000, members: { asked += 1; return members }, own: own))
        #expect(asked == 2)
        statuses.withLock { $0[0] = link("node-b", "disconnected", version: .current) }
        #expect(!links.clonesAllowed(wallMillis: 12_000, members: { members }, own: own), "node-b not reached")
        #expect(LinkedPeers().clonesAllowed(wallMillis: 0, members: { [own: members[own]!] }, own: own), "a node alone")
    }
}

