import RegistryCore
import Testing
@testable import RegistryServer

/// What a sender sends next, and how acknowledgements and the window bound it.
@Suite struct ReplicationCursorTests {
    let a = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let c = LogID(origin: NodeID(trusted: "node-c"), epoch: 2)


    func cursor(holding holds: VersionVector, window: Int = 8) -> ReplicationCursor {
        ReplicationCursor(receiverHolds: holds, window: window, ownOrigin: a.origin, forwardDelayMillis: 500, nowMillis: 1_000)
    }

    @Test func sendsItsOwnLogAtOnceAndForwardsOthersOnlyOnceTheReceiverLacksThemForAWhile() throws {
        var cursor = cursor(holding: VersionVector.holding([(a, 3)]))
        let local = VersionVector.holding([(a, 10), (c, 4)])
        #expect(cursor.backlog(local: local) == 11)
        let firstRun = cursor.nextRun(local: local, nowMillis: 1_000)
        let first = try #require(firstRun)
        #expect(first.log == a && first.from == 4)
        _ = cursor.sending(log: a, through: 10, operations: 7, oldestMillis: 5)
        // Node c's log: its origin normally delivers it, so not yet.
        #expect(cursor.nextRun(local: local, nowMillis: 1_200) == nil)
        #expect(!cursor.probeDue(nowMillis: 1_300), "a batch is in flight; its acknowledgement will tell")
        try cursor.acknowledged(1, held: VersionVector.holding([(a, 10), (c, 1)]), nowMillis: 1_300)
        #expect(cursor.nextRun(local: local, nowMillis: 1_400) == nil)
        #expect(!cursor.probeDue(nowMillis: 1_400) && cursor.probeDue(nowMillis: 1_550))
        // Still lacking c's operations 2...4 half a second on: forwarded.
        let secondRun = cursor.nextRun(local: local, nowMillis: 1_500)
        let second = try #require(secondRun)
        #expect(second.log == c && second.from == 2)
        _ = cursor.sending(log: c, through: 4, operations: 3, oldestMillis: 9)
        #expect(cursor.nextRun(local: local, nowMillis: 2_000) == nil, "everything is sent")
        #expect(cursor.oldestUnacknowledgedMillis == 9)
    }

    @Test func aReceiverThatGotTheOperationsFromTheirOriginIsNotSentThemAgain() throws {
        var cursor = cursor(holding: VersionVector())
        let local = VersionVector.holding([(c, 4)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        #expect(cursor.probeDue(nowMillis: 1_250))
        let probe = cursor.probing(nowMillis: 1_250)
        try cursor.acknowledged(probe, held: VersionVector.holding([(c, 4)]), nowMillis: 1_260)
        #expect(cursor.nextRun(local: local, nowMillis: 5_000) == nil && !cursor.probeDue(nowMillis: 5_000))
        #expect(cursor.backlog(local: local) == 0)
    }

    @Test func theWindowBoundsBatchesInFlightAndAcknowledgementsOpenIt() throws {
        var cursor = cursor(holding: VersionVector(), window: 2)
        var local = VersionVector.holding([(a, 1)])
        let one = cursor.sending(log: a, through: 1, operations: 1, oldestMillis: 1)
        local = VersionVector.holding([(a, 2)])
        let two = cursor.sending(log: a, through: 2, operations: 1, oldestMillis: 2)
        local = VersionVector.holding([(a, 3)])
        #expect(!cursor.canSend && cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(two, held: VersionVector.holding([(a, 2)]), nowMillis: 1_000)
        #expect(cursor.receiverHolds[a] == 2 && cursor.inFlight.map(\.batchID) == [one])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000)?.from == 3)
        #expect(throws: ReplicationCursor.UnknownBatch(batchID: 99)) { try cursor.acknowledged(99, held: VersionVector(), nowMillis: 1_000) }
        #expect(cursor.backlog(local: local) == 1)
    }

    @Test func theRetentionFloorIsWhatEveryPeerHolds() {
        let floor = VersionVector.floor(of: [VersionVector.holding([(a, 10), (c, 4)]), VersionVector.holding([(a, 7)]), VersionVector.holding([(a, 12), (c, 9)])])
        #expect(floor == [a: 7, c: 0], "a peer that holds none of c's log keeps all of it")
        #expect(VersionVector.floor(of: []) == nil)
    }
}
