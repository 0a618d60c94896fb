import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// ``CausalWaits`` and the vector's token rules, as plain values.
@Suite struct CausalWaitsTests {
    let a1 = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let a2 = LogID(origin: NodeID(trusted: "node-a"), epoch: 2)
    let b1 = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)


    @Test func aParkedRequestLeavesOnceCoveredOrOnceItsDeadlinePasses() {
        var waits = CausalWaits<String>()
        waits.park("needs a1:5", until: VersionVector.holding([(a1, 5)]), deadlineMillis: 1_000)
        waits.park("needs a1:3 b1:2", until: VersionVector.holding([(a1, 3), (b1, 2)]), deadlineMillis: 2_000)
        waits.park("needs a2:1", until: VersionVector.holding([(a2, 1)]), deadlineMillis: 500)
        #expect(waits.covered(by: VersionVector.holding([(a1, 4), (b1, 1)])).isEmpty)
        #expect(waits.covered(by: VersionVector.holding([(a1, 4), (b1, 2)])).map(\.payload) == ["needs a1:3 b1:2"])
        #expect(waits.expired(nowMillis: 499).isEmpty)
        let expired = waits.expired(nowMillis: 1_000)
        #expect(expired.map(\.payload) == ["needs a1:5", "needs a2:1"] && expired.map(\.deadlineMillis) == [1_000, 500])
        #expect(waits.isEmpty)
    }

    @Test func theShortfallNamesEachLogHeldTooLittle() {
        let held = VersionVector.holding([(a1, 4), (b1, 9)])
        let shortfall = held.shortfall(against: VersionVector.holding([(a1, 6), (a2, 1), (b1, 9)]))
        #expect(shortfall.map(\.log) == [a1, a2] && shortfall.map(\.needed) == [6, 1] && shortfall.map(\.held) == [4, 0])
        #expect(held.shortfall(against: VersionVector.holding([(a1, 4)])).isEmpty)
    }

    @Test func theTokenLeavesOutWhatEveryMemberHolds() {
        let held = VersionVector.holding([(a1, 4), (a2, 7), (b1, 9)])
        #expect(held.causalToken(above: [:]).positions.map(\.sequence) == [4, 7, 9])
        #expect(held.causalToken(above: [a1: 4, a2: 6]).positions == [
            LogPosition(origin: "node-a", epoch: 2, sequence: 7), LogPosition(origin: "node-b", epoch: 1, sequence: 9),
        ])
        #expect(held.causalToken(above: nil).isEmpty)
    }

    /// The error names each log's origin, where it is reached, and how far behind this node is.
    @Test func notCaughtUpNamesTheNodesThatHoldIt() {
        let members = [NodeID(trusted: "node-a"): Member(address: "10.0.0.1:7400", addressAt: .zero, removed: false)]
        let error = CausalHolding.notCaughtUp([(a1, 6, 4), (b1, 2, 0)], members: members, waited: 2_000)
        #expect(error.code == .notCaughtUp && error.retryable)
        #expect(error.message.contains("node-a at 10.0.0.1:7400 holds its log 1 through 6, this node through 4"), "\(error.message)")
        #expect(error.message.contains("node-b holds its log 1 through 2, this node through 0"))
    }
}
