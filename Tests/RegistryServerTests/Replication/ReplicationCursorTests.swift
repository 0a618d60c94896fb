import RegistryCore
import Testing
@testable import RegistryServer

/// What a sender sends next, and how acknowledgements and the window bound it.
@Suite struct ReplicationCursorTests {
    let a = VersionVector.Log(origin: NodeID(trusted: "node-a"), epoch: 1)
    let c = VersionVector.Log(origin: NodeID(trusted: "node-c"), epoch: 2)

    func vector(_ entries: [(VersionVector.Log, UInt64)]) -> VersionVector {
        var vector = VersionVector()
        for (log, sequence) in entries { vector.recordAll(through: sequence, in: log) }
        return vector
    }

    @Test func sendsWhatTheReceiverLacksLogByLogInTurnIncludingForwardedLogs() throws {
        var cursor = ReplicationCursor(receiverHolds: vector([(a, 3)]), window: 8)
        let local = vector([(a, 10), (c, 4)])
        #expect(cursor.backlog(local: local) == 11)
        let first = try #require(cursor.nextRun(local: local))
        #expect(first.log == a && first.from == 4)
        _ = cursor.sending(log: a, through: 10, operations: 7, oldestMillis: 5)
        // Node c's log, which this node holds and the receiver lacks, is forwarded.
        let second = try #require(cursor.nextRun(local: local))
        #expect(second.log == c && second.from == 1)
        _ = cursor.sending(log: c, through: 4, operations: 4, oldestMillis: 9)
        #expect(cursor.nextRun(local: local) == nil, "everything is in flight")
        #expect(cursor.oldestUnacknowledgedMillis == 5)
    }

    @Test func theWindowBoundsBatchesInFlightAndAcknowledgementsOpenIt() throws {
        var cursor = ReplicationCursor(receiverHolds: VersionVector(), window: 2)
        var local = vector([(a, 1)])
        let one = cursor.sending(log: a, through: 1, operations: 1, oldestMillis: 1)
        local = vector([(a, 2)])
        let two = cursor.sending(log: a, through: 2, operations: 1, oldestMillis: 2)
        local = vector([(a, 3)])
        #expect(!cursor.canSend && cursor.nextRun(local: local) == nil)
        try cursor.acknowledged(two, held: vector([(a, 2)]))
        #expect(cursor.receiverHolds[a] == 2 && cursor.inFlight.map(\.batchID) == [one])
        #expect(cursor.nextRun(local: local)?.from == 3)
        #expect(throws: ReplicationCursor.UnknownBatch(batchID: 99)) { try cursor.acknowledged(99, held: VersionVector()) }
        #expect(cursor.backlog(local: local) == 1)
    }
}
