import Testing
@testable import RegistryCore

/// Membership operations join like every other operation: any order gives the same members.
@Suite struct MembershipTests {
    @Test func membersConvergeInEveryOrderAndARemovalIsFinal() throws {
        let a = NodeID(trusted: "node-a")
        let d = NodeID(trusted: "node-d")
        let ops = [
            MembershipOp(node: a, address: "10.0.0.1:7400", removed: false, at: HLCTimestamp(millis: 1, counter: 0)),
            MembershipOp(node: d, address: "10.0.0.4:7400", removed: false, at: HLCTimestamp(millis: 2, counter: 0)),
            MembershipOp(node: d, address: "10.0.0.9:7400", removed: false, at: HLCTimestamp(millis: 5, counter: 0)),
            MembershipOp(node: d, address: "", removed: true, at: HLCTimestamp(millis: 3, counter: 0)),
        ]
        var generator = SplitMix64(seed: 3)
        var reference = RegistryState()
        for op in ops { reference.apply(.membership(op)) }
        #expect(reference.clusterMembers[d] == Member(address: "10.0.0.9:7400", addressAt: HLCTimestamp(millis: 5, counter: 0), removed: true))
        #expect(reference.clusterMembers[a]?.removed == false)
        for _ in 0..<20 {
            var replica = RegistryState()
            for op in (ops + ops.prefix(2)).shuffled(using: &generator) { replica.apply(.membership(op)) }
            #expect(replica.snapshot() == reference.snapshot())
        }
        // Members survive a snapshot.
        var restorer = RegistryState.Restorer()
        reference.forEachSnapshotRecord { try! restorer.add($0) }
        #expect(try restorer.finish().clusterMembers == reference.clusterMembers)
    }
}
